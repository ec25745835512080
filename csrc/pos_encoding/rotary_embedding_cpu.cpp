// CPU kernel for stableops::rotary_embedding (contract: see ops.h and
// rotary_embedding_check.h). Stable ABI only.
//
// * fp32 / fp16 / bf16 query and key, cos_sin_cache of their dtype or fp32;
//   all arithmetic in float32.
// * Positions are checked against [0, max_position) after validation and
//   before anything is written: a bad one raises and leaves query/key as
//   they were.
// * Parallel over tokens with torch::stable::parallel_for. Per token the
//   cache row is converted once to float32 into a stack buffer (cos, and sin
//   with the sign of `inverse` folded in; 256 pairs at a time); every head of query and key is then rotated by a
//   branch-free inner loop over its pairs that the compiler vectorises
//   (cpu_math.h's codecs; NeoX: two contiguous halves, GPT-J: interleaved
//   pairs, which the vectoriser de-interleaves), compiled for AVX2 and the
//   baseline (STABLEOPS_CPU_CLONES).
// * Any token/head strides (rows are addressed by stride, never assumed
//   dense), any rot_dim/head_size: there is no vector-width requirement.
#include <algorithm>
#include <cstdint>
#include <optional>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/ops.h"
#include "csrc/pos_encoding/rotary_embedding_check.h"

namespace stableops {
namespace {

using cpu::BF16Codec;
using cpu::F16Codec;
using cpu::F32Codec;
using torch::headeronly::ScalarType;

struct HeadsParams {
  void* data;  // nullptr for an absent key
  int64_t num_heads;
  int64_t token_stride;
  int64_t head_stride;
};

struct RotaryParams {
  const int64_t* positions;
  int64_t positions_stride;
  HeadsParams query;
  HeadsParams key;
  const void* cache;
  int64_t cache_stride;  // elements between cache rows
  bool cache_is_f32;     // else the query's dtype
  int64_t half;          // rot_dim / 2
  int64_t rope_dim_offset;
  float sin_sign;        // -1 for inverse
};

// NeoX: x[i] pairs with x[half + i].
template <class Codec>
STABLEOPS_ALWAYS_INLINE void rotate_neox(
    typename Codec::storage_t* __restrict x1,
    typename Codec::storage_t* __restrict x2,
    const float* __restrict cos,
    const float* __restrict sin,
    int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = Codec::load(x1[i]);
    const float b = Codec::load(x2[i]);
    x1[i] = Codec::store(a * cos[i] - b * sin[i]);
    x2[i] = Codec::store(b * cos[i] + a * sin[i]);
  }
}

// GPT-J: x[2i] pairs with x[2i + 1].
template <class Codec>
STABLEOPS_ALWAYS_INLINE void rotate_gptj(
    typename Codec::storage_t* __restrict x,
    const float* __restrict cos,
    const float* __restrict sin,
    int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = Codec::load(x[2 * i]);
    const float b = Codec::load(x[2 * i + 1]);
    x[2 * i] = Codec::store(a * cos[i] - b * sin[i]);
    x[2 * i + 1] = Codec::store(b * cos[i] + a * sin[i]);
  }
}

// Pairs converted per cache-row block: cos/sin live in a stack buffer (no
// allocation); rot_dim <= 512 is one block.
constexpr int64_t kBlockPairs = 256;

// cos/sin of pairs [i0, i0 + n) of one cache row to float32, the sign of the
// rotation folded into sin.
template <class CacheCodec>
STABLEOPS_ALWAYS_INLINE void load_cos_sin(
    const typename CacheCodec::storage_t* __restrict row,
    int64_t i0,
    int64_t n,
    int64_t half,
    float sin_sign,
    float* __restrict cos,
    float* __restrict sin) {
  for (int64_t j = 0; j < n; ++j) {
    cos[j] = CacheCodec::load(row[i0 + j]);
  }
  for (int64_t j = 0; j < n; ++j) {
    sin[j] = CacheCodec::load(row[half + i0 + j]) * sin_sign;
  }
}

// Pairs [i0, i0 + n) of every head of one token of query or key.
template <class Codec, bool kNeox>
STABLEOPS_ALWAYS_INLINE void rotate_heads(
    const HeadsParams& hp,
    int64_t token,
    const RotaryParams& p,
    int64_t i0,
    int64_t n,
    const float* cos,
    const float* sin) {
  using T = typename Codec::storage_t;
  if (hp.data == nullptr) {
    return;
  }
  T* const row = static_cast<T*>(hp.data) + token * hp.token_stride + p.rope_dim_offset;
  for (int64_t h = 0; h < hp.num_heads; ++h) {
    T* x = row + h * hp.head_stride;
    if constexpr (kNeox) {
      rotate_neox<Codec>(x + i0, x + p.half + i0, cos, sin, n);
    } else {
      rotate_gptj<Codec>(x + 2 * i0, cos, sin, n);
    }
  }
}

template <class Codec, bool kNeox>
STABLEOPS_ALWAYS_INLINE void rotate_tokens(const RotaryParams& p, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  float cos[kBlockPairs];
  float sin[kBlockPairs];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t pos = p.positions[t * p.positions_stride];  // checked in range
    for (int64_t i0 = 0; i0 < p.half; i0 += kBlockPairs) {
      const int64_t n = std::min(kBlockPairs, p.half - i0);
      if (p.cache_is_f32) {
        load_cos_sin<F32Codec>(static_cast<const float*>(p.cache) + pos * p.cache_stride,
                               i0, n, p.half, p.sin_sign, cos, sin);
      } else {
        load_cos_sin<Codec>(static_cast<const T*>(p.cache) + pos * p.cache_stride,
                            i0, n, p.half, p.sin_sign, cos, sin);
      }
      rotate_heads<Codec, kNeox>(p.query, t, p, i0, n, cos, sin);
      rotate_heads<Codec, kNeox>(p.key, t, p, i0, n, cos, sin);
    }
  }
}

// One non-template function per (dtype, style): target_clones needs them.
#define STABLEOPS_ROTARY_ROWS(NAME, CODEC, NEOX)                                  \
  STABLEOPS_CPU_CLONES void NAME(const RotaryParams& p, int64_t begin, int64_t end) { \
    rotate_tokens<CODEC, NEOX>(p, begin, end);                                    \
  }
STABLEOPS_ROTARY_ROWS(rotary_f32_neox, F32Codec, true)
STABLEOPS_ROTARY_ROWS(rotary_f32_gptj, F32Codec, false)
STABLEOPS_ROTARY_ROWS(rotary_f16_neox, F16Codec, true)
STABLEOPS_ROTARY_ROWS(rotary_f16_gptj, F16Codec, false)
STABLEOPS_ROTARY_ROWS(rotary_bf16_neox, BF16Codec, true)
STABLEOPS_ROTARY_ROWS(rotary_bf16_gptj, BF16Codec, false)
#undef STABLEOPS_ROTARY_ROWS

HeadsParams heads_params(const RotaryHeads& heads, void* data) {
  return HeadsParams{data, heads.num_heads, heads.token_stride, heads.head_stride};
}

}  // namespace

void rotary_embedding_cpu(
    const torch::stable::Tensor& positions,
    torch::stable::Tensor& query,
    std::optional<torch::stable::Tensor> key,
    int64_t head_size,
    const torch::stable::Tensor& cos_sin_cache,
    bool is_neox,
    int64_t rope_dim_offset,
    bool inverse) {
  const RotaryEmbeddingDims dims = check_rotary_embedding_inputs(
      positions, query, key, head_size, cos_sin_cache, rope_dim_offset,
      cpu_kernel_device(positions));
  if (validation_only(positions) || dims.num_tokens == 0) {
    return;
  }

  // Every position must index a cache row: checked before anything is
  // written, so a bad position leaves query and key untouched.
  const auto* pos = static_cast<const int64_t*>(positions.const_data_ptr());
  const int64_t pos_stride = positions.stride(0);
  for (int64_t t = 0; t < dims.num_tokens; ++t) {
    const int64_t p = pos[t * pos_stride];
    STD_TORCH_CHECK(
        p >= 0 && p < dims.max_position,
        "rotary_embedding: positions[", t, "] = ", p,
        " is out of range for cos_sin_cache with max_position ",
        dims.max_position, " (valid: 0 to ", dims.max_position - 1, ")");
  }

  RotaryParams p{};
  p.positions = pos;
  p.positions_stride = pos_stride;
  p.query = heads_params(dims.query, query.mutable_data_ptr());
  p.key = heads_params(dims.key, dims.has_key ? key->mutable_data_ptr() : nullptr);
  p.cache = cos_sin_cache.const_data_ptr();
  p.cache_stride = cos_sin_cache.stride(0);
  p.cache_is_f32 = cos_sin_cache.scalar_type() == ScalarType::Float;
  p.half = dims.rot_dim / 2;
  p.rope_dim_offset = rope_dim_offset;
  p.sin_sign = inverse ? -1.0f : 1.0f;

  using RowFn = void (*)(const RotaryParams&, int64_t, int64_t);
  RowFn fn = nullptr;
  switch (query.scalar_type()) {
    case ScalarType::Float:
      fn = is_neox ? &rotary_f32_neox : &rotary_f32_gptj;
      break;
    case ScalarType::Half:
      fn = is_neox ? &rotary_f16_neox : &rotary_f16_gptj;
      break;
    case ScalarType::BFloat16:
      fn = is_neox ? &rotary_bf16_neox : &rotary_bf16_gptj;
      break;
    default:
      STD_TORCH_CHECK(false, "rotary_embedding: unreachable dtype ",
                      scalar_type_name(query.scalar_type()));
  }

  // About 16K rotated elements per task keeps scheduling overhead negligible.
  const int64_t per_token = std::max<int64_t>(
      1, (dims.query.num_heads + dims.key.num_heads) * dims.rot_dim);
  const int64_t grain = std::max<int64_t>(1, 16384 / per_token);
  torch::stable::parallel_for(
      0, dims.num_tokens, grain,
      [&p, fn](int64_t begin, int64_t end) { fn(p, begin, end); });
}

}  // namespace stableops
