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
//   schema `Tensor?`   -> const std::optional<torch::stable::Tensor>&
//   schema `Tensor`    -> const torch::stable::Tensor&
//   schema `int`       -> int64_t
//   schema `int?`      -> std::optional<int64_t>
//   schema `-> ()`     -> void
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/csrc/stable/tensor.h>

namespace stableops {

// ---------------------------------------------------------------------------
// merge_attn_states
//
// stableops::merge_attn_states(Tensor! output, Tensor!? output_lse,
//     Tensor prefix_output, Tensor prefix_lse,
//     Tensor suffix_output, Tensor suffix_lse,
//     int? prefill_tokens_with_context=None, Tensor? output_scale=None) -> ()
//
// Merges two partial attention results (e.g. prefix-cache and new-token
// attention) using their log-sum-exp values:
//   values (prefix_output/suffix_output): [num_tokens, num_heads, head_size],
//       float32/float16/bfloat16 (the same), last dim contiguous; output of
//       that dtype, or FP8 (float8_e4m3fn / float8_e4m3fnuz) when
//       output_scale (float32, one element) is given: then output holds
//       fp8(clamp(merged / output_scale, -MAX, MAX)).
//   LSE (prefix_lse/suffix_lse/output_lse): float32 [num_heads, num_tokens],
//       natural log, any strides.
//   A +inf LSE is treated as -inf. Where both LSEs are -inf the output is the
//   prefix values and output_lse is -inf. Otherwise with m = max(p, s),
//   ps = exp(p - m), ss = exp(s - m):
//     output = prefix * ps/(ps+ss) + suffix * ss/(ps+ss)
//     output_lse = m + log(ps + ss)
//   Tokens at index >= prefill_tokens_with_context (when given) have no
//   prefix: they take the suffix values and the suffix LSE unchanged.
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
    const torch::stable::Tensor& suffix_lse,
    std::optional<int64_t> prefill_tokens_with_context,
    const std::optional<torch::stable::Tensor>& output_scale);

// CUDA/ROCm kernel (csrc/attention/merge_attn_states.cu, GPU builds only).
void merge_attn_states_cuda(
    torch::stable::Tensor& output,
    std::optional<torch::stable::Tensor> output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse,
    std::optional<int64_t> prefill_tokens_with_context,
    const std::optional<torch::stable::Tensor>& output_scale);

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
// RMSNorm family (csrc/norm/)
//
// stableops::rms_norm(Tensor! result, Tensor input, Tensor weight,
//     float epsilon) -> ()
// stableops::fused_add_rms_norm(Tensor! input, Tensor! residual,
//     Tensor weight, float epsilon) -> ()
// stableops::rms_norm_weightless(Tensor! result, Tensor input,
//     float epsilon) -> ()
// stableops::fused_add_rms_norm_weightless(Tensor! input, Tensor! residual,
//     float epsilon) -> ()
//
// Rows of [..., hidden_size] float32/float16/bfloat16 tensors (one dtype per
// call; the last dim contiguous; leading dims of one row stride each, e.g. a
// row slice of a fused QKV tensor), statistics in float32:
//   rms_norm:  result = round(round(x * rsqrt(mean(x^2) + epsilon)) * weight)
//   fused_add_rms_norm: residual = round(input + residual), then
//              input = rms_norm(residual) in place
// where round() converts to the dtype (vLLM / HF rounding) and weight is 1-D
// [hidden_size]; the weightless variants use weight 1. Validation is shared
// by every backend and the fake: see csrc/norm/rms_norm_check.h.
// ---------------------------------------------------------------------------

// CPU kernels (csrc/norm/rms_norm_cpu.cpp).
void rms_norm_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& weight,
    double epsilon);
void fused_add_rms_norm_cpu(
    torch::stable::Tensor& input,
    torch::stable::Tensor& residual,
    const torch::stable::Tensor& weight,
    double epsilon);
void rms_norm_weightless_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    double epsilon);
void fused_add_rms_norm_weightless_cpu(
    torch::stable::Tensor& input,
    torch::stable::Tensor& residual,
    double epsilon);

// CUDA/ROCm kernels (csrc/norm/rms_norm.cu, GPU builds only).
void rms_norm_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& weight,
    double epsilon);
void fused_add_rms_norm_cuda(
    torch::stable::Tensor& input,
    torch::stable::Tensor& residual,
    const torch::stable::Tensor& weight,
    double epsilon);
void rms_norm_weightless_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    double epsilon);
void fused_add_rms_norm_weightless_cuda(
    torch::stable::Tensor& input,
    torch::stable::Tensor& residual,
    double epsilon);
// Activations (csrc/activation/: activation_functors.h defines the ops,
// activation_check.h the contract every backend and the fake validate).
//
// stableops::silu_and_mul(Tensor! result, Tensor input) -> ()
// stableops::mul_and_silu(Tensor! out, Tensor input) -> ()
// stableops::silu_and_mul_with_clamp(Tensor! result, Tensor input,
//     float limit) -> ()
// stableops::gelu_and_mul(Tensor! out, Tensor input) -> ()
// stableops::gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()
// stableops::fatrelu_and_mul(Tensor! out, Tensor input, float threshold) -> ()
// stableops::swigluoai_and_mul(Tensor! out, Tensor input, float alpha=1.702,
//     float limit=7.0) -> ()
// stableops::gelu_new(Tensor! out, Tensor input) -> ()
// stableops::gelu_fast(Tensor! out, Tensor input) -> ()
// stableops::gelu_quick(Tensor! out, Tensor input) -> ()
//
// float32/float16/bfloat16 (out and input alike), last dim contiguous, any
// leading shape whose rows have one stride; math in float32. Gated ops take
// input [..., 2d] and write out [..., d]:
//   silu_and_mul             silu(x1) * x2        (x1 = x[..., :d], x2 = x[..., d:])
//   mul_and_silu             x1 * silu(x2)
//   silu_and_mul_with_clamp  silu(min(x1, limit)) * clamp(x2, -limit, limit)
//   gelu_and_mul             gelu(x1) * x2        (exact, erf)
//   gelu_tanh_and_mul        gelu_tanh(x1) * x2
//   fatrelu_and_mul          (x1 if x1 > threshold else 0) * x2
//   swigluoai_and_mul        g = min(x[..., 0::2], limit),
//                            u = clamp(x[..., 1::2], -limit, limit),
//                            (u + 1) * g * sigmoid(alpha * g)
// Elementwise ops write out of input's shape:
//   gelu_new   0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
//   gelu_fast  0.5x(1 + tanh(0.7978845608x(1 + 0.044715x^2)))
//   gelu_quick x * sigmoid(1.702x)
// ---------------------------------------------------------------------------

// CPU kernels (csrc/activation/activation_cpu.cpp).
void silu_and_mul_cpu(torch::stable::Tensor& result, const torch::stable::Tensor& input);
void mul_and_silu_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void silu_and_mul_with_clamp_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    double limit);
void gelu_and_mul_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_tanh_and_mul_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void fatrelu_and_mul_cpu(
    torch::stable::Tensor& out,
    const torch::stable::Tensor& input,
    double threshold);
void swigluoai_and_mul_cpu(
    torch::stable::Tensor& out,
    const torch::stable::Tensor& input,
    double alpha,
    double limit);
void gelu_new_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_fast_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_quick_cpu(torch::stable::Tensor& out, const torch::stable::Tensor& input);

// CUDA/ROCm kernels (csrc/activation/activation.cu, GPU builds only).
void silu_and_mul_cuda(torch::stable::Tensor& result, const torch::stable::Tensor& input);
void mul_and_silu_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void silu_and_mul_with_clamp_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    double limit);
void gelu_and_mul_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_tanh_and_mul_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void fatrelu_and_mul_cuda(
    torch::stable::Tensor& out,
    const torch::stable::Tensor& input,
    double threshold);
void swigluoai_and_mul_cuda(
    torch::stable::Tensor& out,
    const torch::stable::Tensor& input,
    double alpha,
    double limit);
void gelu_new_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_fast_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
void gelu_quick_cuda(torch::stable::Tensor& out, const torch::stable::Tensor& input);
// rotary_embedding
//
// stableops::rotary_embedding(Tensor positions, Tensor! query, Tensor!? key,
//     int head_size, Tensor cos_sin_cache, bool is_neox,
//     int rope_dim_offset=0, bool inverse=False) -> ()
//
// Rotary position embedding, in place on query and key (vLLM's op):
//   query: [num_tokens, num_heads * head_size] or [num_tokens, num_heads,
//       head_size], float32/float16/bfloat16, last dim contiguous, token and
//       head strides free; key likewise with its own head count, or None.
//   positions: int64 [num_tokens]; cos_sin_cache: [max_position, rot_dim] of
//       the query's dtype or float32, cos in the first half, sin in the second.
//   Dims [rope_dim_offset, rope_dim_offset + rot_dim) of every head rotate
//   by the angle of the token's position (by minus it when inverse): NeoX
//   pairs element i with i + rot_dim/2, GPT-J 2i with 2i+1, pair i using
//   cos/sin index i. Math in float32.
//   A position outside [0, max_position) raises on the CPU (before anything is
//   written); on GPUs that token is left unchanged (no host sync).
// Validation is shared by every backend and the fake: see
// csrc/pos_encoding/rotary_embedding_check.h.
// ---------------------------------------------------------------------------

// CPU kernel (csrc/pos_encoding/rotary_embedding_cpu.cpp).
void rotary_embedding_cpu(
    const torch::stable::Tensor& positions,
    torch::stable::Tensor& query,
    std::optional<torch::stable::Tensor> key,
    int64_t head_size,
    const torch::stable::Tensor& cos_sin_cache,
    bool is_neox,
    int64_t rope_dim_offset,
    bool inverse);

// CUDA/ROCm kernel (csrc/pos_encoding/rotary_embedding.cu, GPU builds only).
void rotary_embedding_cuda(
    const torch::stable::Tensor& positions,
    torch::stable::Tensor& query,
    std::optional<torch::stable::Tensor> key,
    int64_t head_size,
    const torch::stable::Tensor& cos_sin_cache,
    bool is_neox,
    int64_t rope_dim_offset,
    bool inverse);
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
// KV-cache ops: namespace stableops_cache_ops (vLLM's _C_cache_ops).
// Validation shared by every backend and the fakes: csrc/cache/cache_check.h.
// Slots: slot_mapping is int64 [T'], T' <= T (source rows past T' are
// padding, never read); slot -1 skips the token; slot s writes block
// s // block_size, offset s % block_size. A slot < -1 or >= num_blocks *
// block_size raises on the CPU (before anything is written) and is skipped
// on the GPU (never written outside the cache; no host sync to check).
// kv_cache_dtype: "auto" (the cache has the source dtype; the bytes are
// copied, scales not read) or "fp8" / "fp8_e4m3" (a uint8 cache holds e4m3fn
// bits, a float8_e4m3fn / float8_e4m3fnuz cache names its format; the stored
// value is fp8(clamp(x.float() / scale, -MAX, MAX)), an IEEE float32
// division, bit-equal to torch's conversion); scales are one-element float32
// tensors on the device of the data, validated in every mode.
// ---------------------------------------------------------------------------

// stableops_cache_ops::reshape_and_cache_flash(Tensor key, Tensor value,
//     Tensor! key_cache, Tensor! value_cache, Tensor slot_mapping,
//     str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()
//   key, value: [T, H, D] float32/float16/bfloat16, last dim contiguous,
//     token and head strides free (e.g. views of a fused QKV tensor);
//   key_cache, value_cache: [num_blocks, block_size, H, D], last dim
//     contiguous, other strides free (e.g. views of one
//     [num_blocks, 2, block_size, H, D] tensor).
void reshape_and_cache_flash_cpu(
    const torch::stable::Tensor& key,
    const torch::stable::Tensor& value,
    torch::stable::Tensor& key_cache,
    torch::stable::Tensor& value_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& k_scale,
    const torch::stable::Tensor& v_scale);
void reshape_and_cache_flash_cuda(
    const torch::stable::Tensor& key,
    const torch::stable::Tensor& value,
    torch::stable::Tensor& key_cache,
    torch::stable::Tensor& value_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& k_scale,
    const torch::stable::Tensor& v_scale);

// stableops_cache_ops::concat_and_cache_mla(Tensor kv_c, Tensor k_pe,
//     Tensor! kv_cache, Tensor slot_mapping, str kv_cache_dtype,
//     Tensor scale) -> ()
//   kv_c [T, L], k_pe [T, R] (one dtype, last dim contiguous, row strides
//   free); kv_cache [num_blocks, block_size, L + R] (last dim contiguous):
//   each slot receives cat(kv_c[t], k_pe[t]).
void concat_and_cache_mla_cpu(
    const torch::stable::Tensor& kv_c,
    const torch::stable::Tensor& k_pe,
    torch::stable::Tensor& kv_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& scale);
void concat_and_cache_mla_cuda(
    const torch::stable::Tensor& kv_c,
    const torch::stable::Tensor& k_pe,
    torch::stable::Tensor& kv_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& scale);

// stableops_cache_ops::swap_blocks(Tensor src, Tensor! dst,
//     int block_size_in_bytes, Tensor block_mapping) -> ()
//   For each row (s, d) of block_mapping (int64 [N, 2], on the CPU), copies
//   the first block_size_in_bytes bytes of block src[s] to block dst[d]
//   (blocks along dim 0; src and dst of one dtype and block shape, blocks
//   contiguous, 0 < block_size_in_bytes <= the bytes of one block and each
//   block stride), in order. CPU kernel: CPU -> CPU. CUDA kernel (picked by
//   the dispatcher whenever src or dst is on a GPU): GPU -> GPU on one
//   device, pinned CPU -> GPU, GPU -> pinned CPU, on the current stream.
//   Block indices out of range, pageable host memory: RuntimeError before
//   anything is copied.
void swap_blocks_cpu(
    const torch::stable::Tensor& src,
    torch::stable::Tensor& dst,
    int64_t block_size_in_bytes,
    const torch::stable::Tensor& block_mapping);
void swap_blocks_cuda(
    const torch::stable::Tensor& src,
    torch::stable::Tensor& dst,
    int64_t block_size_in_bytes,
    const torch::stable::Tensor& block_mapping);

} // namespace stableops
