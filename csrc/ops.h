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

} // namespace stableops
