// Shared input validation for stableops::rotary_embedding (see the header for
// the contract). Stable ABI only.
#include "csrc/pos_encoding/rotary_embedding_check.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"

namespace stableops {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

constexpr const char* kOp = "rotary_embedding";

// True when no two elements of the [num_tokens, num_heads, head_size] view
// share an address: with the dims of size > 1 sorted by stride, each stride
// exceeds the farthest offset the smaller dims reach. (Sufficient, and exact
// for every layout of rows with padding between them.)
bool rows_disjoint(int64_t tokens, int64_t token_stride, int64_t heads,
                   int64_t head_stride, int64_t head_size) {
  std::pair<int64_t, int64_t> dims[3] = {
      {1, head_size}, {head_stride, heads}, {token_stride, tokens}};
  std::sort(std::begin(dims), std::end(dims));
  int64_t reach = 0;  // largest offset reachable by the dims seen so far
  for (const auto& [stride, size] : dims) {
    if (size <= 1) {
      continue;
    }
    if (stride <= reach) {
      return false;
    }
    reach += stride * (size - 1);
  }
  return true;
}

// Validates query or key (dtype is checked by the caller) and views it as
// [num_tokens, num_heads, head_size] rows.
RotaryHeads check_heads(const Tensor& t, const char* name, int64_t head_size) {
  STD_TORCH_CHECK(
      t.dim() == 2 || t.dim() == 3,
      "rotary_embedding: ", name,
      " must be 2-D [num_tokens, num_heads * head_size] or 3-D [num_tokens, "
      "num_heads, head_size], got ",
      t.dim(), "-D tensor of shape ", shape_str(t));
  RotaryHeads heads;
  if (t.dim() == 2) {
    const int64_t width = t.size(1);
    STD_TORCH_CHECK(
        width % head_size == 0,
        "rotary_embedding: head_size (", head_size, ") must divide the last dim of ",
        name, " (", width, "), shape ", shape_str(t));
    heads.num_heads = width / head_size;
    heads.token_stride = t.stride(0);
    heads.head_stride = head_size;
  } else {
    STD_TORCH_CHECK(
        t.size(2) == head_size,
        "rotary_embedding: the last dim of the 3-D ", name, " (", t.size(2),
        ") must equal head_size (", head_size, "), shape ", shape_str(t));
    heads.num_heads = t.size(1);
    heads.token_stride = t.stride(0);
    heads.head_stride = t.stride(1);
  }
  check_last_dim_contiguous(kOp, t, name);
  if (t.numel() > 0) {
    STD_TORCH_CHECK(
        rows_disjoint(t.size(0), heads.token_stride, heads.num_heads,
                      heads.head_stride, head_size),
        "rotary_embedding: the (token, head) rows of ", name,
        " overlap in memory (shape ", shape_str(t), ", strides ", strides_str(t),
        "): every row is rotated in place, so each needs its own memory");
  }
  return heads;
}

}  // namespace

RotaryEmbeddingDims check_rotary_embedding_inputs(
    const Tensor& positions,
    const Tensor& query,
    const std::optional<Tensor>& key,
    int64_t head_size,
    const Tensor& cos_sin_cache,
    int64_t rope_dim_offset,
    DeviceType expected_device_type) {
  // 1. Devices (schema order; positions is the reference), defined tensors.
  const bool has_key = key.has_value() && key->defined();
  check_devices(
      kOp,
      {{"positions", &positions},
       {"query", &query},
       {"key", has_key ? &*key : nullptr},
       {"cos_sin_cache", &cos_sin_cache}},
      expected_device_type);

  // 2. Dtypes.
  check_dtype(kOp, positions, "positions", {ScalarType::Long});
  check_dtype(kOp, query, "query",
              {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
  if (has_key) {
    check_same_dtype(kOp, *key, "key", query, "query");
  }
  // The cache: the query's dtype or float32.
  if (query.scalar_type() == ScalarType::Float) {
    check_dtype(kOp, cos_sin_cache, "cos_sin_cache", {ScalarType::Float});
  } else {
    check_dtype(kOp, cos_sin_cache, "cos_sin_cache",
                {query.scalar_type(), ScalarType::Float});
  }

  // 3. Scalars and the cache: [max_position, rot_dim], rot_dim even.
  STD_TORCH_CHECK(head_size > 0,
                  "rotary_embedding: head_size must be positive, got ", head_size);
  STD_TORCH_CHECK(rope_dim_offset >= 0,
                  "rotary_embedding: rope_dim_offset must be >= 0, got ",
                  rope_dim_offset);
  STD_TORCH_CHECK(
      cos_sin_cache.dim() == 2,
      "rotary_embedding: cos_sin_cache must be 2-D [max_position, rot_dim], got ",
      cos_sin_cache.dim(), "-D tensor of shape ", shape_str(cos_sin_cache));
  const int64_t max_position = cos_sin_cache.size(0);
  const int64_t rot_dim = cos_sin_cache.size(1);
  STD_TORCH_CHECK(
      rot_dim > 0 && rot_dim % 2 == 0,
      "rotary_embedding: rot_dim (cos_sin_cache.size(1) = ", rot_dim,
      ") must be positive and even, cos_sin_cache shape ",
      shape_str(cos_sin_cache));
  STD_TORCH_CHECK(
      rope_dim_offset <= head_size && rot_dim <= head_size - rope_dim_offset,
      "rotary_embedding: rope_dim_offset (", rope_dim_offset, ") + rot_dim (",
      rot_dim, ") must not exceed head_size (", head_size, ")");
  check_last_dim_contiguous(kOp, cos_sin_cache, "cos_sin_cache");

  // 4. query and key: [num_tokens, num_heads(, head_size)] rows.
  RotaryEmbeddingDims dims{};
  dims.head_size = head_size;
  dims.rot_dim = rot_dim;
  dims.max_position = max_position;
  dims.has_key = has_key;
  dims.query = check_heads(query, "query", head_size);
  dims.num_tokens = query.size(0);
  if (has_key) {
    dims.key = check_heads(*key, "key", head_size);
    STD_TORCH_CHECK(
        key->size(0) == dims.num_tokens,
        "rotary_embedding: key has ", key->size(0),
        " tokens (shape ", shape_str(*key), ") but query has ", dims.num_tokens,
        " (shape ", shape_str(query), ")");
  }

  // 5. positions: [num_tokens], any stride.
  STD_TORCH_CHECK(
      positions.dim() == 1,
      "rotary_embedding: positions must be 1-D [num_tokens], got ",
      positions.dim(), "-D tensor of shape ", shape_str(positions));
  STD_TORCH_CHECK(
      positions.size(0) == dims.num_tokens,
      "rotary_embedding: positions has ", positions.size(0),
      " entries but query has ", dims.num_tokens, " tokens (shape ",
      shape_str(query), ")");
  return dims;
}

}  // namespace stableops
