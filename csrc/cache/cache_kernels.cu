// CUDA/ROCm kernels of stableops_cache_ops::reshape_and_cache_flash and
// concat_and_cache_mla (one source for both: gpu_compat.h maps the names).
// Contracts: csrc/ops.h; validation: cache_check.h (shared with the CPU
// kernels and the fakes).
//
// Design (memory-bound: bytes read from the sources + bytes written to the
// cache, nothing else):
//   * a flat 1-D grid of 256-thread blocks; thread g handles token
//     t = g / vecs_per_token, so every block is busy whatever H and D are and
//     a token's threads are adjacent (coalesced rows);
//   * one "vector" is 16 source bytes (8 fp16/bf16 or 4 fp32 values) when the
//     pointers, strides and row lengths allow it, else the widest that does
//     ("auto": 8/4/2 bytes; FP8: one element): odd head sizes and strided
//     rows take the narrow path instead of raising;
//   * reshape_and_cache_flash: a thread moves one key vector and the value
//     vector at the same place; concat_and_cache_mla: a thread moves two
//     vectors of the concatenated [kv_c | k_pe] row. The source loads and
//     the slot load are all issued before anything depends on them (several
//     loads in flight per thread);
//   * "auto" copies the bytes unchanged; FP8 converts to float32, divides by
//     the scale (read from device memory: no host sync; core/scale_div.h's
//     ScaleDivisor, whose codes are those of the IEEE division) and
//     quantises with fp8::quantize_words (the hardware conversion where it
//     matches torch);
//   * a slot of -1 is skipped, and so is any slot outside
//     [0, num_blocks * block_size): nothing is ever written outside the
//     cache (the CPU kernels raise instead; the GPU cannot without a host
//     synchronisation);
//   * 64-bit byte offsets everywhere memory is addressed; one launch on the
//     current stream, no allocation, no synchronisation (CUDA-graph safe).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/fp8.h"
#include "csrc/core/scale_div.h"
#include "csrc/gpu_compat.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/cache/cache_check.h"
#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#endif

namespace stableops {
namespace cache_gpu {

constexpr int kBlockThreads = 256;  // a multiple of 64 (CDNA wavefront)

// ---------------------------------------------------------------------------
// Vectors: raw loads/stores of 1..16 bytes and the per-mode conversion.
// ---------------------------------------------------------------------------

template <int Bytes>
struct Raw;
template <>
struct Raw<16> { using type = uint4; };
template <>
struct Raw<8> { using type = uint2; };
template <>
struct Raw<4> { using type = uint32_t; };
template <>
struct Raw<2> { using type = uint16_t; };
template <>
struct Raw<1> { using type = uint8_t; };

template <int Bytes>
__device__ __forceinline__ typename Raw<Bytes>::type load_raw(const char* p) {
  return STABLEOPS_LDG(reinterpret_cast<const typename Raw<Bytes>::type*>(p));
}

template <int Bytes>
__device__ __forceinline__ void store_raw(char* p, const typename Raw<Bytes>::type& v) {
  *reinterpret_cast<typename Raw<Bytes>::type*>(p) = v;
}

// kv_cache_dtype "auto": the bytes, unchanged.
template <int Bytes>
struct CopyVec {
  static constexpr int kInBytes = Bytes;
  static constexpr int kOutBytes = Bytes;
  static constexpr bool kScaled = false;
  using In = typename Raw<Bytes>::type;
  using Out = In;
  __device__ __forceinline__ static Out convert(const In& x, float) { return x; }
};

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(stableops_half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(stableops_bf16 x) { return __bfloat162float(x); }

// FP8: N source values of T -> N bytes, fp8(x / scale) in format F.
template <typename T, fp8::Format F, int N>
struct Fp8Vec {
  static constexpr int kInBytes = N * static_cast<int>(sizeof(T));
  static constexpr int kOutBytes = N;
  static constexpr bool kScaled = true;
  using In = typename Raw<kInBytes>::type;
  using Out = typename Raw<N>::type;
  __device__ __forceinline__ static Out convert(const In& x, float scale) {
    T v[N];
    memcpy(v, &x, sizeof(v));
    Out o;
    if constexpr (N == 1) {
      o = fp8::quantize<F>(to_f32(v[0]) / scale);
    } else {
      // x / scale: ScaleDivisor's quotient (same codes, no division per
      // value) when the scale is in its fast range.
      float f[N];
      const ScaleDivisor d(scale);
      if (d.fast) {
#pragma unroll
        for (int i = 0; i < N; ++i) f[i] = d.quotient(to_f32(v[i]));
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) f[i] = to_f32(v[i]) / scale;
      }
      uint32_t w[N / 4];
      fp8::quantize_words<F, N>(f, w);
      memcpy(&o, w, sizeof(o));
    }
    return o;
  }
};

// (block, offset) of a slot known to be in [0, num_slots); 32-bit division
// when both fit (always in practice).
__device__ __forceinline__ void split_slot(int64_t slot, int64_t block_size,
                                           int64_t& blk, int64_t& off) {
  if ((static_cast<uint64_t>(slot) | static_cast<uint64_t>(block_size)) <=
      0xffffffffull) {
    const uint32_t s = static_cast<uint32_t>(slot);
    const uint32_t b = static_cast<uint32_t>(block_size);
    const uint32_t q = s / b;
    blk = q;
    off = s - q * b;
  } else {
    blk = slot / block_size;
    off = slot - blk * block_size;
  }
}

// ---------------------------------------------------------------------------
// reshape_and_cache_flash
// ---------------------------------------------------------------------------

struct FlashParams {
  const char* key;
  const char* value;
  char* key_cache;
  char* value_cache;
  const int64_t* slots;
  int64_t slot_stride;  // elements
  const float* k_scale;
  const float* v_scale;
  // Byte strides: key/value (token, head); caches (block, slot, head).
  int64_t key_st, key_sh, value_st, value_sh;
  int64_t kc_sb, kc_so, kc_sh, vc_sb, vc_so, vc_sh;
  int64_t num_slots;  // num_blocks * block_size
  int64_t block_size;
  uint32_t num_tokens;
  uint32_t vecs_per_head;
  uint32_t vecs_per_token;  // num_heads * vecs_per_head
};

template <class V>
__global__ void __launch_bounds__(kBlockThreads)
    reshape_and_cache_flash_kernel(const FlashParams p) {
  pdl_enter();
  const uint32_t g = blockIdx.x * kBlockThreads + threadIdx.x;
  const uint32_t t = g / p.vecs_per_token;
  if (t >= p.num_tokens) return;
  const uint32_t item = g - t * p.vecs_per_token;
  const uint32_t h = item / p.vecs_per_head;
  const uint32_t j = item - h * p.vecs_per_head;
  // Every load first: the slot, the key and value vectors (rows t < T' are
  // always readable), the scales.
  const int64_t slot = p.slots[t * p.slot_stride];
  const typename V::In k = load_raw<V::kInBytes>(
      p.key + t * p.key_st + h * p.key_sh + j * V::kInBytes);
  const typename V::In v = load_raw<V::kInBytes>(
      p.value + t * p.value_st + h * p.value_sh + j * V::kInBytes);
  float ks = 1.0f;
  float vs = 1.0f;
  if constexpr (V::kScaled) {
    ks = STABLEOPS_LDG(p.k_scale);
    vs = STABLEOPS_LDG(p.v_scale);
  }
  if (slot < 0 || slot >= p.num_slots) return;  // -1, or out of range
  int64_t blk, off;
  split_slot(slot, p.block_size, blk, off);
  store_raw<V::kOutBytes>(
      p.key_cache + blk * p.kc_sb + off * p.kc_so + h * p.kc_sh + j * V::kOutBytes,
      V::convert(k, ks));
  store_raw<V::kOutBytes>(
      p.value_cache + blk * p.vc_sb + off * p.vc_so + h * p.vc_sh + j * V::kOutBytes,
      V::convert(v, vs));
}

// ---------------------------------------------------------------------------
// concat_and_cache_mla
// ---------------------------------------------------------------------------

struct MlaParams {
  const char* kv_c;
  const char* k_pe;
  char* cache;
  const int64_t* slots;
  int64_t slot_stride;  // elements
  const float* scale;
  int64_t kv_c_st, k_pe_st;  // byte strides of the token dim
  int64_t c_sb, c_so;  // cache byte strides (block, slot)
  int64_t num_slots;
  int64_t block_size;
  uint32_t num_tokens;
  uint32_t vecs_c;  // vectors of kv_c in a row; k_pe's follow
  uint32_t vecs_total;
  uint32_t threads_per_token;  // ceil(vecs_total / 2)
};

template <class V>
__device__ __forceinline__ const char* mla_src(const MlaParams& p, uint32_t t, uint32_t j) {
  return j < p.vecs_c ? p.kv_c + t * p.kv_c_st + j * V::kInBytes
                      : p.k_pe + t * p.k_pe_st + (j - p.vecs_c) * V::kInBytes;
}

template <class V>
__global__ void __launch_bounds__(kBlockThreads)
    concat_and_cache_mla_kernel(const MlaParams p) {
  pdl_enter();
  const uint32_t g = blockIdx.x * kBlockThreads + threadIdx.x;
  const uint32_t t = g / p.threads_per_token;
  if (t >= p.num_tokens) return;
  const uint32_t j0 = g - t * p.threads_per_token;
  const uint32_t j1 = j0 + p.threads_per_token;
  const bool two = j1 < p.vecs_total;
  const int64_t slot = p.slots[t * p.slot_stride];
  const typename V::In a = load_raw<V::kInBytes>(mla_src<V>(p, t, j0));
  typename V::In b{};
  if (two) b = load_raw<V::kInBytes>(mla_src<V>(p, t, j1));
  float s = 1.0f;
  if constexpr (V::kScaled) s = STABLEOPS_LDG(p.scale);
  if (slot < 0 || slot >= p.num_slots) return;  // -1, or out of range
  int64_t blk, off;
  split_slot(slot, p.block_size, blk, off);
  char* dst = p.cache + blk * p.c_sb + off * p.c_so;
  store_raw<V::kOutBytes>(dst + j0 * V::kOutBytes, V::convert(a, s));
  if (two) store_raw<V::kOutBytes>(dst + j1 * V::kOutBytes, V::convert(b, s));
}

// ---------------------------------------------------------------------------
// Host side: vector width, dispatch, launch.
// ---------------------------------------------------------------------------

// Largest power of two dividing every value OR-ed into `mask` (0: none).
uint64_t lowbit(uint64_t mask) { return mask & (~mask + 1); }

// What the cache holds: the source's bytes, or FP8 of one of two formats.
enum class CacheKind : uint8_t { kAuto, kFp8E4m3fn, kFp8E4m3fnuz };

// Calls f(V{}) with the widest vector type that every source address
// (in_mask) and cache address (out_mask) allows.
template <class Fn>
void dispatch_vec(const char* op, CacheKind mode, GpuFloat dtype,
                  uint64_t in_mask, uint64_t out_mask, Fn&& f) {
  if (mode == CacheKind::kAuto) {
    const uint64_t a = std::min<uint64_t>(16, lowbit(in_mask | out_mask));
    switch (a) {
      case 16: f(CopyVec<16>{}); return;
      case 8: f(CopyVec<8>{}); return;
      case 4: f(CopyVec<4>{}); return;
      case 2: f(CopyVec<2>{}); return;
      default:
        STD_TORCH_CHECK(false, op, ": internal error: ", a, "-byte alignment");
    }
  }
  const bool fn = mode == CacheKind::kFp8E4m3fn;
  auto fp8 = [&](auto tag) {
    using T = decltype(tag);
    constexpr int kN = 16 / static_cast<int>(sizeof(T));
    const bool wide = lowbit(in_mask) >= 16 && lowbit(out_mask) >= kN;
    if (fn) {
      if (wide) f(Fp8Vec<T, fp8::Format::kE4M3FN, kN>{});
      else f(Fp8Vec<T, fp8::Format::kE4M3FN, 1>{});
    } else {
      if (wide) f(Fp8Vec<T, fp8::Format::kE4M3FNUZ, kN>{});
      else f(Fp8Vec<T, fp8::Format::kE4M3FNUZ, 1>{});
    }
  };
  with_gpu_float(dtype, fp8);
}

// Blocks for `threads` threads; the kernels index threads with 32 bits.
dim3 grid_for(const char* op, uint64_t threads) {
  STD_TORCH_CHECK(threads <= 0xffffffffull - kBlockThreads, op,
                  ": too much work for one launch (", threads,
                  " threads needed, at most 2^32 - 256)");
  return dim3(static_cast<uint32_t>((threads + kBlockThreads - 1) / kBlockThreads));
}

// The launches. Every kernel instantiation is reached from these two, in
// every compiler pass. Their only callers are the host entry points below,
// which the device passes skip; a named namespace gives them external
// linkage, so those passes still compile them (and instantiate the
// kernels) instead of dropping them as unused.
void launch_flash(FlashParams p, CacheKind mode, GpuFloat dtype, uint64_t in_mask,
                  uint64_t out_mask, int64_t head_bytes, int64_t num_heads, int64_t num_tokens,
                  cudaStream_t stream) {
  constexpr const char* kOp = "reshape_and_cache_flash";
  dispatch_vec(kOp, mode, dtype, in_mask, out_mask, [&](auto vec) {
    using V = decltype(vec);
    const int64_t vecs_per_head = head_bytes / V::kInBytes;
    const uint64_t per_token = static_cast<uint64_t>(num_heads * vecs_per_head);
    const dim3 grid = grid_for(kOp, per_token * static_cast<uint64_t>(num_tokens));
    p.vecs_per_head = static_cast<uint32_t>(vecs_per_head);
    p.vecs_per_token = static_cast<uint32_t>(per_token);
    STABLEOPS_GPU_CHECK(gpu_launch(
        reshape_and_cache_flash_kernel<V>,
        grid, kBlockThreads, 0, stream, p));
  });
}

void launch_mla(MlaParams p, CacheKind mode, GpuFloat dtype, uint64_t in_mask,
                uint64_t out_mask, int64_t kv_c_bytes, int64_t width_bytes, int64_t num_tokens,
                cudaStream_t stream) {
  constexpr const char* kOp = "concat_and_cache_mla";
  dispatch_vec(kOp, mode, dtype, in_mask, out_mask, [&](auto vec) {
    using V = decltype(vec);
    p.vecs_c = static_cast<uint32_t>(kv_c_bytes / V::kInBytes);
    p.vecs_total = static_cast<uint32_t>(width_bytes / V::kInBytes);
    p.threads_per_token = (p.vecs_total + 1) / 2;
    const dim3 grid = grid_for(
        kOp, static_cast<uint64_t>(p.threads_per_token) * static_cast<uint64_t>(num_tokens));
    STABLEOPS_GPU_CHECK(gpu_launch(
        concat_and_cache_mla_kernel<V>,
        grid, kBlockThreads, 0, stream, p));
  });
}

}  // namespace cache_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace cache_gpu;  // NOLINT: this file's own kernels
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

uint64_t addr_bits(const Tensor& t) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

// Byte stride of dim `d`, or 0 (no constraint) when the dim has one element.
uint64_t stride_bits(const Tensor& t, int64_t d, int64_t elem) {
  return t.size(d) > 1 ? static_cast<uint64_t>(t.stride(d) * elem) : 0;
}

cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(current_gpu_stream(t.get_device_index()));
}

CacheKind kind_of(CacheMode mode) {
  switch (mode) {
    case CacheMode::kAuto: return CacheKind::kAuto;
    case CacheMode::kFp8E4m3fn: return CacheKind::kFp8E4m3fn;
    case CacheMode::kFp8E4m3fnuz: return CacheKind::kFp8E4m3fnuz;
  }
  return CacheKind::kAuto;  // unreachable: every mode is listed
}

}  // namespace

void reshape_and_cache_flash_cuda(const Tensor& key, const Tensor& value,
                                  Tensor& key_cache, Tensor& value_cache,
                                  const Tensor& slot_mapping,
                                  const std::string& kv_cache_dtype,
                                  const Tensor& k_scale, const Tensor& v_scale) {
  constexpr const char* kOp = "reshape_and_cache_flash";
  const FlashCacheDims dims = check_reshape_and_cache_flash(
      key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
      v_scale, torch::headeronly::DeviceType::CUDA);
  if (dims.num_tokens == 0 || dims.num_heads == 0 || dims.head_size == 0) return;

  const int64_t se = static_cast<int64_t>(key.element_size());
  const int64_t ce = static_cast<int64_t>(key_cache.element_size());
  const uint64_t in_mask = addr_bits(key) | addr_bits(value) |
                           stride_bits(key, 0, se) | stride_bits(key, 1, se) |
                           stride_bits(value, 0, se) | stride_bits(value, 1, se) |
                           static_cast<uint64_t>(dims.head_size * se);
  uint64_t out_mask = addr_bits(key_cache) | addr_bits(value_cache) |
                      static_cast<uint64_t>(dims.head_size * ce);
  for (int64_t d = 0; d < 3; ++d) {
    out_mask |= stride_bits(key_cache, d, ce) | stride_bits(value_cache, d, ce);
  }

  FlashParams p;
  p.key = static_cast<const char*>(key.data_ptr());
  p.value = static_cast<const char*>(value.data_ptr());
  p.key_cache = static_cast<char*>(key_cache.data_ptr());
  p.value_cache = static_cast<char*>(value_cache.data_ptr());
  p.slots = static_cast<const int64_t*>(slot_mapping.data_ptr());
  p.slot_stride = slot_mapping.stride(0);
  p.k_scale = static_cast<const float*>(k_scale.data_ptr());
  p.v_scale = static_cast<const float*>(v_scale.data_ptr());
  p.key_st = key.stride(0) * se;
  p.key_sh = key.stride(1) * se;
  p.value_st = value.stride(0) * se;
  p.value_sh = value.stride(1) * se;
  p.kc_sb = key_cache.stride(0) * ce;
  p.kc_so = key_cache.stride(1) * ce;
  p.kc_sh = key_cache.stride(2) * ce;
  p.vc_sb = value_cache.stride(0) * ce;
  p.vc_so = value_cache.stride(1) * ce;
  p.vc_sh = value_cache.stride(2) * ce;
  p.num_slots = dims.num_blocks * dims.block_size;
  p.block_size = dims.block_size;
  p.num_tokens = static_cast<uint32_t>(dims.num_tokens);

  const torch::stable::accelerator::DeviceGuard guard(key.get_device_index());
  const cudaStream_t stream = stream_of(key);
  launch_flash(p, kind_of(dims.mode), gpu_float_of(kOp, key.scalar_type()), in_mask, out_mask, dims.head_size * se,
               dims.num_heads, dims.num_tokens, stream);
}

void concat_and_cache_mla_cuda(const Tensor& kv_c, const Tensor& k_pe,
                               Tensor& kv_cache, const Tensor& slot_mapping,
                               const std::string& kv_cache_dtype,
                               const Tensor& scale) {
  constexpr const char* kOp = "concat_and_cache_mla";
  const MlaCacheDims dims = check_concat_and_cache_mla(
      kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale,
      torch::headeronly::DeviceType::CUDA);
  const int64_t width = dims.kv_lora_rank + dims.pe_dim;
  if (dims.num_tokens == 0 || width == 0) return;

  const int64_t se = static_cast<int64_t>(kv_c.element_size());
  const int64_t ce = static_cast<int64_t>(kv_cache.element_size());
  // A vector never straddles kv_c and k_pe: L and R are multiples of it.
  const uint64_t in_mask =
      addr_bits(kv_c) | addr_bits(k_pe) | stride_bits(kv_c, 0, se) |
      stride_bits(k_pe, 0, se) | static_cast<uint64_t>(dims.kv_lora_rank * se) |
      static_cast<uint64_t>(dims.pe_dim * se);
  const uint64_t out_mask =
      addr_bits(kv_cache) | stride_bits(kv_cache, 0, ce) |
      stride_bits(kv_cache, 1, ce) | static_cast<uint64_t>(dims.kv_lora_rank * ce) |
      static_cast<uint64_t>(dims.pe_dim * ce);

  MlaParams p;
  p.kv_c = static_cast<const char*>(kv_c.data_ptr());
  p.k_pe = static_cast<const char*>(k_pe.data_ptr());
  p.cache = static_cast<char*>(kv_cache.data_ptr());
  p.slots = static_cast<const int64_t*>(slot_mapping.data_ptr());
  p.slot_stride = slot_mapping.stride(0);
  p.scale = static_cast<const float*>(scale.data_ptr());
  p.kv_c_st = kv_c.stride(0) * se;
  p.k_pe_st = k_pe.stride(0) * se;
  p.c_sb = kv_cache.stride(0) * ce;
  p.c_so = kv_cache.stride(1) * ce;
  p.num_slots = dims.num_blocks * dims.block_size;
  p.block_size = dims.block_size;
  p.num_tokens = static_cast<uint32_t>(dims.num_tokens);

  const torch::stable::accelerator::DeviceGuard guard(kv_c.get_device_index());
  const cudaStream_t stream = stream_of(kv_c);
  launch_mla(p, kind_of(dims.mode), gpu_float_of(kOp, kv_c.scalar_type()), in_mask, out_mask,
             dims.kv_lora_rank * se, width * se, dims.num_tokens, stream);
}
#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
