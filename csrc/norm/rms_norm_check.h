// Shared input validation for the RMSNorm family: stableops::rms_norm,
// rms_norm_weightless, fused_add_rms_norm and fused_add_rms_norm_weightless.
//
// The CPU kernels (rms_norm_cpu.cpp), the CUDA/ROCm kernels (rms_norm.cu) and
// the fakes (through the CPU kernel on meta tensors: csrc/core/check.h) call
// check_rms_norm() or check_fused_add_rms_norm() before touching any data, so
// every backend accepts exactly the same inputs and reports errors with the
// same messages. Every failure throws std::runtime_error via STD_TORCH_CHECK
// (a RuntimeError in Python) whose message starts with "<op>: " and names the
// offending argument and value.
//
// Contract enforced here (identical on every backend):
//   * the two row tensors (result and input, or input and residual):
//       - one dtype, float32, float16 or bfloat16, and the same shape
//         [..., hidden_size] of at least one dim;
//       - last dim contiguous (stride 1, unless hidden_size is 1);
//       - leading dims that flatten to rows of ONE stride (any stride: a row
//         slice of a wider tensor such as a fused QKV projection is fine),
//         else "<op>: <name>'s leading dims cannot be viewed as rows of one
//         stride" with its shape and strides;
//       - a written tensor's rows must not overlap (row stride >= hidden_size
//         when there is more than one row): several rows would write the same
//         elements;
//   * weight (the ops with a weight): 1-D [hidden_size], same dtype and
//     device, contiguous;
//   * epsilon: finite and >= 0;
//   * all tensors on the same device, whose type is the kernel's device type.
// Zero tokens (or hidden_size 0) is valid: the kernels then do nothing.
// Data pointers are read only from tensors that passed; on meta tensors (the
// fake's validation) they are offsets, never dereferenced.
#pragma once

#include <cstdint>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

namespace stableops {

// What the kernels need, in one place for every backend: the problem size,
// the operands' data pointers and row strides (elements) and epsilon. A
// tensor of at most one row reports hidden_size as its row stride.
struct RmsNormProblem {
  const char* op; // the op's name, for messages
  bool fused; // fused_add_rms_norm(_weightless)
  bool weighted; // rms_norm, fused_add_rms_norm
  torch::headeronly::ScalarType dtype;
  int32_t device_index;
  int64_t rows; // product of the leading dims
  int64_t hidden; // size of the last dim
  void* out; // written: rms_norm's result, fused_add_rms_norm's input
  int64_t out_stride;
  const void* in; // read: the input (the same memory as out for fused)
  int64_t in_stride;
  void* residual; // the fused ops' residual (read and written)
  int64_t res_stride;
  const void* weight; // the weighted ops' weight
  float epsilon;
};

// rms_norm(result, input, weight, epsilon), or rms_norm_weightless when
// `weight` is nullptr (the op name in messages follows).
RmsNormProblem check_rms_norm(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor* weight,
    double epsilon,
    torch::headeronly::DeviceType expected_device_type);

// fused_add_rms_norm(input, residual, weight, epsilon), or
// fused_add_rms_norm_weightless when `weight` is nullptr.
RmsNormProblem check_fused_add_rms_norm(
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& residual,
    const torch::stable::Tensor* weight,
    double epsilon,
    torch::headeronly::DeviceType expected_device_type);

} // namespace stableops
