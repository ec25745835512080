// CUDA/ROCm kernels of the RMSNorm family: stableops::rms_norm,
// rms_norm_weightless, fused_add_rms_norm and fused_add_rms_norm_weightless
// (one source for both platforms: gpu_compat.h maps the runtime names when
// compiled with hipcc). Validation is shared with the CPU kernels and the
// fakes (rms_norm_check.h).
//
// Per row of `hidden` elements (statistics in float32, as vLLM / HF):
//   fused:  z = round(x + residual), stored to residual; x := z
//   inv   = rsqrt(sum(x^2) / hidden + epsilon)
//   y     = round(x * inv)                 (rounded to the dtype)
//   out   = round(y * weight)              (weightless: out = y)
//
// Design (memory-bound: 2 or 4 bytes per element move, plus the weight, which
// stays in L1/L2):
//   * Vector path (hidden a multiple of 16 bytes, every pointer 16-byte
//     aligned, row strides multiples of 16 bytes): a thread owns K 16-byte
//     packs (gpu::Pack: 8 fp16/bf16 or 4 fp32) of a row, issues all their
//     loads (and the residual's and the weight's) before any math, keeps the
//     row in registers, and writes each output pack once: one pass over
//     global memory. K in {2, 4, 8} is picked per hidden size so a block has
//     at most 256 threads (a multiple of 64) and each thread several loads
//     in flight; up to 2048 packs (16384 fp16/bf16, 8192 fp32 elements).
//       - one row per block (block reduction: warp shuffles, then one
//         __syncthreads() through shared memory; csrc/core/gpu_reduce.h);
//       - rows of <= 64 packs: several rows per block, a power-of-two group
//         of <= 32 threads per row reducing with shuffles alone (a group never
//         straddles a warp of 32 or a wavefront of 64).
//   * Streaming path (anything else: odd hidden sizes or misaligned
//     pointers/strides through one element per access, and rows too long for
//     registers through 16-byte packs): one row per block of up to 1024
//     threads, 4 accesses in flight per thread, two passes over the row (the
//     second one mostly hits L2).
//   * Row offsets are 64-bit (row * stride), so T * hidden may exceed 2^31.
//   * Exactly one kernel launch on the current stream of the tensors' device,
//     no allocation, no host synchronisation: CUDA-graph capturable.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/gpu_reduce.h"
#include "csrc/core/gpu_vec.h"
#include "csrc/gpu_compat.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/norm/rms_norm_check.h"
#include "csrc/ops.h"
#endif

namespace stableops {
namespace rms_norm_gpu {

using gpu::Pack;

// Vector path, registers: blocks of at most this many threads, a multiple of
// 64 (AMD's wavefront).
constexpr int kCachedMaxThreads = 256;
constexpr int kCachedMaxPacksPerThread = 8;
// Blocks of kCachedMaxThreads that must fit on one SM (CUDA's register
// budget; HIP ignores it): the K packs of x, residual and weight a thread
// holds need 12K registers, and nvcc left to itself kept the bfloat16 rows
// as float32 (51 registers at K = 2, 126 at K = 4 fused with a weight: 4
// and 2 blocks of 256 threads per SM, the bf16 norms 72-82% of copy where
// fp16 reached 95%). K = 2: 6 blocks (<= 40 registers), K = 4: 4 (<= 64),
// K = 8: 2 (<= 128). (Those counts are from before gpu::Pack unpacked
// bf16 with a shift and a mask; with it none of these kernels spills.)
template <int K>
constexpr int kCachedMinBlocks = K <= 2 ? 6 : (K <= 4 ? 4 : 2);
// Rows of at most this many packs: several rows per block.
constexpr int kGroupMaxPacks = 64;
// Streaming path.
constexpr int kStreamMaxThreads = 1024;
constexpr int kStreamUnroll = 4;

// One memory access: a 16-byte pack or, on the streaming path's scalar
// variant, one element.
template <typename T>
struct VecAccess {
  using raw_t = uint4;
  static constexpr int kElems = Pack<T>::kElems;
  __device__ __forceinline__ static raw_t zero() {
    return make_uint4(0u, 0u, 0u, 0u);
  }
  __device__ __forceinline__ static void to_float(const raw_t& v, float (&f)[kElems]) {
    Pack<T>::to_float(v, f);
  }
  __device__ __forceinline__ static raw_t from_float(const float (&f)[kElems]) {
    return Pack<T>::from_float(f);
  }
};

template <typename T>
struct ScalarAccess;

template <>
struct ScalarAccess<float> {
  using raw_t = float;
  static constexpr int kElems = 1;
  __device__ __forceinline__ static raw_t zero() {
    return 0.0f;
  }
  __device__ __forceinline__ static void to_float(const raw_t& v, float (&f)[1]) {
    f[0] = v;
  }
  __device__ __forceinline__ static raw_t from_float(const float (&f)[1]) {
    return f[0];
  }
};

template <>
struct ScalarAccess<stableops_half> {
  using raw_t = stableops_half;
  static constexpr int kElems = 1;
  __device__ __forceinline__ static raw_t zero() {
    return __float2half_rn(0.0f);
  }
  __device__ __forceinline__ static void to_float(const raw_t& v, float (&f)[1]) {
    f[0] = __half2float(v);
  }
  __device__ __forceinline__ static raw_t from_float(const float (&f)[1]) {
    return __float2half_rn(f[0]);
  }
};

template <>
struct ScalarAccess<stableops_bf16> {
  using raw_t = stableops_bf16;
  static constexpr int kElems = 1;
  __device__ __forceinline__ static raw_t zero() {
    return __float2bfloat16(0.0f);
  }
  __device__ __forceinline__ static void to_float(const raw_t& v, float (&f)[1]) {
    f[0] = __bfloat162float(v);
  }
  // Round to nearest even (CUDA and HIP alike).
  __device__ __forceinline__ static raw_t from_float(const float (&f)[1]) {
    return __float2bfloat16(f[0]);
  }
};

struct NormParams {
  void* out; // rms_norm: result; fused: input (written in place)
  const void* in; // rms_norm: input; fused: input
  void* residual; // fused only
  const void* weight; // nullptr: weightless
  int64_t out_stride; // row strides in elements
  int64_t in_stride;
  int64_t res_stride;
  int64_t rows;
  uint32_t units; // accesses per row: packs (vector) or elements (scalar)
  float hidden; // elements per row, for the mean
  float epsilon;
};

// First look at one access of a row: the fused ops add the residual, round
// the sum to the dtype and return it (the caller stores it to residual); the
// squares of the (rounded) values are added to `acc`.
template <class A, bool kFused>
__device__ __forceinline__ typename A::raw_t accumulate(
    typename A::raw_t x,
    const typename A::raw_t& r,
    float& acc) {
  float f[A::kElems];
  A::to_float(x, f);
  if constexpr (kFused) {
    float g[A::kElems];
    A::to_float(r, g);
#pragma unroll
    for (int e = 0; e < A::kElems; ++e) {
      f[e] += g[e];
    }
    x = A::from_float(f);
    A::to_float(x, f);
  }
#pragma unroll
  for (int e = 0; e < A::kElems; ++e) {
    acc = fmaf(f[e], f[e], acc);
  }
  return x;
}

// round(round(x * inv) * weight), or round(x * inv) without a weight.
template <class A, bool kWeight>
__device__ __forceinline__ typename A::raw_t normalise(
    const typename A::raw_t& x,
    const typename A::raw_t& w,
    float inv) {
  float f[A::kElems];
  A::to_float(x, f);
#pragma unroll
  for (int e = 0; e < A::kElems; ++e) {
    f[e] *= inv;
  }
  typename A::raw_t y = A::from_float(f);
  if constexpr (kWeight) {
    float g[A::kElems];
    A::to_float(y, f);
    A::to_float(w, g);
#pragma unroll
    for (int e = 0; e < A::kElems; ++e) {
      f[e] *= g[e];
    }
    y = A::from_float(f);
  }
  return y;
}

// The start of row `row` of a tensor of element type T, as accesses of type
// R (a pack or an element); 64-bit offset.
template <typename R, typename T, typename V>
__device__ __forceinline__ R* row_ptr_of(V* base, int64_t row, int64_t stride) {
  using Elem = std::conditional_t<std::is_const_v<R>, const T, T>;
  return reinterpret_cast<R*>(static_cast<Elem*>(base) + row * stride);
}

__device__ __forceinline__ float inv_rms(float sum_squares, const NormParams& p) {
  return rsqrtf(sum_squares / p.hidden + p.epsilon);
}

// Vector path, row in registers. blockDim = (threads per row, rows per
// block): either (a multiple of 64, 1), reduced over the block, or (a power
// of two <= 32, several), reduced over lane groups. Thread x of a row owns
// packs x, x + blockDim.x, ... (K of them).
template <typename T, int K, bool kWeight, bool kFused>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kCachedMaxThreads, kCachedMinBlocks<K>)
    rms_norm_cached_kernel(const NormParams p) {
  pdl_enter();
  using A = VecAccess<T>;
  using raw_t = typename A::raw_t;
  __shared__ float scratch[gpu::block_sum_scratch(kCachedMaxThreads)];

  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = row < p.rows;
  // Idle rows of a last partial block keep row 0's addresses, never used.
  const int64_t r = active ? row : 0;
  const raw_t* in = row_ptr_of<const raw_t, T>(p.in, r, p.in_stride);
  raw_t* res = kFused ? row_ptr_of<raw_t, T>(p.residual, r, p.res_stride) : nullptr;
  raw_t* out = row_ptr_of<raw_t, T>(p.out, r, p.out_stride);
  const raw_t* w = static_cast<const raw_t*>(p.weight);

  // Every load of the row is issued before any math. The weight (the same
  // for every row: in L1/L2) is loaded after the row's sum of squares, so
  // its registers are not held with the residual's.
  raw_t x[K];
  raw_t rs[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const uint32_t k = threadIdx.x + j * blockDim.x;
    x[j] = A::zero();
    rs[j] = A::zero();
    if (active && k < p.units) {
      if constexpr (kFused) {
        x[j] = in[k]; // written by this kernel: no read-only cache
        rs[j] = res[k];
      } else {
        x[j] = STABLEOPS_LDG(in + k);
      }
    }
  }

  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    x[j] = accumulate<A, kFused>(x[j], rs[j], acc);
    const uint32_t k = threadIdx.x + j * blockDim.x;
    if (kFused && active && k < p.units) {
      res[k] = x[j];
    }
  }
  // The weight's loads are issued before the reduction and arrive during
  // it; its registers replace rs's, so the peak (x and the weight, at the
  // stores) is no higher.
  raw_t ws[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const uint32_t k = threadIdx.x + j * blockDim.x;
    ws[j] = A::zero();
    if (kWeight && active && k < p.units) {
      ws[j] = STABLEOPS_LDG(w + k);
    }
  }
  // Uniform over the block: blockDim.y == 1 means one row per block.
  const float total = blockDim.y == 1 ? gpu::block_sum(acc, scratch)
                                      : gpu::group_sum(acc, static_cast<int>(blockDim.x));
  const float inv = inv_rms(total, p);

#pragma unroll
  for (int j = 0; j < K; ++j) {
    const uint32_t k = threadIdx.x + j * blockDim.x;
    if (active && k < p.units) {
      out[k] = normalise<A, kWeight>(x[j], ws[j], inv);
    }
  }
}

// Streaming path: one row per block (blockDim.x a multiple of 64), two passes
// over the row with kStreamUnroll accesses in flight per thread.
template <class A, typename T, bool kWeight, bool kFused>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kStreamMaxThreads, 1)
    rms_norm_streaming_kernel(const NormParams p) {
  pdl_enter();
  using raw_t = typename A::raw_t;
  __shared__ float scratch[gpu::block_sum_scratch(kStreamMaxThreads)];

  const int64_t row = blockIdx.x;
  const raw_t* in = row_ptr_of<const raw_t, T>(p.in, row, p.in_stride);
  raw_t* res = kFused ? row_ptr_of<raw_t, T>(p.residual, row, p.res_stride) : nullptr;
  raw_t* out = row_ptr_of<raw_t, T>(p.out, row, p.out_stride);
  const raw_t* w = static_cast<const raw_t*>(p.weight);
  const uint32_t step = blockDim.x;

  // Pass 1: the sum of squares (fused: of the stored residual sums).
  float acc = 0.0f;
  for (uint32_t base = threadIdx.x; base < p.units; base += kStreamUnroll * step) {
    raw_t x[kStreamUnroll];
    raw_t rs[kStreamUnroll];
#pragma unroll
    for (int u = 0; u < kStreamUnroll; ++u) {
      const uint32_t k = base + u * step;
      x[u] = A::zero();
      rs[u] = A::zero();
      if (k < p.units) {
        if constexpr (kFused) {
          x[u] = in[k];
          rs[u] = res[k];
        } else {
          x[u] = STABLEOPS_LDG(in + k);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kStreamUnroll; ++u) {
      const uint32_t k = base + u * step;
      const raw_t z = accumulate<A, kFused>(x[u], rs[u], acc);
      if (kFused && k < p.units) {
        res[k] = z;
      }
    }
  }
  const float inv = inv_rms(gpu::block_sum(acc, scratch), p);

  // Pass 2: normalise. The fused ops read back the sums this same thread
  // stored to residual in pass 1 (plain loads: written by this kernel).
  for (uint32_t base = threadIdx.x; base < p.units; base += kStreamUnroll * step) {
    raw_t x[kStreamUnroll];
    raw_t ws[kStreamUnroll];
#pragma unroll
    for (int u = 0; u < kStreamUnroll; ++u) {
      const uint32_t k = base + u * step;
      x[u] = A::zero();
      ws[u] = A::zero();
      if (k < p.units) {
        if constexpr (kFused) {
          x[u] = res[k];
        } else {
          x[u] = STABLEOPS_LDG(in + k);
        }
        if constexpr (kWeight) {
          ws[u] = STABLEOPS_LDG(w + k);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kStreamUnroll; ++u) {
      const uint32_t k = base + u * step;
      if (k < p.units) {
        out[k] = normalise<A, kWeight>(x[u], ws[u], inv);
      }
    }
  }
}

uint32_t round_up(uint32_t v, uint32_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

template <typename T, int K, bool kWeight, bool kFused>
void launch_cached(const NormParams& p, dim3 grid, dim3 block, cudaStream_t stream) {
  STABLEOPS_GPU_CHECK(gpu_launch(
      rms_norm_cached_kernel<T, K, kWeight, kFused>,
      grid, block, 0, stream, p));
}

// Picks the path and the launch shape (see the file comment) for a row of
// `hidden` elements.
template <typename T, bool kWeight, bool kFused>
void launch(NormParams p, uint32_t hidden, bool vec, cudaStream_t stream) {
  constexpr uint32_t N = Pack<T>::kElems;
  const uint32_t packs = hidden / N;
  const auto rows = static_cast<uint32_t>(p.rows);
  if (vec && packs <= kCachedMaxThreads * kCachedMaxPacksPerThread) {
    p.units = packs;
    if (packs <= kGroupMaxPacks) {
      // Several rows per block: 2 packs per thread, a power-of-two group of
      // <= 32 threads per row.
      uint32_t tx = 1;
      while (tx * 2 < packs) {
        tx *= 2;
      }
      const uint32_t ty = kCachedMaxThreads / tx;
      launch_cached<T, 2, kWeight, kFused>(
          p, dim3(ceil_div(rows, ty)), dim3(tx, ty), stream);
    } else {
      // One row per block of <= 256 threads, K packs per thread.
      const int k = packs <= 512 ? 2 : (packs <= 1024 ? 4 : 8);
      const dim3 block(round_up(ceil_div(packs, k), 64));
      const dim3 grid(rows);
      if (k == 2) {
        launch_cached<T, 2, kWeight, kFused>(p, grid, block, stream);
      } else if (k == 4) {
        launch_cached<T, 4, kWeight, kFused>(p, grid, block, stream);
      } else {
        launch_cached<T, 8, kWeight, kFused>(p, grid, block, stream);
      }
    }
  } else {
    p.units = vec ? packs : hidden;
    const dim3 block(std::min<uint32_t>(
        kStreamMaxThreads, round_up(ceil_div(p.units, kStreamUnroll), 64)));
    if (vec) {
      STABLEOPS_GPU_CHECK(gpu_launch(
          rms_norm_streaming_kernel<VecAccess<T>, T, kWeight, kFused>,
          dim3(rows), block, 0, stream, p));
    } else {
      STABLEOPS_GPU_CHECK(gpu_launch(
          rms_norm_streaming_kernel<ScalarAccess<T>, T, kWeight, kFused>,
          dim3(rows), block, 0, stream, p));
    }
  }
}

template <typename T>
void launch_dtype(
    const NormParams& p,
    uint32_t hidden,
    bool fused,
    bool weighted,
    bool vec,
    cudaStream_t stream) {
  if (fused) {
    weighted ? launch<T, true, true>(p, hidden, vec, stream) : launch<T, false, true>(p, hidden, vec, stream);
  } else {
    weighted ? launch<T, true, false>(p, hidden, vec, stream) : launch<T, false, false>(p, hidden, vec, stream);
  }
}

// Every kernel instantiation is reached from here, in every compiler pass.
// Its only caller is run() below, host code the device passes skip; a named
// namespace gives it external linkage, so those passes still compile it (and
// instantiate the kernels) instead of dropping it as unused.
void launch_for(const NormParams& p, uint32_t hidden, GpuFloat dtype, bool fused, bool weighted,
                bool vec, cudaStream_t stream) {
  with_gpu_float(dtype, [&](auto t) {
    launch_dtype<decltype(t)>(p, hidden, fused, weighted, vec, stream);
  });
}

}  // namespace rms_norm_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace rms_norm_gpu;  // NOLINT: this file's own kernels
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

constexpr int kVecBytes = 16;

bool aligned(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % kVecBytes == 0;
}

// Everything after validation, for all four ops: one launch.
void run(const RmsNormProblem& problem) {
  if (problem.rows == 0 || problem.hidden == 0) {
    return; // nothing to launch
  }
  // Grid and pack indices are 32-bit (a grid's x dimension allows 2^31 - 1).
  STD_TORCH_CHECK(
      problem.rows <= INT32_MAX,
      problem.op,
      ": ",
      problem.rows,
      " rows exceed the GPU kernel's limit of 2147483647");
  STD_TORCH_CHECK(
      problem.hidden <= INT32_MAX,
      problem.op,
      ": hidden_size ",
      problem.hidden,
      " exceeds the GPU kernel's limit of 2147483647");
  NormParams p{};
  p.out = problem.out;
  p.in = problem.in;
  p.residual = problem.fused ? problem.residual : nullptr;
  p.weight = problem.weighted ? problem.weight : nullptr;
  p.out_stride = problem.out_stride;
  p.in_stride = problem.in_stride;
  p.res_stride = problem.fused ? problem.res_stride : 0;
  p.rows = problem.rows;
  p.hidden = static_cast<float>(problem.hidden);
  p.epsilon = problem.epsilon;
  const auto hidden = static_cast<uint32_t>(problem.hidden);

  // The 16-byte vector path needs every row of every operand 16-byte aligned.
  const int64_t pack = problem.dtype == ScalarType::Float ? 4 : 8;
  const bool vec = problem.hidden % pack == 0 && aligned(p.out) && aligned(p.in) &&
      (!problem.fused || aligned(p.residual)) && (!problem.weighted || aligned(p.weight)) &&
      p.out_stride % pack == 0 && p.in_stride % pack == 0 && p.res_stride % pack == 0;

  const torch::stable::accelerator::DeviceGuard device_guard(problem.device_index);
  const cudaStream_t stream = static_cast<cudaStream_t>(current_gpu_stream(problem.device_index));
  launch_for(p, hidden, gpu_float_of(problem.op, problem.dtype), problem.fused, problem.weighted, vec, stream);
}

} // namespace

void rms_norm_cuda(
    Tensor& result,
    const Tensor& input,
    const Tensor& weight,
    double epsilon) {
  run(check_rms_norm(result, input, &weight, epsilon, torch::headeronly::DeviceType::CUDA));
}

void rms_norm_weightless_cuda(Tensor& result, const Tensor& input, double epsilon) {
  run(check_rms_norm(result, input, nullptr, epsilon, torch::headeronly::DeviceType::CUDA));
}

void fused_add_rms_norm_cuda(
    Tensor& input,
    Tensor& residual,
    const Tensor& weight,
    double epsilon) {
  run(check_fused_add_rms_norm(
      input, residual, &weight, epsilon, torch::headeronly::DeviceType::CUDA));
}

void fused_add_rms_norm_weightless_cuda(
    Tensor& input,
    Tensor& residual,
    double epsilon) {
  run(check_fused_add_rms_norm(
      input, residual, nullptr, epsilon, torch::headeronly::DeviceType::CUDA));
}

#endif  // !STABLEOPS_DEVICE_PASS

} // namespace stableops
