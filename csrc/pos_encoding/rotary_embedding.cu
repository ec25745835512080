// CUDA/ROCm kernel of stableops::rotary_embedding (one source for both: the
// runtime names are mapped by gpu_compat.h when compiled with hipcc).
//
// Contract (validated by check_rotary_embedding_inputs, shared with the CPU
// kernel): query [T, Hq*D] or [T, Hq, D], key likewise with Hk heads (or
// None), one dtype among float32/float16/bfloat16, last dim contiguous, token
// and head strides free; positions int64 [T]; cos_sin_cache [P, rot_dim] of
// the query's dtype or float32 (cos in its first half, sin in its second).
// Dims [off, off + rot_dim) of every head are rotated in place, in float32:
//   NeoX  (x[i], x[i + rot_dim/2]),  GPT-J (x[2i], x[2i + 1]),  pair i:
//   (a, b) -> (a cos_i - b sin_i, b cos_i + a sin_i), sin negated if inverse.
// A position outside [0, P) is never used to index the cache: that token's
// query and key are left unchanged (no host sync is made to report it; the
// CPU kernel raises instead).
//
// Design (memory-bound: the rotated part of q and k is read and written once,
// plus one cache row per token):
//   * a thread owns one "unit" of kPairs pairs at the same place of kHeads
//     heads of one token: kHeads * (2 * kPairs) elements loaded before any
//     math (all loads in flight together), the token's position loaded
//     meanwhile, then the unit's cos/sin (kPairs each) loaded once and used
//     for all kHeads heads;
//   * vector path (chosen on the host when every pointer, stride and the
//     rotated span allow it): 16-byte accesses (gpu::Pack): NeoX units are
//     one pack from each half (kPairs = 8 fp16/bf16, 4 fp32), GPT-J units
//     one pack of interleaved pairs (kPairs = 4 or 2); 4 (NeoX) or 2
//     (GPT-J) packs per thread in flight. Scalar path (odd offsets, strides
//     or spans): kPairs = 1 with element accesses, same structure;
//   * NeoX vector path when the rotated span is U packs with U a power of
//     two in [2, 32] (rot_dim 16..256 for fp16/bf16): rotary_neox_lanes_kernel
//     instead, one pack per thread and head, the U lanes of a head covering
//     its span in order, each pair's other half fetched from lane ^ U/2 by
//     shuffles (see the kernel);
//   * threads enumerate (token, head group, unit) with the unit fastest, so
//     consecutive lanes touch consecutive 16-byte chunks of a head;
//     query heads come first, then key heads, in the same launch;
//   * element offsets in 64 bits; the per-launch thread index in 32 bits
//     (huge inputs are split into several launches of whole tokens);
//   * no shared memory, no __syncthreads, no warp-size assumption (lanes
//     exchange values only within aligned groups of at most 32), no
//     allocation, no host synchronisation: CUDA-graph capturable.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/gpu_reduce.h"
#include "csrc/core/gpu_vec.h"
#include "csrc/gpu_compat.h"

// The torch side (Tensor arguments, validation, dtype) is host code only:
// the device passes skip its headers (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#include "csrc/pos_encoding/rotary_embedding_check.h"
#endif

namespace stableops {
namespace rotary_gpu {

using gpu::Pack;

constexpr int kBlockThreads = 256;
// Blocks of kBlockThreads that must fit on one SM (CUDA's register budget;
// HIP ignores it), by style. The unit's values are held as float32: NeoX
// (2 heads x 16 values) under 48 registers (5 blocks) spilled them and ran
// at 57-80% of copy where 64 (4 blocks) ran at 78-90%; with 1 head per
// thread and 6 blocks it lost 1-10%. GPT-J with 2 heads per thread (was 4)
// fits 40 registers (6 blocks) and gained 1-2% at T >= 4096, 15-20% at
// T = 16 (H200, bf16/fp16, 2026-12-04).
constexpr int kNeoxMinBlocks = 4;
constexpr int kGptjMinBlocks = 6;
// rotary_neox_lanes_kernel holds GPT-J's amount per thread (2 heads x one
// pack, 34-40 registers): 6 blocks. 4 heads at 4 blocks (52-62 registers)
// ran within a point of it (H100, 2026-12-07).
constexpr int kNeoxLanesMinBlocks = 6;
constexpr int kVecBytes = 16;
// Heads per thread: on the vector paths 4 packs in flight per NeoX thread,
// 2 per GPT-J thread (with more threads per SM; see above).
constexpr int kNeoxHeads = 2;
constexpr int kGptjHeads = 2;
constexpr int kNeoxLanesHeads = 2;
// Largest number of packs in a head's rotated span that
// rotary_neox_lanes_kernel takes: a head's lanes must share a warp of 32.
constexpr int kMaxLanesPerHead = 32;

struct RotaryGpuParams {
  const int64_t* positions;
  int64_t positions_stride;
  void* query;
  int64_t q_token_stride, q_head_stride;  // elements
  void* key;                              // nullptr when key is None
  int64_t k_token_stride, k_head_stride;
  const void* cache;
  int64_t cache_stride;  // elements between rows
  int64_t max_position;
  int64_t rope_dim_offset;
  int64_t token_begin;   // first token of this launch
  int32_t q_heads;
  int32_t total_heads;   // q_heads + k_heads
  int32_t half;          // rot_dim / 2
  uint32_t units;        // units per head: half / kPairs
  uint32_t per_token;    // threads per token: head groups * units
  uint32_t num_items;    // threads of this launch: tokens * per_token
  float sin_sign;        // -1 for inverse
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(stableops_half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(stableops_bf16 v) { return __bfloat162float(v); }

template <typename E>
__device__ __forceinline__ E from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ stableops_half from_float<stableops_half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ stableops_bf16 from_float<stableops_bf16>(float v) {
  return __float2bfloat16(v);  // round to nearest even (CUDA and HIP)
}

// The unsigned word of `kBytes` bytes used for one access.
template <int kBytes>
struct Word;
template <>
struct Word<2> { using type = unsigned short; };
template <>
struct Word<4> { using type = unsigned int; };
template <>
struct Word<8> { using type = uint2; };
template <>
struct Word<16> { using type = uint4; };

// Width of one access to M contiguous E from an address aligned to kAlign
// bytes (the largest of 16/8/4/2 dividing both).
template <typename E, int M, int kAlign>
constexpr int access_bytes() {
  constexpr int total = M * static_cast<int>(sizeof(E));
  constexpr int cap = kAlign < kVecBytes ? kAlign : kVecBytes;
  return (total % 16 == 0 && cap >= 16) ? 16
      : (total % 8 == 0 && cap >= 8)    ? 8
      : (total % 4 == 0 && cap >= 4)    ? 4
                                        : static_cast<int>(sizeof(E));
}

// M contiguous E at p (aligned to kAlign bytes) as float32. kReadOnly: through
// the read-only data path (data not written by this kernel).
template <typename E, int M, int kAlign, bool kReadOnly>
__device__ __forceinline__ void load_floats(const E* p, float (&f)[M]) {
  constexpr int kBytes = access_bytes<E, M, kAlign>();
  if constexpr (kBytes == kVecBytes) {
    constexpr int kPack = Pack<E>::kElems;
    const uint4* src = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < M / kPack; ++k) {
      const uint4 v = kReadOnly ? STABLEOPS_LDG(src + k) : src[k];
      float tmp[kPack];
      Pack<E>::to_float(v, tmp);
#pragma unroll
      for (int j = 0; j < kPack; ++j) f[k * kPack + j] = tmp[j];
    }
  } else {
    using W = typename Word<kBytes>::type;
    constexpr int kPerWord = kBytes / static_cast<int>(sizeof(E));
    const W* src = reinterpret_cast<const W*>(p);
#pragma unroll
    for (int k = 0; k < M / kPerWord; ++k) {
      alignas(kBytes) E e[kPerWord];
      *reinterpret_cast<W*>(e) = kReadOnly ? STABLEOPS_LDG(src + k) : src[k];
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) f[k * kPerWord + j] = to_float(e[j]);
    }
  }
}

template <typename E, int M, int kAlign>
__device__ __forceinline__ void store_floats(E* p, const float (&f)[M]) {
  constexpr int kBytes = access_bytes<E, M, kAlign>();
  if constexpr (kBytes == kVecBytes) {
    constexpr int kPack = Pack<E>::kElems;
    uint4* dst = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int k = 0; k < M / kPack; ++k) {
      float tmp[kPack];
#pragma unroll
      for (int j = 0; j < kPack; ++j) tmp[j] = f[k * kPack + j];
      // One 16-byte store: the plain uint4 assignment became four 4-byte
      // stores in the sm_90a SASS (see gpu::store16).
      gpu::store16(dst + k, Pack<E>::from_float(tmp));
    }
  } else {
    using W = typename Word<kBytes>::type;
    constexpr int kPerWord = kBytes / static_cast<int>(sizeof(E));
    W* dst = reinterpret_cast<W*>(p);
#pragma unroll
    for (int k = 0; k < M / kPerWord; ++k) {
      alignas(kBytes) E e[kPerWord];
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) e[j] = from_float<E>(f[k * kPerWord + j]);
      dst[k] = *reinterpret_cast<const W*>(e);
    }
  }
}

// Head h's row of `token`: query heads first, then key heads.
template <typename T>
__device__ __forceinline__ T* head_row(const RotaryGpuParams& p, int64_t token, int32_t h) {
  const bool is_q = h < p.q_heads;
  T* base = static_cast<T*>(is_q ? p.query : p.key);
  return base + (is_q ? token * p.q_token_stride + h * p.q_head_stride
                      : token * p.k_token_stride + (h - p.q_heads) * p.k_head_stride);
}

// The cache row of `token`'s position. Out of range: the token is left
// unchanged (in_range false, no store) and row 0 is read instead, so the
// cache is never read outside (the host launches nothing for an empty cache).
struct CacheRow {
  int64_t index;
  bool in_range;
};
__device__ __forceinline__ CacheRow cache_row(const RotaryGpuParams& p, int64_t token) {
  const int64_t pos = STABLEOPS_LDG(p.positions + token * p.positions_stride);
  const bool in_range = static_cast<uint64_t>(pos) < static_cast<uint64_t>(p.max_position);
  return {in_range ? pos : 0, in_range};
}

// T: query/key element, C: cache element; kPairs pairs per unit; kVec: the
// host proved every access of the unit 16-byte aligned (else element access).
template <typename T, typename C, int kPairs, bool kNeox, int kHeads, bool kVec>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, (kNeox ? kNeoxMinBlocks : kGptjMinBlocks))
    rotary_embedding_kernel(const RotaryGpuParams p) {
  pdl_enter();
  // NeoX: two runs of kPairs (x[i0..], x[half + i0..]); GPT-J: one run of
  // 2 * kPairs interleaved pairs (x[2 i0..]).
  constexpr int kRun = kNeox ? kPairs : 2 * kPairs;
  constexpr int kRuns = kNeox ? 2 : 1;
  constexpr int kXAlign = kVec ? kVecBytes : static_cast<int>(sizeof(T));
  constexpr int kCAlign = kVec ? kPairs * static_cast<int>(sizeof(C)) : static_cast<int>(sizeof(C));

  const uint32_t item = blockIdx.x * blockDim.x + threadIdx.x;
  if (item >= p.num_items) return;
  const uint32_t t_local = item / p.per_token;
  const uint32_t rest = item - t_local * p.per_token;
  const uint32_t group = rest / p.units;
  const uint32_t unit = rest - group * p.units;
  const int64_t token = p.token_begin + t_local;
  const int64_t i0 = static_cast<int64_t>(unit) * kPairs;  // first pair of the unit

  // 1. Every x run of the unit's heads (query heads first, then key heads).
  T* x[kHeads];
  bool valid[kHeads];
  float v[kHeads][kRuns][kRun];
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int32_t h = static_cast<int32_t>(group) * kHeads + k;
    valid[k] = h < p.total_heads;
    x[k] = head_row<T>(p, token, h) + p.rope_dim_offset + (kNeox ? i0 : 2 * i0);
    if (valid[k]) {
      load_floats<T, kRun, kXAlign, false>(x[k], v[k][0]);
      if constexpr (kNeox) {
        load_floats<T, kRun, kXAlign, false>(x[k] + p.half, v[k][1]);
      }
    }
  }

  // 2. The position (see cache_row). No branch: the x loads above stay in
  //    flight while the position and the cache row arrive.
  const CacheRow crow = cache_row(p, token);

  // 3. cos/sin of the unit's pairs, once for all its heads.
  const C* row = static_cast<const C*>(p.cache) + crow.index * p.cache_stride + i0;
  float cs[kPairs];
  float sn[kPairs];
  load_floats<C, kPairs, kCAlign, true>(row, cs);
  load_floats<C, kPairs, kCAlign, true>(row + p.half, sn);
#pragma unroll
  for (int j = 0; j < kPairs; ++j) sn[j] *= p.sin_sign;

  // 4. Rotate and store.
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    if (!valid[k] || !crow.in_range) continue;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      float* a;
      float* b;
      if constexpr (kNeox) {
        a = &v[k][0][j];
        b = &v[k][kRuns - 1][j];
      } else {
        a = &v[k][0][2 * j];
        b = &v[k][0][2 * j + 1];
      }
      const float ra = *a * cs[j] - *b * sn[j];
      const float rb = *b * cs[j] + *a * sn[j];
      *a = ra;
      *b = rb;
    }
    store_floats<T, kRun, kXAlign>(x[k], v[k][0]);
    if constexpr (kNeox) {
      store_floats<T, kRun, kXAlign>(x[k] + p.half, v[k][1]);
    }
  }
}

// NeoX on the vector path with p.units = U = rot_dim / kPack packs per
// head's rotated span, U a power of two in [2, kMaxLanesPerHead]. A thread
// owns one pack (unit u) at the same place of kHeads heads of one token, so
// the U lanes of a head read and write its span as one contiguous run (the
// old NeoX unit, a pack from each half, split every warp access into runs
// of half the span). Units u < U/2 hold the first elements of their pairs,
// the others the second: each lane takes the raw pack of lane u ^ U/2 with
// four 32-bit shuffles and rewrites its own pack. A head's units start at a
// multiple of U in the launch's thread numbering (per_token is a multiple
// of U), and U divides 32, so the partner is in the same warp or wavefront.
// No lane returns early: a shuffle needs its partner; lanes past the last
// item (and their partners, also past it) take the launch's first item's
// indices (a real token) and neither load query/key nor store.
template <typename T, typename C, int kHeads>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, kNeoxLanesMinBlocks)
    rotary_neox_lanes_kernel(const RotaryGpuParams p) {
  pdl_enter();
  constexpr int kPack = Pack<T>::kElems;
  constexpr int kCAlign = kPack * static_cast<int>(sizeof(C));

  const uint32_t item = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = item < p.num_items;
  const uint32_t idx = active ? item : 0;
  const uint32_t t_local = idx / p.per_token;
  const uint32_t rest = idx - t_local * p.per_token;
  const uint32_t group = rest / p.units;
  const uint32_t unit = rest - group * p.units;
  const uint32_t partner_mask = p.units / 2;
  const bool second = (unit & partner_mask) != 0;  // holds x[half + i]
  const int64_t token = p.token_begin + t_local;
  const int64_t i0 = static_cast<int64_t>(unit & (partner_mask - 1)) * kPack;  // first pair

  // 1. The unit's pack of every head (query heads first, then key heads).
  T* x[kHeads];
  bool valid[kHeads];
  uint4 own[kHeads];
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int32_t h = static_cast<int32_t>(group) * kHeads + k;
    valid[k] = active && h < p.total_heads;
    x[k] = head_row<T>(p, token, h) + p.rope_dim_offset + static_cast<int64_t>(unit) * kPack;
    own[k] = valid[k] ? *reinterpret_cast<const uint4*>(x[k]) : make_uint4(0u, 0u, 0u, 0u);
  }

  // 2. The position (see cache_row; an idle lane reads the first token's)
  //    and the cos/sin of the unit's pairs.
  const CacheRow crow = cache_row(p, token);
  const C* row = static_cast<const C*>(p.cache) + crow.index * p.cache_stride + i0;
  float cs[kPack];
  float sn[kPack];
  load_floats<C, kPack, kCAlign, true>(row, cs);
  load_floats<C, kPack, kCAlign, true>(row + p.half, sn);
  // a' = a cos - b sin (first), b' = b cos + a sin (second); inverse: -sin.
  const float sign = second ? p.sin_sign : -p.sin_sign;
#pragma unroll
  for (int j = 0; j < kPack; ++j) sn[j] *= sign;

  // 3. The partner's packs, then rotate and store.
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    uint4 other;
    other.x = gpu::shfl_xor(own[k].x, static_cast<int>(partner_mask));
    other.y = gpu::shfl_xor(own[k].y, static_cast<int>(partner_mask));
    other.z = gpu::shfl_xor(own[k].z, static_cast<int>(partner_mask));
    other.w = gpu::shfl_xor(own[k].w, static_cast<int>(partner_mask));
    if (!valid[k] || !crow.in_range) continue;
    float mine[kPack];
    float peer[kPack];
    Pack<T>::to_float(own[k], mine);
    Pack<T>::to_float(other, peer);
#pragma unroll
    for (int j = 0; j < kPack; ++j) mine[j] = mine[j] * cs[j] + peer[j] * sn[j];
    gpu::store16(x[k], Pack<T>::from_float(mine));
  }
}

// Launches `kernel` over every token, kHeads heads and `units` threads per
// head group, in launches whose thread index fits 32 bits.
template <int kHeads, typename Kernel>
void launch_tokens(Kernel kernel, int64_t units, RotaryGpuParams p, int64_t num_tokens,
                   cudaStream_t stream) {
  const int64_t groups = (static_cast<int64_t>(p.total_heads) + kHeads - 1) / kHeads;
  const int64_t per_token = groups * units;
  // Threads of one launch are counted in 32 bits (with a block of headroom).
  const int64_t max_items = static_cast<int64_t>(INT32_MAX) - kBlockThreads;
  STD_TORCH_CHECK(
      per_token <= max_items,
      "rotary_embedding: one token needs ", per_token,
      " GPU threads (heads x rotated pairs), more than the kernel's 32-bit index allows");
  const int64_t tokens_per_launch = max_items / per_token;
  p.units = static_cast<uint32_t>(units);
  p.per_token = static_cast<uint32_t>(per_token);
  for (int64_t begin = 0; begin < num_tokens; begin += tokens_per_launch) {
    const int64_t tokens =
        num_tokens - begin < tokens_per_launch ? num_tokens - begin : tokens_per_launch;
    p.token_begin = begin;
    p.num_items = static_cast<uint32_t>(tokens * per_token);
    const dim3 grid(static_cast<uint32_t>((p.num_items + kBlockThreads - 1) / kBlockThreads));
    STABLEOPS_GPU_CHECK(gpu_launch(kernel, grid, kBlockThreads, 0, stream, p));
  }
}

template <typename T, typename C, int kPairs, bool kNeox, bool kVec>
void launch(const RotaryGpuParams& p, int64_t num_tokens, cudaStream_t stream) {
  constexpr int kHeads = kNeox ? kNeoxHeads : kGptjHeads;
  launch_tokens<kHeads>(rotary_embedding_kernel<T, C, kPairs, kNeox, kHeads, kVec>,
                        p.half / kPairs, p, num_tokens, stream);
}

// Whether rotary_neox_lanes_kernel takes a NeoX span of `packs` packs.
constexpr bool neox_lanes(int64_t packs) {
  return packs >= 2 && packs <= kMaxLanesPerHead && (packs & (packs - 1)) == 0;
}

template <typename T, typename C>
void dispatch_style(const RotaryGpuParams& p, int64_t num_tokens, bool is_neox, bool vec,
                    cudaStream_t stream) {
  constexpr int kPack = Pack<T>::kElems;  // elements per 16 bytes
  if (vec) {
    if (is_neox && neox_lanes(2 * p.half / kPack)) {
      launch_tokens<kNeoxLanesHeads>(rotary_neox_lanes_kernel<T, C, kNeoxLanesHeads>,
                                     2 * p.half / kPack, p, num_tokens, stream);
    } else if (is_neox) {
      launch<T, C, kPack, true, true>(p, num_tokens, stream);
    } else {
      launch<T, C, kPack / 2, false, true>(p, num_tokens, stream);
    }
  } else {
    if (is_neox) {
      launch<T, C, 1, true, false>(p, num_tokens, stream);
    } else {
      launch<T, C, 1, false, false>(p, num_tokens, stream);
    }
  }
}

template <typename T>
void dispatch_cache(const RotaryGpuParams& p, int64_t num_tokens, bool is_neox, bool vec,
                    bool cache_is_f32, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    dispatch_style<float, float>(p, num_tokens, is_neox, vec, stream);
  } else if (cache_is_f32) {
    dispatch_style<T, float>(p, num_tokens, is_neox, vec, stream);
  } else {
    dispatch_style<T, T>(p, num_tokens, is_neox, vec, stream);
  }
}

// Every kernel instantiation is reached from here, in every compiler pass.
// Its only caller is the host entry point below, which the device passes
// skip; a named namespace gives it external linkage, so those passes still
// compile it (and instantiate the kernels) instead of dropping it as unused.
void dispatch(const RotaryGpuParams& p, int64_t num_tokens, GpuFloat dtype,
              bool cache_is_f32, bool is_neox, bool vec, cudaStream_t stream) {
  with_gpu_float(dtype, [&](auto t) {
    dispatch_cache<decltype(t)>(p, num_tokens, is_neox, vec, cache_is_f32, stream);
  });
}

}  // namespace rotary_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace rotary_gpu;  // NOLINT: this file's own kernels

namespace {

using torch::headeronly::ScalarType;

bool aligned(const void* ptr, int64_t bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % static_cast<std::uintptr_t>(bytes) == 0;
}

// A stride is irrelevant to alignment along a dim of size <= 1.
bool stride_aligned(int64_t size, int64_t stride, int64_t elem, int64_t bytes) {
  return size <= 1 || (stride * elem) % bytes == 0;
}

// Whether the rotated span of every (token, head) row of query or key starts
// 16-byte aligned.
bool heads_vectorizable(const void* data, const RotaryHeads& h, int64_t num_tokens,
                        int64_t rope_dim_offset, int64_t elem) {
  return aligned(static_cast<const char*>(data) + rope_dim_offset * elem, kVecBytes) &&
      stride_aligned(num_tokens, h.token_stride, elem, kVecBytes) &&
      stride_aligned(h.num_heads, h.head_stride, elem, kVecBytes);
}

}  // namespace

void rotary_embedding_cuda(
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
      torch::headeronly::DeviceType::CUDA);
  const int64_t total_heads = dims.query.num_heads + dims.key.num_heads;
  // An empty cache: every position is out of range, every token unchanged.
  if (dims.num_tokens == 0 || total_heads == 0 || dims.max_position == 0) return;
  STD_TORCH_CHECK(total_heads <= static_cast<int64_t>(INT32_MAX),
                  "rotary_embedding: num_heads of query + key (", total_heads,
                  ") exceeds the kernel's 32-bit head index");

  const int64_t elem = static_cast<int64_t>(query.element_size());
  const int64_t cache_elem = static_cast<int64_t>(cos_sin_cache.element_size());
  const int64_t half = dims.rot_dim / 2;
  const int64_t pack = kVecBytes / elem;

  RotaryGpuParams p{};
  p.positions = static_cast<const int64_t*>(positions.const_data_ptr());
  p.positions_stride = positions.stride(0);
  p.query = query.mutable_data_ptr();
  p.q_token_stride = dims.query.token_stride;
  p.q_head_stride = dims.query.head_stride;
  p.key = dims.has_key ? key->mutable_data_ptr() : nullptr;
  p.k_token_stride = dims.key.token_stride;
  p.k_head_stride = dims.key.head_stride;
  p.cache = cos_sin_cache.const_data_ptr();
  p.cache_stride = cos_sin_cache.stride(0);
  p.max_position = dims.max_position;
  p.rope_dim_offset = rope_dim_offset;
  p.q_heads = static_cast<int32_t>(dims.query.num_heads);
  p.total_heads = static_cast<int32_t>(total_heads);
  p.half = static_cast<int32_t>(half);
  p.sin_sign = inverse ? -1.0f : 1.0f;

  // The vector path needs: whole packs per unit (NeoX: each half a whole
  // number of packs; GPT-J: the span), the span of every query/key row
  // starting 16-byte aligned, and the unit's cos and sin runs in the cache
  // (kPairs elements at pair i0 and at half + i0 of a row) aligned to their
  // access width, min(16, kPairs * cache element size).
  const int64_t unit_pairs = is_neox ? pack : pack / 2;
  const int64_t cache_align = std::min<int64_t>(kVecBytes, unit_pairs * cache_elem);
  const bool vec = (is_neox ? half % pack : dims.rot_dim % pack) == 0 &&
      heads_vectorizable(p.query, dims.query, dims.num_tokens, rope_dim_offset, elem) &&
      (!dims.has_key ||
       heads_vectorizable(p.key, dims.key, dims.num_tokens, rope_dim_offset, elem)) &&
      aligned(p.cache, cache_align) &&
      stride_aligned(dims.max_position, p.cache_stride, cache_elem, cache_align) &&
      (half * cache_elem) % cache_align == 0;

  const int32_t device_index = query.get_device_index();
  const torch::stable::accelerator::DeviceGuard device_guard(device_index);
  const cudaStream_t stream = static_cast<cudaStream_t>(current_gpu_stream(device_index));
  const bool cache_is_f32 = cos_sin_cache.scalar_type() == ScalarType::Float;

  dispatch(p, dims.num_tokens, gpu_float_of("rotary_embedding", query.scalar_type()), cache_is_f32, is_neox, vec, stream);
}
#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
