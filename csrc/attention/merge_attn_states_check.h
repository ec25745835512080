// Shared input validation for stableops::merge_attn_states.
//
// The CPU kernel (merge_attn_states_cpu.cpp), the CUDA/ROCm kernel
// (merge_attn_states.cu) and the fake (through the CPU kernel on meta
// tensors: csrc/core/check.h) call check_merge_attn_states_inputs() before
// touching any data, so every backend accepts exactly the same inputs and
// reports errors with the same messages. Every failure throws
// std::runtime_error via STD_TORCH_CHECK (a RuntimeError in Python) whose
// message starts with "merge_attn_states: " and names the offending argument
// and value.
//
// Contract enforced here (identical on every backend):
//   * prefix_output, suffix_output: 3-D [num_tokens, num_heads, head_size],
//     one dtype among float32, float16, bfloat16 (the input dtype); output
//     the same shape, of the input dtype, or FP8 (float8_e4m3fn or
//     float8_e4m3fnuz) exactly when output_scale is given;
//   * last dim contiguous (stride(2) == 1); strides of dims 0 and 1 are free
//     but must be multiples of the vector width (below), and data pointers
//     aligned to the vector width in bytes;
//   * head_size > 0 and a multiple of vec_bytes / input element size, i.e.
//     with the default 16-byte (128-bit) vectors: a multiple of 4 for
//     float32 and of 8 for float16/bfloat16;
//   * prefix_lse, suffix_lse, output_lse (optional): float32,
//     [num_heads, num_tokens], any strides;
//   * prefill_tokens_with_context (optional): >= 0; tokens at index >= it
//     take the suffix unchanged (a value above num_tokens merges every
//     token, as None does);
//   * output_scale (optional): float32, one element;
//   * all tensors on the same device, whose type is the kernel's device type.
#pragma once

#include <cstdint>
#include <optional>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/core/fp8.h"

namespace stableops {

// Bytes per vector memory access of the merge_attn_states kernels (128 bit).
inline constexpr int64_t kMergeAttnStatesVecBytes = 16;

struct MergeAttnStatesDims {
  int64_t num_tokens;
  int64_t num_heads;
  int64_t head_size;
  // Tokens [0, merge_tokens) merge; the rest take the suffix unchanged.
  int64_t merge_tokens;
  // With output_scale: the output's FP8 format.
  bool fp8_output;
  fp8::Format fp8_format;
};

// Validates every argument of merge_attn_states (see the contract above) and
// returns the problem dimensions. `expected_device_type` is the device type of
// the calling kernel (CPU for the CPU kernel, CUDA for the CUDA/ROCm kernel).
MergeAttnStatesDims check_merge_attn_states_inputs(
    const torch::stable::Tensor& output,
    const std::optional<torch::stable::Tensor>& output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse,
    std::optional<int64_t> prefill_tokens_with_context,
    const std::optional<torch::stable::Tensor>& output_scale,
    torch::headeronly::DeviceType expected_device_type,
    int64_t vec_bytes = kMergeAttnStatesVecBytes);

} // namespace stableops
