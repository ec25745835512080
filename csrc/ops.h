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
#include <string>

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
