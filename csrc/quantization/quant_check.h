// Shared input validation for the quantization ops of stableops:
//
//   static_scaled_fp8_quant, dynamic_scaled_fp8_quant,
//   dynamic_per_token_scaled_fp8_quant, static_scaled_int8_quant,
//   dynamic_scaled_int8_quant.
//
// Each op has ONE check function here. Its CPU kernel (*_cpu.cpp), its
// CUDA/ROCm kernel (*.cu) and its fake (through the CPU kernel on meta
// tensors: csrc/core/check.h) call it before touching any data, so every
// backend accepts exactly the same inputs and reports errors with the same
// messages ("<op>: <argument> ... <value>"). Nothing reads tensor data here.
//
// Common contract (every op):
//   * all tensors on one device, of the kernel's device type;
//   * input: float32, float16 or bfloat16, at least 2-D [..., H]: the leading
//     dims are the rows (T = their product), viewed with ONE row stride (any
//     value: rows may be padded or overlap); the last dim contiguous;
//   * result: the same shape as input, last dim contiguous, leading dims
//     viewable as rows with one stride, rows not overlapping (stride >= H);
//     FP8 ops take float8_e4m3fn or float8_e4m3fnuz (its dtype picks the
//     format), INT8 ops int8;
//   * scales float32, zero points (azp) int32.
// Alignment is never an error: the GPU kernels take a scalar path where the
// 16-byte vector path does not apply.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>

#include "csrc/core/fp8.h"

namespace stableops {

// The input/result pair viewed as rows: row r, column c of the input is at
// input.data_ptr() + r * in_row_stride + c (elements), of the result at
// result.data_ptr() + r * out_row_stride + c.
struct QuantRows {
  int64_t num_rows = 0;  // T: the product of the leading dims
  int64_t hidden = 0;    // H: the last dim
  int64_t in_row_stride = 0;
  int64_t out_row_stride = 0;
};

// static_scaled_fp8_quant: scale (r, c) = scale_data[(r / group_m) *
// scale_stride_m + (c / group_n) * scale_stride_n]. Every scale layout is one
// of these groups: per-tensor (group = [T, H], strides 0), per-token
// ([1, H]), per-channel ([T, 1]), or [gm, gn] blocks.
struct StaticFp8Plan {
  QuantRows rows;
  fp8::Format format = fp8::Format::kE4M3FN;
  int64_t group_m = 1;  // >= 1
  int64_t group_n = 1;  // >= 1
  int64_t scale_stride_m = 0;
  int64_t scale_stride_n = 0;
};

StaticFp8Plan check_static_scaled_fp8_quant(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    const std::optional<std::vector<int64_t>>& group_shape,
    torch::headeronly::DeviceType expected_device_type);

// dynamic_scaled_fp8_quant: scale has one element.
struct DynamicFp8Plan {
  QuantRows rows;
  fp8::Format format = fp8::Format::kE4M3FN;
};

DynamicFp8Plan check_dynamic_scaled_fp8_quant(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    torch::headeronly::DeviceType expected_device_type);

// dynamic_per_token_scaled_fp8_quant: scale [T, 1] (row r at
// scale_data[r * scale_stride]); scale_ub absent or one float32 element.
struct PerTokenFp8Plan {
  QuantRows rows;
  fp8::Format format = fp8::Format::kE4M3FN;
  int64_t scale_stride = 0;
  bool has_scale_ub = false;
};

PerTokenFp8Plan check_dynamic_per_token_scaled_fp8_quant(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    const std::optional<torch::stable::Tensor>& scale_ub,
    torch::headeronly::DeviceType expected_device_type);

// static_scaled_int8_quant: scale one float32 element, azp absent or one
// int32 element.
struct StaticInt8Plan {
  QuantRows rows;
  bool has_azp = false;
};

StaticInt8Plan check_static_scaled_int8_quant(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    const std::optional<torch::stable::Tensor>& azp,
    torch::headeronly::DeviceType expected_device_type);

// dynamic_scaled_int8_quant: scale float32 [T, 1]; azp absent (symmetric) or
// int32 [T, 1] (asymmetric).
struct DynamicInt8Plan {
  QuantRows rows;
  int64_t scale_stride = 0;
  bool has_azp = false;
  int64_t azp_stride = 0;
};

DynamicInt8Plan check_dynamic_scaled_int8_quant(
    const torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    const std::optional<torch::stable::Tensor>& azp,
    torch::headeronly::DeviceType expected_device_type);

}  // namespace stableops
