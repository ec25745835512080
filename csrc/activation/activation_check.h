// Shared input validation for the activation ops of stableops
// (activation_functors.h lists them).
//
// The CPU kernels (activation_cpu.cpp), the CUDA/ROCm kernels (activation.cu)
// and the fakes (through the CPU kernels on meta tensors: csrc/core/check.h)
// call check_activation() with the op's Info before touching any data, so
// every backend accepts exactly the same inputs and reports errors with the
// same messages. Every failure throws std::runtime_error via STD_TORCH_CHECK
// (a RuntimeError in Python) whose message starts with "<op>: " and names the
// offending argument and value.
//
// Contract (identical on every backend):
//   * out (`result` for silu_and_mul*) and input on one device, whose type is
//     the kernel's;
//   * one dtype, float32, float16 or bfloat16;
//   * input at least 1-D; gated ops: input [..., 2d] with an even last dim,
//     out [..., d]; elementwise ops: out of input's shape;
//   * both last dims contiguous; the leading dims of each tensor viewable as
//     one dim of rows with one stride (any stride: slices, padding, a
//     broadcast input); out's rows must not overlap;
//   * limit >= 0 (not NaN); threshold and alpha not NaN.
// An empty tensor (zero rows or d == 0) is accepted with any strides.
#pragma once

#include <cstdint>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>

#include "csrc/activation/activation_functors.h"

namespace stableops {

// What the kernels need: `rows` rows of `d` output elements; row r of out
// starts at out + r * out_stride, row r of input at input + r * in_stride
// (elements). Elementwise ops whose rows lie back to back in both tensors
// come as one row of rows * d elements.
struct ActivationDims {
  int64_t rows;
  int64_t d;
  int64_t in_stride;
  int64_t out_stride;
};

// Validates every argument of the op described by `info` (see the contract
// above) and returns the problem dimensions. `expected_device_type` is the
// device type of the calling kernel (CPU or Meta for the CPU kernel, CUDA for
// the CUDA/ROCm kernel).
ActivationDims check_activation(
    const activation::Info& info,
    const activation::Scalars& scalars,
    const torch::stable::Tensor& out,
    const torch::stable::Tensor& input,
    torch::headeronly::DeviceType expected_device_type);

} // namespace stableops
