// CPU kernels of stableops_cache_ops::reshape_and_cache_flash and
// concat_and_cache_mla (contracts: csrc/ops.h, cache_check.h). Stable ABI
// only.
//
// * Every argument goes through the op's check first; on meta tensors (the
//   fake) the kernel returns right after it. Then every slot is range-checked
//   before anything is written, so a rejected call writes nothing.
// * Parallel over tokens with torch::stable::parallel_for. Per token, each
//   row (a head of key/value, or kv_c / k_pe) goes to its slot: a memcpy for
//   kv_cache_dtype "auto" (bit-exact, NaN payloads included), or a
//   branch-free loop for FP8 that auto-vectorises (csrc/core/cpu_math.h
//   codecs, fp8::quantize, an IEEE float32 division; AVX2 and baseline
//   clones). When a token's heads are adjacent in both the source and the
//   cache, all of them are one row.
// * Tokens that map to the same slot: one of them wins (unspecified which),
//   as on the GPU.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/cache/cache_check.h"
#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/core/fp8.h"
#include "csrc/ops.h"

namespace stableops {
namespace {

using cpu::BF16Codec;
using cpu::F16Codec;
using cpu::F32Codec;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

} // namespace

// ---------------------------------------------------------------------------
// Row writers: n source elements -> n cache elements.
//
// Not in the anonymous namespace: clang 19 neither inlines nor emits torch's
// inline Float8 constructors in target_clones functions of internal linkage
// (the shared object then has an undefined
// c10::Float8_e4m3fn::Float8_e4m3fn(float)). Hidden, though: an exported,
// preemptible clone makes its IFUNC resolver read the clones' addresses from
// the GOT, which the dynamic loader may not have relocated yet when it runs
// the resolver (a null function pointer for some of them, seen here).
// ---------------------------------------------------------------------------
namespace __attribute__((visibility("hidden"))) cache_cpu {

using RowFn = void (*)(const void* src, void* dst, int64_t n, float scale);

template <class Codec, fp8::Format F>
STABLEOPS_ALWAYS_INLINE void quantize_row(
    const void* src,
    void* dst,
    int64_t n,
    float scale) {
  const auto* s = static_cast<const typename Codec::storage_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = fp8::quantize<F>(Codec::load(s[i]) / scale);
  }
}

#define STABLEOPS_QUANT_ROW(NAME, CODEC, FORMAT)                          \
  STABLEOPS_CPU_CLONES void NAME(                                         \
      const void* src, void* dst, int64_t n, float scale) {               \
    quantize_row<CODEC, fp8::Format::FORMAT>(src, dst, n, scale);         \
  }
STABLEOPS_QUANT_ROW(quant_row_f32_fn, F32Codec, kE4M3FN)
STABLEOPS_QUANT_ROW(quant_row_f16_fn, F16Codec, kE4M3FN)
STABLEOPS_QUANT_ROW(quant_row_bf16_fn, BF16Codec, kE4M3FN)
STABLEOPS_QUANT_ROW(quant_row_f32_fnuz, F32Codec, kE4M3FNUZ)
STABLEOPS_QUANT_ROW(quant_row_f16_fnuz, F16Codec, kE4M3FNUZ)
STABLEOPS_QUANT_ROW(quant_row_bf16_fnuz, BF16Codec, kE4M3FNUZ)
#undef STABLEOPS_QUANT_ROW

} // namespace cache_cpu

namespace {

using cache_cpu::RowFn;

// How one row is written, and the bytes per source / cache element.
struct RowWriter {
  RowFn quantize = nullptr; // nullptr: "auto", a plain copy
  int64_t src_elem = 0;
  int64_t cache_elem = 0;
  float scale = 1.0f;

  void operator()(const char* src, char* dst, int64_t n) const {
    if (quantize == nullptr) {
      std::memcpy(dst, src, static_cast<size_t>(n * src_elem));
    } else {
      quantize(src, dst, n, scale);
    }
  }
};

RowWriter make_writer(
    const char* op,
    CacheMode mode,
    ScalarType src_dtype,
    const Tensor& scale) {
  RowWriter w;
  w.src_elem = src_dtype == ScalarType::Float ? 4 : 2;
  if (mode == CacheMode::kAuto) {
    w.cache_elem = w.src_elem;
    return w; // the scale is not read
  }
  w.cache_elem = 1;
  w.scale = *static_cast<const float*>(scale.const_data_ptr());
  const bool fn = mode == CacheMode::kFp8E4m3fn;
  switch (src_dtype) {
    case ScalarType::Float:
      w.quantize = fn ? &cache_cpu::quant_row_f32_fn : &cache_cpu::quant_row_f32_fnuz;
      break;
    case ScalarType::Half:
      w.quantize = fn ? &cache_cpu::quant_row_f16_fn : &cache_cpu::quant_row_f16_fnuz;
      break;
    case ScalarType::BFloat16:
      w.quantize = fn ? &cache_cpu::quant_row_bf16_fn : &cache_cpu::quant_row_bf16_fnuz;
      break;
    default:
      STD_TORCH_CHECK(false, op, ": unreachable source dtype");
  }
  return w;
}

// Cache slot s of a [num_blocks, block_size, ...] cache with byte strides
// (block, slot); s is a validated slot >= 0.
inline char* slot_ptr(char* base, int64_t s, int64_t block_size, int64_t sb, int64_t so) {
  const int64_t blk = s / block_size;
  return base + blk * sb + (s - blk * block_size) * so;
}

// ~16K elements per task keeps the scheduling overhead negligible.
int64_t grain_for(int64_t elems_per_token) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, elems_per_token));
}

} // namespace

void reshape_and_cache_flash_cpu(
    const Tensor& key,
    const Tensor& value,
    Tensor& key_cache,
    Tensor& value_cache,
    const Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const Tensor& k_scale,
    const Tensor& v_scale) {
  const FlashCacheDims dims = check_reshape_and_cache_flash(
      key,
      value,
      key_cache,
      value_cache,
      slot_mapping,
      kv_cache_dtype,
      k_scale,
      v_scale,
      cpu_kernel_device(key));
  if (validation_only(key)) {
    return;
  }
  const int64_t n = dims.num_tokens;
  check_slots_in_range(
      "reshape_and_cache_flash", slot_mapping, n, dims.num_blocks, dims.block_size);
  if (n == 0 || dims.num_heads == 0 || dims.head_size == 0) {
    return;
  }

  const RowWriter kw = make_writer(
      "reshape_and_cache_flash", dims.mode, key.scalar_type(), k_scale);
  const RowWriter vw = make_writer(
      "reshape_and_cache_flash", dims.mode, key.scalar_type(), v_scale);
  const int64_t se = kw.src_elem;
  const int64_t ce = kw.cache_elem;
  const int64_t H = dims.num_heads;
  const int64_t D = dims.head_size;
  // One row per token when the heads are adjacent everywhere.
  const bool fused = H == 1 ||
      (key.stride(1) == D && value.stride(1) == D && key_cache.stride(2) == D &&
       value_cache.stride(2) == D);
  const int64_t rows = fused ? 1 : H;
  const int64_t row_len = fused ? H * D : D;

  const char* k = static_cast<const char*>(key.const_data_ptr());
  const char* v = static_cast<const char*>(value.const_data_ptr());
  char* kc = static_cast<char*>(key_cache.mutable_data_ptr());
  char* vc = static_cast<char*>(value_cache.mutable_data_ptr());
  const auto* slots = static_cast<const int64_t*>(slot_mapping.const_data_ptr());
  const int64_t slot_stride = slot_mapping.stride(0);
  const int64_t ks0 = key.stride(0) * se, ks1 = key.stride(1) * se;
  const int64_t vs0 = value.stride(0) * se, vs1 = value.stride(1) * se;
  const int64_t kcb = key_cache.stride(0) * ce, kco = key_cache.stride(1) * ce,
                kch = key_cache.stride(2) * ce;
  const int64_t vcb = value_cache.stride(0) * ce, vco = value_cache.stride(1) * ce,
                vch = value_cache.stride(2) * ce;
  const int64_t bs = dims.block_size;

  torch::stable::parallel_for(
      0, n, grain_for(2 * H * D), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t s = slots[t * slot_stride];
          if (s < 0) {
            continue; // -1: padding / skipped token
          }
          char* kd = slot_ptr(kc, s, bs, kcb, kco);
          char* vd = slot_ptr(vc, s, bs, vcb, vco);
          for (int64_t h = 0; h < rows; ++h) {
            kw(k + t * ks0 + h * ks1, kd + h * kch, row_len);
            vw(v + t * vs0 + h * vs1, vd + h * vch, row_len);
          }
        }
      });
}

void concat_and_cache_mla_cpu(
    const Tensor& kv_c,
    const Tensor& k_pe,
    Tensor& kv_cache,
    const Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const Tensor& scale) {
  const MlaCacheDims dims = check_concat_and_cache_mla(
      kv_c,
      k_pe,
      kv_cache,
      slot_mapping,
      kv_cache_dtype,
      scale,
      cpu_kernel_device(kv_c));
  if (validation_only(kv_c)) {
    return;
  }
  const int64_t n = dims.num_tokens;
  check_slots_in_range(
      "concat_and_cache_mla", slot_mapping, n, dims.num_blocks, dims.block_size);
  if (n == 0) {
    return;
  }

  const RowWriter w =
      make_writer("concat_and_cache_mla", dims.mode, kv_c.scalar_type(), scale);
  const int64_t se = w.src_elem;
  const int64_t ce = w.cache_elem;
  const int64_t L = dims.kv_lora_rank;
  const int64_t R = dims.pe_dim;
  const char* c = static_cast<const char*>(kv_c.const_data_ptr());
  const char* pe = static_cast<const char*>(k_pe.const_data_ptr());
  char* cache = static_cast<char*>(kv_cache.mutable_data_ptr());
  const auto* slots = static_cast<const int64_t*>(slot_mapping.const_data_ptr());
  const int64_t slot_stride = slot_mapping.stride(0);
  const int64_t cs0 = kv_c.stride(0) * se;
  const int64_t ps0 = k_pe.stride(0) * se;
  const int64_t cb = kv_cache.stride(0) * ce, co = kv_cache.stride(1) * ce;
  const int64_t bs = dims.block_size;

  torch::stable::parallel_for(
      0, n, grain_for(L + R), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t s = slots[t * slot_stride];
          if (s < 0) {
            continue;
          }
          char* d = slot_ptr(cache, s, bs, cb, co);
          if (L > 0) {
            w(c + t * cs0, d, L);
          }
          if (R > 0) {
            w(pe + t * ps0, d + L * ce, R);
          }
        }
      });
}

} // namespace stableops
