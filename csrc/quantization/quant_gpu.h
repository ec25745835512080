// GPU building blocks of the quantization kernels (fp8_quant.cu,
// int8_quant.cu; CUDA and HIP). Included only from .cu sources.
//
// Layout. The input and result are [T rows x H] with one row stride each
// (quant_check.h). A row is cut into units of N elements: N = 8 on the vector
// path (one or two 16-byte loads, one 8-byte store; needs H % 8 == 0 and
// aligned rows) or N = 1 on the scalar path (any H, any alignment). A block
// is shaped [tx units x ty rows]: tx (a power of two, at most 256) threads
// share a row and each handles up to kUnits units of it per pass, all loads
// issued before any math; ty = 256 / tx rows per block, so short rows still
// fill the block. Small tensors of the static ops take small_rows_kernel
// (one unit per thread, a row over several blocks); the per-row reductions
// give the rows of a small launch up to 256 threads.
//
// Quantisers turn the quotient x / s into the stored value: v = x / s (FP8:
// then clamped and converted), or v = rne(x / s) + azp (INT8: then NaN -> 0
// and saturated to [-128, 127]). The codes equal those of the IEEE float32
// division torch computes: where one scale covers a row (or the tensor), the
// quotient comes from core/scale_div.h's ScaleDivisor (one reciprocal per
// row, two FMAs a value, no branch, so the compiler interleaves a thread's
// values; its codes are those of x / s) whenever the scale is in its fast
// range, and from the IEEE division (nvcc's default -prec-div=true, HIP's
// correctly rounded division) otherwise, and for column groups.
//
// Reductions (amax, min/max) are warp-size agnostic: shuffles over at most
// STABLEOPS_WARP_SIZE lanes (32 on NVIDIA, 64 on CDNA), then shared memory
// across the warps of a row or block.
#pragma once

#include <cmath>
#include <cstdint>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/fp8.h"
#include "csrc/core/gpu_reduce.h"
#include "csrc/core/gpu_vec.h"
#include "csrc/core/launch_shape.h"
#include "csrc/core/scale_div.h"
#include "csrc/gpu_compat.h"

// The Tensor-taking helpers are host code only: the device passes skip
// their headers (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>

#include "csrc/quantization/quant_check.h"
#endif

namespace stableops {
namespace quant_gpu {

constexpr int kVec = 8;              // elements per unit on the vector path
constexpr int kBlockThreads = 256;   // every kernel's block size
constexpr int kUnits = 4;            // units per thread per pass
constexpr int kMaxWarps = kBlockThreads / 32;
// A per-row launch with fewer blocks than launch_shape::kMinGridBlocks gives
// its rows 256 threads.
using launch_shape::kMinGridBlocks;

// ---------------------------------------------------------------------------
// Elements: loads of N elements as float32, stores of N bytes.
// ---------------------------------------------------------------------------
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(stableops_half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(stableops_bf16 v) { return __bfloat162float(v); }

template <typename T, int N>
struct Raw;

// Scalar path: one element, any alignment.
template <typename T>
struct Raw<T, 1> {
  T v;
  __device__ __forceinline__ void load(const T* p) { v = *p; }
  __device__ __forceinline__ void to_float(float (&f)[1]) const { f[0] = to_f32(v); }
};

// Vector path: 8 elements in 16-byte loads (p 16-byte aligned).
template <typename T>
struct Raw<T, kVec> {
  static constexpr int kPackElems = gpu::Pack<T>::kElems;
  static constexpr int kLoads = kVec / kPackElems;
  uint4 v[kLoads];
  __device__ __forceinline__ void load(const T* p) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      v[i] = STABLEOPS_LDG(reinterpret_cast<const uint4*>(p) + i);
    }
  }
  __device__ __forceinline__ void to_float(float (&f)[kVec]) const {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      gpu::Pack<T>::to_float(
          v[i], *reinterpret_cast<float(*)[kPackElems]>(&f[i * kPackElems]));
    }
  }
};

// Stores N one-byte codes (p 8-byte aligned when N == 8).
template <int N>
__device__ __forceinline__ void store_codes(uint8_t* p, const uint32_t (&c)[N]) {
  if constexpr (N == 1) {
    *p = static_cast<uint8_t>(c[0]);
  } else {
    static_assert(N == 8, "units are 1 or 8 elements");
    uint2 w;
    w.x = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
    w.y = c[4] | (c[5] << 8) | (c[6] << 16) | (c[7] << 24);
    *reinterpret_cast<uint2*>(p) = w;
  }
}

// ---------------------------------------------------------------------------
// Quantisers.
// ---------------------------------------------------------------------------
__device__ __forceinline__ float max_nan(float a, float b) {
  return (a != a || a > b) ? a : b;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  return (a != a || a < b) ? a : b;
}

// The parameters of a row (or group): scale s, zero point azp (INT8) and
// `zero`: the row is written as zeros (a dynamic INT8 row with s == 0).
struct RowQuant {
  float s;
  float azp;
  bool zero;
};

// Quantiser Q: finish(quotient, q) is the value stored for quotient x / s;
// value(x, q) the same from x with the IEEE division.
template <fp8::Format F>
struct Fp8Q {
  __device__ __forceinline__ static float finish(float quotient, const RowQuant&) {
    return quotient;
  }
  __device__ __forceinline__ static float value(float x, const RowQuant& q) {
    return finish(x / q.s, q);
  }
  template <int N>
  __device__ __forceinline__ static void store(uint8_t* p, const float (&v)[N]) {
    if constexpr (N == 1) {
      const uint32_t c[1] = {fp8::quantize<F>(v[0])};
      store_codes<1>(p, c);
    } else {
      static_assert(N == 8, "units are 1 or 8 elements");
      uint32_t c[2];
      fp8::quantize_words<F, 8>(v, c);
      const uint2 w = make_uint2(c[0], c[1]);
      *reinterpret_cast<uint2*>(p) = w;
    }
  }
};

// The INT8 code of t: round half to even, saturate to [-128, 127], NaN ->
// 0. CUDA: one instruction, cvt.rni.sat.s8.f32 (PTX converts NaN to 0); HIP:
// the same steps in float32.
__device__ __forceinline__ uint32_t int8_code(float t) {
#if STABLEOPS_ROCM
  t = rintf(t);
  t = t != t ? 0.0f : t;
  t = fminf(fmaxf(t, -128.0f), 127.0f);
  return static_cast<uint32_t>(static_cast<int32_t>(t)) & 0xffu;
#else
  int32_t r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(t));
  return static_cast<uint32_t>(r) & 0xffu;
#endif
}

// kAzp: with a zero point, v = rne(x / s) + azp (a float32 sum, as torch
// computes it), whose code is int8_code(v); without, int8_code(x / s)
// rounds the quotient itself (rne(q) + 0 has the same code).
template <bool kAzp>
struct Int8Q {
  __device__ __forceinline__ static float finish(float quotient, const RowQuant& q) {
    if constexpr (kAzp) {
      return q.zero ? 0.0f : rintf(quotient) + q.azp;
    } else {
      return q.zero ? 0.0f : quotient;
    }
  }
  __device__ __forceinline__ static float value(float x, const RowQuant& q) {
    return finish(x / q.s, q);
  }
  template <int N>
  __device__ __forceinline__ static void store(uint8_t* p, const float (&v)[N]) {
    uint32_t c[N];
#pragma unroll
    for (int i = 0; i < N; ++i) c[i] = int8_code(v[i]);
    store_codes<N>(p, c);
  }
};

// int32 saturation of an integer-valued float, kept as a float: NaN -> 0,
// else clamped to [-2^31, 2^31 - 128] (the largest float below 2^31).
__device__ __forceinline__ float sat_int32(float v) {
  v = v != v ? 0.0f : v;
  return fminf(fmaxf(v, -0x1p31f), 2147483520.0f);
}

// ---------------------------------------------------------------------------
// Reductions.
// ---------------------------------------------------------------------------
// Reduces `v` over segments of `seg` consecutive threads of the block (seg a
// power of two dividing the block; threads numbered x-fastest). Every thread
// of the block must call it; each gets its segment's result. `Op` has
// combine(a, b) and shfl(v, lane_mask).
template <class Op, class V>
__device__ __forceinline__ V segment_reduce(V v, int seg, V* smem) {
  constexpr int kWarp = STABLEOPS_WARP_SIZE;
  const int lanes = seg < kWarp ? seg : kWarp;
  for (int off = lanes / 2; off > 0; off >>= 1) {
    v = Op::combine(v, Op::shfl(v, off));
  }
  if (seg <= kWarp) {
    return v;
  }
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (tid % kWarp == 0) {
    smem[tid / kWarp] = v;
  }
  __syncthreads();
  const int warps = seg / kWarp;
  const int first = (tid / seg) * warps;
  V r = smem[first];
  for (int i = 1; i < warps; ++i) {
    r = Op::combine(r, smem[first + i]);
  }
  return r;
}

// max of |x| as float32 bits with the sign cleared: unsigned order is the
// order of |x| with NaN above +inf, so the maximum propagates NaN.
struct AbsMaxOp {
  using V = uint32_t;
  __device__ __forceinline__ static V init() { return 0u; }
  __device__ __forceinline__ static V add(V a, float x) {
    const uint32_t b = __float_as_uint(x) & 0x7fffffffu;
    return b > a ? b : a;
  }
  __device__ __forceinline__ static V combine(V a, V b) { return b > a ? b : a; }
  __device__ __forceinline__ static V shfl(V v, int m) { return gpu::shfl_xor(v, m); }
};

// (max, min), NaN propagating.
struct MinMaxOp {
  struct V {
    float mx;
    float mn;
  };
  __device__ __forceinline__ static V init() { return {-INFINITY, INFINITY}; }
  __device__ __forceinline__ static V add(V a, float x) {
    return {max_nan(x, a.mx), min_nan(x, a.mn)};
  }
  __device__ __forceinline__ static V combine(V a, V b) {
    return {max_nan(a.mx, b.mx), min_nan(a.mn, b.mn)};
  }
  __device__ __forceinline__ static V shfl(V v, int m) {
    return {gpu::shfl_xor(v.mx, m), gpu::shfl_xor(v.mn, m)};
  }
};

// ---------------------------------------------------------------------------
// Host side: launch shape and path choice.
// ---------------------------------------------------------------------------

// [tx, ty]: tx the smallest power of two >= ceil(units / per_thread), at
// most 256 (a row of up to 256 * per_thread units takes one pass), ty = 256 /
// tx.
inline dim3 block_shape(int64_t units_per_row, int per_thread = kUnits) {
  int64_t want = (units_per_row + per_thread - 1) / per_thread;
  int tx = 1;
  while (tx < kBlockThreads && tx < want) {
    tx *= 2;
  }
  return dim3(static_cast<unsigned>(tx), static_cast<unsigned>(kBlockThreads / tx));
}

// Whether rows of `hidden` elements can use the vector path: whole units,
// 16-byte aligned input rows and 8-byte aligned result rows.
inline bool vector_path(
    const void* in,
    int64_t in_row_stride,
    int64_t in_elem_size,
    const void* out,
    int64_t out_row_stride,
    int64_t hidden,
    int64_t num_rows) {
  const auto in_addr = reinterpret_cast<std::uintptr_t>(in);
  const auto out_addr = reinterpret_cast<std::uintptr_t>(out);
  const bool rows_aligned = num_rows <= 1 ||
      ((in_row_stride * in_elem_size) % 16 == 0 && out_row_stride % 8 == 0);
  return hidden % kVec == 0 && in_addr % 16 == 0 && out_addr % 8 == 0 &&
      rows_aligned;
}

// Largest grid (blocks) of a kernel; the x dimension allows 2^31 - 1.
inline unsigned grid_blocks(const char* op, int64_t num_rows, unsigned rows_per_block) {
  const int64_t blocks = (num_rows + rows_per_block - 1) / rows_per_block;
  STD_TORCH_CHECK(
      blocks <= 0x7fffffff, op, ": ", num_rows,
      " rows exceed the kernel's grid (", rows_per_block, " rows per block)");
  return static_cast<unsigned>(blocks);
}

// Calls body(divide) with divide(x) giving x / s's quotient: ScaleDivisor's
// when s is in its fast range, else the IEEE division. The branch is on s
// alone (uniform), so neither loop body branches per value.
template <class Body>
__device__ __forceinline__ void with_divider(float s, Body&& body) {
  const ScaleDivisor d(s);
  if (d.fast) {
    body([&](float x) { return d.quotient(x); });
  } else {
    body([&](float x) { return x / s; });
  }
}

// ---------------------------------------------------------------------------
// Row traversal.
// ---------------------------------------------------------------------------

// Loads units base + j * blockDim.x (j < kUnits, the unit < units) of row
// `x`: every load is issued before any of them is used.
template <typename T, int N>
__device__ __forceinline__ void load_units(
    Raw<T, N> (&raw)[kUnits], const T* x, int base, int units) {
  const int stride = static_cast<int>(blockDim.x);
#pragma unroll
  for (int j = 0; j < kUnits; ++j) {
    const int u = base + j * stride;
    if (u < units) raw[j].load(x + static_cast<int64_t>(u) * N);
  }
}

// fn(j, u, values) on each unit load_units(raw, x, base, units) loaded; j
// is a constant once unrolled.
template <typename T, int N, class Fn>
__device__ __forceinline__ void visit_units(
    const Raw<T, N> (&raw)[kUnits], int base, int units, Fn&& fn) {
  const int stride = static_cast<int>(blockDim.x);
#pragma unroll
  for (int j = 0; j < kUnits; ++j) {
    const int u = base + j * stride;
    if (u < units) {
      float f[N];
      raw[j].to_float(f);
      fn(j, u, f);
    }
  }
}

// Visits units first, first + blockDim.x, ... (< units) of row `x`, kUnits
// loads in flight per pass.
template <typename T, int N, class Fn>
__device__ __forceinline__ void for_row_units(const T* x, int first, int units, Fn&& fn) {
  for (int base = first; base < units; base += static_cast<int>(blockDim.x) * kUnits) {
    Raw<T, N> raw[kUnits];
    load_units<T, N>(raw, x, base, units);
    visit_units<T, N>(raw, base, units, fn);
  }
}

// ---------------------------------------------------------------------------
// Kernels.
// ---------------------------------------------------------------------------

// A scale per group of rows x columns (static ops, and the quantise pass of
// dynamic_scaled_fp8_quant): row r, column c uses
// scale[(r / group_m) * scale_stride_m + (c / group_n) * scale_stride_n].
struct RowsParams {
  const void* in;
  uint8_t* out;
  int64_t in_stride;
  int64_t out_stride;
  int64_t num_rows;
  int32_t hidden;
  int32_t units;  // units per row: hidden / N
  const float* scale;
  int64_t group_m;
  int32_t group_n;  // at most hidden; == hidden: one scale per row
  int64_t scale_stride_m;
  int64_t scale_stride_n;
  const int32_t* azp;  // static INT8 zero point (one element) or nullptr
  // Blocks take the rows last first: after a pass that read the input in
  // order, its tail is still in L2.
  bool reverse;
};

// Quantises the units of row `row` that visit(x, fn) hands to fn(j, u,
// values) (x: the row's input): the row's scale (or column groups' scales)
// and zero point, the quotient, the stores.
template <typename T, int N, class Q, class Visit>
__device__ __forceinline__ void quantize_row(const RowsParams& p, int64_t row, Visit&& visit) {
  const T* x = static_cast<const T*>(p.in) + row * p.in_stride;
  uint8_t* o = p.out + row * p.out_stride;
  const float* srow =
      p.scale + (p.scale_stride_m == 0 ? 0 : (row / p.group_m) * p.scale_stride_m);
  RowQuant q{0.0f, 0.0f, false};
  if (p.azp != nullptr) q.azp = static_cast<float>(STABLEOPS_LDG(p.azp));

  if (p.group_n >= p.hidden) {  // one scale for the row
    q.s = STABLEOPS_LDG(srow);
    with_divider(q.s, [&](auto divide) {
      visit(x, [&](int, int u, const float (&f)[N]) {
        float v[N];
#pragma unroll
        for (int i = 0; i < N; ++i) v[i] = Q::finish(divide(f[i]), q);
        Q::template store<N>(o + static_cast<int64_t>(u) * N, v);
      });
    });
    return;
  }
  // Column groups: one division per unit, then a running remainder.
  visit(x, [&](int, int u, const float (&f)[N]) {
    const int col = u * N;
    int g = col / p.group_n;
    int rem = col - g * p.group_n;
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      RowQuant qi = q;
      qi.s = STABLEOPS_LDG(srow + g * p.scale_stride_n);
      v[i] = Q::value(f[i], qi);
      if (++rem == p.group_n) {
        rem = 0;
        ++g;
      }
    }
    Q::template store<N>(o + static_cast<int64_t>(u) * N, v);
  });
}

template <typename T, int N, class Q>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, 4)
    rows_kernel(const RowsParams p) {
  pdl_enter();
  const int64_t block = p.reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t row = block * blockDim.y + threadIdx.y;
  if (row >= p.num_rows) return;  // no barrier in this kernel
  quantize_row<T, N, Q>(p, row, [&](const T* x, auto&& fn) {
    for_row_units<T, N>(x, threadIdx.x, p.units, fn);
  });
}

// The small-tensor form of rows_kernel (vector path): a fixed block of
// kSmallBlock threads, one unit per thread, grid (units / kSmallBlock, rows),
// no loop; the unit's loads are issued before the scale's. rows_kernel puts
// one token of 4096 on one block (128 threads of four units each, behind its
// row arithmetic and pass loop): 1.75 us against 1.35 us for this kernel on
// an H200. Up to kSmallMaxBlocks blocks it is the faster of the two (static
// FP8, T = 128, H = 8192: 2.93 against 3.24 us); at 4096 blocks they are
// within 3%, from 8192 on rows_kernel is 12-37% faster.
using launch_shape::kSmallBlock;
constexpr int64_t kSmallMaxBlocks = 2048;

template <typename T, class Q>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kSmallBlock, 1)
    small_rows_kernel(const RowsParams p) {
  pdl_enter();
  const int u = static_cast<int>(blockIdx.x) * kSmallBlock + static_cast<int>(threadIdx.x);
  if (u >= p.units) return;
  const int64_t row = blockIdx.y;
  Raw<T, kVec> raw;
  raw.load(static_cast<const T*>(p.in) + row * p.in_stride + static_cast<int64_t>(u) * kVec);
  quantize_row<T, kVec, Q>(p, row, [&](const T*, auto&& fn) {
    float f[kVec];
    raw.to_float(f);
    fn(0, u, f);
  });
}

// Per-row dynamic quantisation: one row per [tx] threads, amax (or min/max)
// reduced over the row, the row's scale written, then the row quantised.
struct DynParams {
  const void* in;
  uint8_t* out;
  int64_t in_stride;
  int64_t out_stride;
  int64_t num_rows;
  int32_t units;  // units per row
  float* scale;   // row r at scale[r * scale_stride]
  int64_t scale_stride;
  const float* scale_ub;  // FP8 per-token upper bound or nullptr
  int32_t* azp;           // INT8 asymmetric zero points or nullptr
  int64_t azp_stride;
};

// scale = max(min(amax, ub) / MAX, 1 / (MAX * 512)), NaN propagating;
// monotone in amax.
template <fp8::Format F>
__device__ __forceinline__ float dynamic_fp8_scale(float amax, float ub) {
  constexpr float kMax = fp8::Traits<F>::kMax;
  return max_nan(min_nan(amax, ub) / kMax, 1.0f / (kMax * 512.0f));
}

template <fp8::Format F>
struct Fp8DynMode {
  using Op = AbsMaxOp;
  using Q = Fp8Q<F>;
  __device__ __forceinline__ static RowQuant finish(
      uint32_t amax_bits, const DynParams& p, int64_t row, bool writer) {
    const float ub = p.scale_ub != nullptr ? STABLEOPS_LDG(p.scale_ub) : INFINITY;
    const float s = dynamic_fp8_scale<F>(__uint_as_float(amax_bits), ub);
    if (writer) p.scale[row * p.scale_stride] = s;
    return {s, 0.0f, false};
  }
};

// s = amax / 127; s == 0 writes zeros.
struct Int8SymMode {
  using Op = AbsMaxOp;
  using Q = Int8Q<false>;
  __device__ __forceinline__ static RowQuant finish(
      uint32_t amax_bits, const DynParams& p, int64_t row, bool writer) {
    const float s = __uint_as_float(amax_bits) / 127.0f;
    if (writer) p.scale[row * p.scale_stride] = s;
    return {s, 0.0f, s == 0.0f};
  }
};

// s = (max - min) / 255, azp = sat32(rne(-128 - min / s)); s == 0 writes
// zeros with azp 0.
struct Int8AsymMode {
  using Op = MinMaxOp;
  using Q = Int8Q<true>;
  __device__ __forceinline__ static RowQuant finish(
      MinMaxOp::V mm, const DynParams& p, int64_t row, bool writer) {
    const float s = (mm.mx - mm.mn) / 255.0f;
    const bool zero = s == 0.0f;
    const float azp = zero ? 0.0f : sat_int32(rintf(-128.0f - mm.mn / s));
    if (writer) {
      p.scale[row * p.scale_stride] = s;
      p.azp[row * p.azp_stride] = static_cast<int32_t>(azp);
    }
    return {s, azp, zero};
  }
};

// kResident: the row (at most blockDim.x * kUnits units) stays in registers
// between the reduction and the quantisation, so the input is read once;
// otherwise the quantisation reads the row again.
//
// Blocks per SM asked of ptxas (HIP ignores the bound): six (<= 40
// registers) for a resident 16-bit row of 16-byte loads, four (<= 64)
// otherwise. Six hide the reduction between a row's loads and its stores
// behind more rows in flight: per-token FP8 / dynamic INT8 rose from
// 80.5 / 79.6% to 84.6 / 83.6% of copy at T = 4096, H = 8192 (H200, bf16),
// a few bytes spilling; a float32 row (twice the registers) or the
// two-pass form spilled 24-168 bytes under six, so they keep four.
template <typename T, int N, bool kResident>
constexpr int dynamic_rows_min_blocks() {
  return kResident && N == kVec && sizeof(T) == 2 ? 6 : 4;
}

template <typename T, int N, class Mode, bool kResident>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, (dynamic_rows_min_blocks<T, N, kResident>()))
    dynamic_rows_kernel(const DynParams p) {
  pdl_enter();
  using Op = typename Mode::Op;
  using Q = typename Mode::Q;
  using V = typename Op::V;
  __shared__ V smem[kMaxWarps];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < p.num_rows;  // every thread reaches the reduction
  const int64_t r = valid ? row : 0;
  const T* x = static_cast<const T*>(p.in) + r * p.in_stride;
  uint8_t* o = p.out + r * p.out_stride;
  const int units = valid ? p.units : 0;

  V acc = Op::init();
  const auto accumulate = [&](int, int, const float (&f)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) acc = Op::add(acc, f[i]);
  };
  // Resident: one pass (units <= blockDim.x * kUnits); the raw row stays in
  // registers (half the registers of its float32 values for 16-bit inputs)
  // and is converted again to quantise.
  Raw<T, N> kept[kResident ? kUnits : 1];
  if constexpr (kResident) {
    load_units<T, N>(kept, x, threadIdx.x, units);
    visit_units<T, N>(kept, threadIdx.x, units, accumulate);
  } else {
    for_row_units<T, N>(x, threadIdx.x, units, accumulate);
  }

  acc = segment_reduce<Op>(acc, static_cast<int>(blockDim.x), smem);
  const RowQuant q = Mode::finish(acc, p, r, valid && threadIdx.x == 0);
  if (!valid) return;

  with_divider(q.s, [&](auto divide) {
    const auto quantise = [&](int, int u, const float (&f)[N]) {
      float v[N];
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = Q::finish(divide(f[i]), q);
      Q::template store<N>(o + static_cast<int64_t>(u) * N, v);
    };
    if constexpr (kResident) {
      visit_units<T, N>(kept, threadIdx.x, units, quantise);
    } else {
      for_row_units<T, N>(x, threadIdx.x, units, quantise);
    }
  });
}

// ---------------------------------------------------------------------------
// Host side: parameters, launch context, launchers.
// ---------------------------------------------------------------------------

#if !STABLEOPS_DEVICE_PASS
// Whether the rows can use the vector path (see vector_path).
inline bool vector_rows(
    const QuantRows& rows,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& result) {
  return vector_path(
      input.const_data_ptr(), rows.in_row_stride,
      static_cast<int64_t>(input.element_size()), result.const_data_ptr(),
      rows.out_row_stride, rows.hidden, rows.num_rows);
}

// RowsParams with one scale for every row (callers refine the groups).
inline RowsParams rows_params(
    const QuantRows& rows,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& result,
    const float* scale) {
  RowsParams p{};
  p.in = input.const_data_ptr();
  p.out = static_cast<uint8_t*>(result.mutable_data_ptr());
  p.in_stride = rows.in_row_stride;
  p.out_stride = rows.out_row_stride;
  p.num_rows = rows.num_rows;
  p.hidden = static_cast<int32_t>(rows.hidden);
  p.scale = scale;
  p.group_m = rows.num_rows > 0 ? rows.num_rows : 1;
  p.group_n = p.hidden;
  return p;
}

// DynParams of the rows, scale row stride `scale_stride`.
inline DynParams dyn_params(
    const QuantRows& rows,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& result,
    float* scale,
    int64_t scale_stride) {
  DynParams p{};
  p.in = input.const_data_ptr();
  p.out = static_cast<uint8_t*>(result.mutable_data_ptr());
  p.in_stride = rows.in_row_stride;
  p.out_stride = rows.out_row_stride;
  p.num_rows = rows.num_rows;
  p.scale = scale;
  p.scale_stride = scale_stride;
  return p;
}

// The device of `t` made current, and its current stream.
struct GpuLaunchContext {
  explicit GpuLaunchContext(const torch::stable::Tensor& t)
      : device(t.get_device_index()),
        guard(device),
        stream(static_cast<cudaStream_t>(current_gpu_stream(device))) {}
  int32_t device;
  torch::stable::accelerator::DeviceGuard guard;
  cudaStream_t stream;
};
#endif  // !STABLEOPS_DEVICE_PASS

// rows_kernel over p's rows (p.units set from the path); small tensors on
// the vector path (one unit per thread in kSmallBlock-thread blocks needs at
// most kSmallMaxBlocks blocks) take small_rows_kernel.
template <typename T, class Q>
void launch_rows(RowsParams p, bool vec, cudaStream_t stream, const char* op) {
  p.units = vec ? p.hidden / kVec : p.hidden;
  const int64_t row_blocks = launch_shape::small_blocks_per_row(p.units);
  if (vec && p.num_rows * row_blocks <= kSmallMaxBlocks) {
    const dim3 grid(static_cast<unsigned>(row_blocks),
                    static_cast<unsigned>(p.num_rows));
    STABLEOPS_GPU_CHECK(gpu_launch(small_rows_kernel<T, Q>, grid, kSmallBlock, 0, stream, p));
    return;
  }
  const dim3 block = block_shape(p.units);
  const dim3 grid(grid_blocks(op, p.num_rows, block.y));
  if (vec) {
    STABLEOPS_GPU_CHECK(gpu_launch(rows_kernel<T, kVec, Q>, grid, block, 0, stream, p));
  } else {
    STABLEOPS_GPU_CHECK(gpu_launch(rows_kernel<T, 1, Q>, grid, block, 0, stream, p));
  }
}

// dynamic_rows_kernel over p's rows of `hidden` elements. A row's
// reduction stays in one block; when the rows give fewer than
// kMinGridBlocks blocks, a row gets up to 256 threads (one unit each where
// the row allows) instead of kUnits units per thread: more SMs and less
// serial work per thread for a few tokens.
template <typename T, int N, class Mode>
void launch_dynamic_path(const DynParams& p, cudaStream_t stream, const char* op) {
  dim3 block = block_shape(p.units);
  if (grid_blocks(op, p.num_rows, block.y) < kMinGridBlocks) {
    block = block_shape(p.units, /*per_thread=*/1);
  }
  const dim3 grid(grid_blocks(op, p.num_rows, block.y));
  if (p.units <= static_cast<int64_t>(block.x) * kUnits) {
    STABLEOPS_GPU_CHECK(gpu_launch(
        dynamic_rows_kernel<T, N, Mode, true>,
        grid, block, 0, stream, p));
  } else {
    STABLEOPS_GPU_CHECK(gpu_launch(
        dynamic_rows_kernel<T, N, Mode, false>,
        grid, block, 0, stream, p));
  }
}

template <typename T, class Mode>
void launch_dynamic(DynParams p, int64_t hidden, bool vec, cudaStream_t stream, const char* op) {
  p.units = static_cast<int32_t>(vec ? hidden / kVec : hidden);
  if (vec) {
    launch_dynamic_path<T, kVec, Mode>(p, stream, op);
  } else {
    launch_dynamic_path<T, 1, Mode>(p, stream, op);
  }
}

// The GPU kernels index columns with 32-bit integers.
inline void check_hidden_fits(const char* op, int64_t hidden) {
  STD_TORCH_CHECK(
      hidden <= 0x7fffffff - kBlockThreads * kUnits * kVec, op, ": hidden size ",
      hidden, " exceeds the GPU kernel's 32-bit column index");
}

}  // namespace quant_gpu
}  // namespace stableops
