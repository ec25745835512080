// Declarations of every stableops kernel. Each op is declared exactly once
// here; csrc/registration.cpp is the only place that registers them.
//
// Stable ABI only: this header (and everything in csrc/) may include nothing
// but torch/csrc/stable/*, torch/headeronly/* and the C shim. TORCH_TARGET_VERSION
// is supplied by the build (-DTORCH_TARGET_VERSION=0x020B000000000000ULL,
// i.e. PyTorch 2.11); never define it in source.
//
// Signatures are chosen to work with TORCH_BOX:
//   schema `Tensor!`   -> torch::stable::Tensor&
//   schema `Tensor!?`  -> std::optional<torch::stable::Tensor>
//   schema `Tensor`    -> const torch::stable::Tensor&
//   schema `int`       -> int64_t
//   schema `-> ()`     -> void
#pragma once

#include <cstdint>
#include <optional>

#include <torch/csrc/stable/tensor.h>

namespace stableops {

// ---------------------------------------------------------------------------
// merge_attn_states
//
// stableops::merge_attn_states(Tensor! output, Tensor!? output_lse,
//     Tensor prefix_output, Tensor prefix_lse,
//     Tensor suffix_output, Tensor suffix_lse) -> ()
//
// Merges two partial attention results (e.g. prefix-cache and new-token
// attention) using their log-sum-exp values:
//   values (output/prefix_output/suffix_output): [num_tokens, num_heads,
//       head_size], dtype float32/float16/bfloat16 (all the same), last dim
//       contiguous.
//   LSE (prefix_lse/suffix_lse/output_lse): float32 [num_heads, num_tokens],
//       natural log, any strides.
//   A +inf LSE is treated as -inf. Where both LSEs are -inf the output is the
//   prefix values and output_lse is -inf. Otherwise with m = max(p, s),
//   ps = exp(p - m), ss = exp(s - m):
//     output = prefix * ps/(ps+ss) + suffix * ss/(ps+ss)
//     output_lse = m + log(ps + ss)
// Validation is shared by every backend and the fake: see
// csrc/attention/merge_attn_states_check.h.
// ---------------------------------------------------------------------------

// CPU kernel (csrc/attention/merge_attn_states_cpu.cpp).
void merge_attn_states_cpu(
    torch::stable::Tensor& output,
    std::optional<torch::stable::Tensor> output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse);

// CUDA/ROCm kernel (csrc/attention/merge_attn_states.cu, GPU builds only).
void merge_attn_states_cuda(
    torch::stable::Tensor& output,
    std::optional<torch::stable::Tensor> output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse);

// ---------------------------------------------------------------------------
// GPU-only utilities (implemented in csrc/*.cu; registered only when
// STABLEOPS_WITH_GPU is defined).
// ---------------------------------------------------------------------------

// stableops::get_cuda_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor
// (CPU dispatch key). Returns a CUDA tensor aliasing the (pinned) CPU memory.
torch::stable::Tensor get_cuda_view_from_cpu_tensor(
    const torch::stable::Tensor& cpu_tensor);

// stableops_cuda_utils::get_device_attribute(int attribute, int device_id)
//     -> int  (CompositeExplicitAutograd)
int64_t get_device_attribute(int64_t attribute, int64_t device_id);

// stableops_cuda_utils::get_max_shared_memory_per_block_device_attribute(
//     int device_id) -> int  (CompositeExplicitAutograd)
int64_t get_max_shared_memory_per_block_device_attribute(int64_t device_id);

// ---------------------------------------------------------------------------
// Quantization (csrc/quantization/; validation shared by every backend and
// the fake: quant_check.h). Input [..., H] float32/float16/bfloat16, rows =
// the leading dims (one row stride), last dim contiguous; scales float32,
// zero points int32. Every quotient x / scale is an IEEE float32 division.
//
// stableops::static_scaled_fp8_quant(Tensor! result, Tensor input,
//     Tensor scale, int[]? group_shape=None) -> ()
//   result float8_e4m3fn (MAX 448) or float8_e4m3fnuz (MAX 240):
//   q = fp8(clamp(x / scale, -MAX, MAX)), bit-exact with torch's conversion.
//   scale: one element (per-tensor); without group_shape also [T, 1]
//   (per-token) or [1, H] (per-channel); with group_shape [gm, gn] (-1 = the
//   whole dim) [ceil(T/gm), ceil(H/gn)], one scale per gm x gn block.
// stableops::dynamic_scaled_fp8_quant(Tensor! result, Tensor input,
//     Tensor! scale) -> ()
//   scale[0] = max(amax(|input|) / MAX, 1 / (MAX * 512)) (NaN if the input
//   holds a NaN), then quantised with it.
// stableops::dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input,
//     Tensor! scale, Tensor? scale_ub) -> ()
//   scale [T, 1]: per row max(min(amax_row, scale_ub) / MAX, 1 / (MAX*512)).
// stableops::static_scaled_int8_quant(Tensor! result, Tensor input,
//     Tensor scale, Tensor? azp) -> ()
//   result int8: q = sat(rne(x / scale) + azp), scale and azp one element.
// stableops::dynamic_scaled_int8_quant(Tensor! result, Tensor input,
//     Tensor! scale, Tensor!? azp) -> ()
//   per row: symmetric s = amax_row / 127; asymmetric (azp [T, 1] given)
//   s = (max - min) / 255, azp = rne(-128 - min / s); a row with s == 0 is
//   all zeros (azp 0). int8_quant_cpu.cpp spells out rne, sat and NaN.
// ---------------------------------------------------------------------------

void static_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<std::vector<int64_t>> group_shape);
void static_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<std::vector<int64_t>> group_shape);

void dynamic_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale);
void dynamic_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale);

void dynamic_per_token_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> scale_ub);
void dynamic_per_token_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> scale_ub);

void static_scaled_int8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp);
void static_scaled_int8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp);

void dynamic_scaled_int8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp);
void dynamic_scaled_int8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp);

} // namespace stableops
