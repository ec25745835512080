// Shared input validation for stableops::rotary_embedding.
//
// The CPU kernel (rotary_embedding_cpu.cpp), the CUDA/ROCm kernel
// (rotary_embedding.cu) and the fake (through the CPU kernel on meta tensors:
// csrc/core/check.h) call check_rotary_embedding_inputs() before touching any
// data, so every backend accepts exactly the same inputs and reports errors
// with the same messages. Every failure throws std::runtime_error via
// STD_TORCH_CHECK (a RuntimeError in Python) whose message starts with
// "rotary_embedding: " and names the offending argument and value.
//
// Contract enforced here (identical on every backend):
//   * devices: positions, query, key (when given), cos_sin_cache on one device
//     (positions is the reference), of the kernel's device type;
//   * positions: int64, 1-D [num_tokens], any stride;
//   * query: float32, float16 or bfloat16; 2-D [num_tokens, num_heads *
//     head_size] (head_size divides the width) or 3-D [num_tokens, num_heads,
//     head_size]; last dim contiguous, token and head strides free but no two
//     (token, head) rows overlapping in memory;
//   * key (optional): the query's dtype, the same rules with its own head
//     count and the query's num_tokens;
//   * cos_sin_cache: the query's dtype or float32, 2-D [max_position,
//     rot_dim] with rot_dim positive and even, last dim contiguous, any row
//     stride;
//   * head_size > 0, rope_dim_offset >= 0, rope_dim_offset + rot_dim <=
//     head_size.
// Not checked here (it needs the data): positions in [0, max_position). The
// CPU kernel checks them before writing anything; the GPU kernel leaves a
// token whose position is out of range unchanged.
#pragma once

#include <cstdint>
#include <optional>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>

namespace stableops {

// One of query / key seen as num_heads rows of head_size elements per token.
struct RotaryHeads {
  int64_t num_heads = 0;     // 0 for an absent key
  int64_t token_stride = 0;  // elements
  int64_t head_stride = 0;   // elements
};

struct RotaryEmbeddingDims {
  int64_t num_tokens;
  int64_t head_size;
  int64_t rot_dim;       // cos_sin_cache.size(1): cos in [0, rot_dim/2), sin after
  int64_t max_position;  // cos_sin_cache.size(0)
  RotaryHeads query;
  RotaryHeads key;       // num_heads == 0 when key is None
  bool has_key;
};

// Validates every argument of rotary_embedding (see the contract above) and
// returns the problem dimensions. `expected_device_type` is the device type of
// the calling kernel (CPU or Meta for the CPU kernel, CUDA for the GPU one).
RotaryEmbeddingDims check_rotary_embedding_inputs(
    const torch::stable::Tensor& positions,
    const torch::stable::Tensor& query,
    const std::optional<torch::stable::Tensor>& key,
    int64_t head_size,
    const torch::stable::Tensor& cos_sin_cache,
    int64_t rope_dim_offset,
    torch::headeronly::DeviceType expected_device_type);

}  // namespace stableops
