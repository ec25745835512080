// CUDA/ROCm kernels of the activation ops (one source for both: gpu_compat.h
// maps the runtime names when compiled as HIP). Contract: activation_check.h,
// shared with the CPU kernels; the ops: activation_functors.h.
//
// Design (memory-bound: 3 * T * d elements move for a gated op, 2 * T * d
// for an elementwise one):
//   * ONE templated kernel for every op, dtype and memory layout; the op is a
//     functor (float32 math: fast exp and reciprocal of known accuracy, see
//     GpuMath).
//   * Vector path: a thread moves 16-byte packs (gpu::Pack: 4 fp32 or 8
//     fp16/bf16): for each of its U output packs it issues the loads of both
//     input packs before any math (U = 2 for gated ops: 4 loads of 16 bytes
//     in flight per thread; U = 4 for elementwise ones), then converts,
//     computes and stores with 16-byte stores. Taken when the data pointers,
//     the row strides and d are multiples of the pack; otherwise the scalar
//     path runs the same code one element at a time (any d, any row stride,
//     any alignment).
//   * Tensors up to 8192 blocks of 64 packs (4M 16-bit outputs: 1024 tokens
//     of 4096; 2M float32 ones) on the vector path take a lean kernel,
//     small_activation_kernel: one pack per thread, 32-bit offsets, no loop.
//   * Otherwise (larger tensors, and the scalar path at any size), the
//     general kernel with core/launch_shape.h's spread_rows:
//     a block is at most 256 threads (a multiple of the 64-wide AMD
//     wavefront), bx threads along a row times by rows, bx the smallest
//     power of two that covers the row's packs in U steps (at most 256), so
//     short rows share a block. grid.x covers the rows, grid.y the chunks of
//     bx * P accesses of a row (a loop when there are more than 65535), P =
//     U per thread. On the scalar path, when that gives fewer than 264
//     blocks, blocks narrow to 64 threads, then P drops to 1, so a few long
//     rows still spread over the SMs (the vector path gets here with
//     hundreds of blocks). No shared memory, no reduction, no synchronisation:
//     warp/wavefront size does not matter. 64-bit element offsets (T * d
//     may exceed 2^31).
//   * One launch on the current stream of the tensors' device, no allocation,
//     no host synchronisation: CUDA-graph capturable.
#include <cstdint>

#include <torch/headeronly/util/Exception.h>

#include "csrc/activation/activation_functors.h"
#include "csrc/core/gpu_vec.h"
#include "csrc/core/launch_shape.h"
#include "csrc/gpu_compat.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/activation/activation_check.h"
#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#endif

namespace stableops {
namespace activation_gpu {

using namespace activation;
using gpu::Pack;

// The op math on the GPU: gpu_compat.h's fast forms of known accuracy (the
// accurate expf and IEEE division made the ops compute-bound on H200):
// e^x within 2 + 1.2|x| ulp, a / b as a * rcp(b) within 2 ulp (inf and NaN
// as IEEE division gives them: rcp keeps the subnormal 1 / b of b > 2^126
// that __fdividef would flush, so silu(-88) * inf stays -inf). In the
// sigmoid a relative error of e^-z reaches v * sigmoid(z) scaled by
// sigmoid(-z) < 1; erfc is activation_functors.h's erfc_cheb_abs over these
// (1 / d there with the one-instruction rcp.approx.ftz: d >= 1).
// tests/test_activation.py holds float32 results to 1e-5 relative of a
// float64 reference and checks inf/NaN propagation.
struct GpuMath {
  static __device__ __forceinline__ float exp(float x) {
    return stableops_exp_approx(x);
  }
  static __device__ __forceinline__ float div(float a, float b) {
    return a * stableops_rcp_approx(b);
  }
  // 1 / d for d >= 1 (erfc's t): no subnormal input, and a subnormal result
  // (d > 2^126) flushing to 0 gives erfc 0, its value there.
  static __device__ __forceinline__ float inv_ge1(float d) {
    return stableops_rcp_approx_ftz(d);
  }
};

constexpr int kBlockThreads = 256;
// Residency asked of ptxas (caps registers at 48 per thread; HIP ignores
// it): 5 blocks of 256 threads, 1280 threads per SM, each with 64 bytes of
// loads in flight. H200, T = 4096 and 16384, bf16/fp16 (2026-12-04): against
// 4 blocks (<= 64 registers) gelu_and_mul rose from 82-90% to 89-98% of copy
// and swigluoai_and_mul from 86-95% to 89-99%, the rest equal or better; 6
// blocks (<= 40) was no better, 8 (<= 32) spilled.
constexpr int kMinBlocksPerSm = 5;
using launch_shape::kMinGridBlocks;

// Scalar element <-> float32.
__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(stableops_half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(stableops_bf16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ stableops_half from_float<stableops_half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ stableops_bf16 from_float<stableops_bf16>(float v) {
  return __float2bfloat16(v);
}

// One memory access of the kernel: a 16-byte pack or one element.
template <typename T, bool kVector>
struct Access;

template <typename T>
struct Access<T, true> {
  using Raw = uint4;
  static constexpr int kElems = Pack<T>::kElems;
  __device__ __forceinline__ static Raw load(const T* p) {
    return STABLEOPS_LDG(reinterpret_cast<const uint4*>(p));
  }
  __device__ __forceinline__ static void to_floats(const Raw& r, float (&f)[kElems]) {
    Pack<T>::to_float(r, f);
  }
  __device__ __forceinline__ static void store(T* p, const float (&f)[kElems]) {
    gpu::store16(p, Pack<T>::from_float(f));
  }
};

template <typename T>
struct Access<T, false> {
  using Raw = T;
  static constexpr int kElems = 1;
  __device__ __forceinline__ static Raw load(const T* p) {
    return STABLEOPS_LDG(p);
  }
  __device__ __forceinline__ static void to_floats(const Raw& r, float (&f)[kElems]) {
    f[0] = to_float(r);
  }
  __device__ __forceinline__ static void store(T* p, const float (&f)[kElems]) {
    *p = from_float<T>(f[0]);
  }
};

struct ActParams {
  const void* in;
  void* out;
  int64_t rows;
  int64_t d; // output elements per row
  int64_t vecs; // accesses per output row: d / kElems
  int64_t in_stride; // elements between rows
  int64_t out_stride;
  int32_t per_thread; // scalar path: accesses per thread per chunk, 1 .. U
};

// Output packs handled by one thread per chunk: enough loads in flight.
template <class Op>
constexpr int packs_per_thread() {
  return Op::kInfo.layout == Layout::kElementwise ? 4 : 2;
}

// The input access(es) of output access k of a row starting at `in` (d
// output elements per row): ra, and rb for a gated op.
template <class A, class Op, typename T, typename I>
__device__ __forceinline__ void load_access(const T* in, I k, I d, typename A::Raw& ra,
                                            typename A::Raw& rb) {
  constexpr int N = A::kElems;
  constexpr Layout kLayout = Op::kInfo.layout;
  if constexpr (kLayout == Layout::kSplit) {
    ra = A::load(in + k * N);
    rb = A::load(in + d + k * N);
  } else if constexpr (kLayout == Layout::kInterleaved) {
    ra = A::load(in + 2 * k * N);
    rb = A::load(in + 2 * k * N + N);
  } else {
    ra = A::load(in + k * N);
  }
}

// The op on one access's values: fo from ra (and rb).
template <class A, class Op>
__device__ __forceinline__ void apply_op(const Op& op, const typename A::Raw& ra,
                                         const typename A::Raw& rb,
                                         float (&fo)[A::kElems]) {
  constexpr int N = A::kElems;
  constexpr Layout kLayout = Op::kInfo.layout;
  float fa[N];
  A::to_floats(ra, fa);
  if constexpr (kLayout != Layout::kElementwise) {
    float fb[N];
    A::to_floats(rb, fb);
    if constexpr (kLayout == Layout::kSplit) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        fo[i] = op(fa[i], fb[i]);
      }
    } else {
      // Interleaved: the 2N inputs [fa, fb] are (gate, up) pairs.
      float pairs[2 * N];
#pragma unroll
      for (int i = 0; i < N; ++i) {
        pairs[i] = fa[i];
        pairs[N + i] = fb[i];
      }
#pragma unroll
      for (int i = 0; i < N; ++i) {
        fo[i] = op(pairs[2 * i], pairs[2 * i + 1]);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      fo[i] = op(fa[i]);
    }
  }
}

// blockDim = (bx, by), P = U (vector path) or p.per_thread (scalar path):
// thread (x, y) of block (bx_i, chunk) handles row bx_i * by + y, output
// accesses chunk * bx * P + x + u * bx (u < P), and the same of the
// following chunks grid.y apart.
template <typename T, bool kVector, class Op>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, kMinBlocksPerSm)
    activation_kernel(const ActParams p, const Op op) {
  pdl_enter();
  using A = Access<T, kVector>;
  constexpr int N = A::kElems;
  constexpr int U = packs_per_thread<Op>();

  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= p.rows) return;
  const T* in = static_cast<const T*>(p.in) + row * p.in_stride;
  T* out = static_cast<T*>(p.out) + row * p.out_stride;
  // The vector path keeps U (the launch gives it the widest shape): it
  // reaches this kernel past 8192 blocks of 64 packs, where that shape
  // already has hundreds of blocks, or with offsets beyond 32 bits.
  const int per = kVector ? U : p.per_thread;
  const int64_t chunk = static_cast<int64_t>(blockDim.x) * per;

  for (int64_t first = static_cast<int64_t>(blockIdx.y) * chunk + threadIdx.x;
       first < p.vecs;
       first += static_cast<int64_t>(gridDim.y) * chunk) {
    typename A::Raw ra[U];
    typename A::Raw rb[U];
    // All loads first, so they are in flight together.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t k = first + static_cast<int64_t>(u) * blockDim.x;
      if (u < per && k < p.vecs) {
        load_access<A, Op>(in, k, p.d, ra[u], rb[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t k = first + static_cast<int64_t>(u) * blockDim.x;
      if (u < per && k < p.vecs) {
        float fo[N];
        apply_op<A, Op>(op, ra[u], rb[u], fo);
        A::store(out + k * N, fo);
      }
    }
  }
}

// The small-tensor kernel: a fixed block of kSmallBlock threads, one
// 16-byte output pack per thread, grid (packs / kSmallBlock, rows), 32-bit
// offsets, no loop. activation_kernel's general prologue (64-bit row and
// chunk arithmetic, blockDim reads, the chunk loop) put about 0.3 us of
// dependent steps before the first load: H200, one token of 4096, kernel
// time 1.27 -> 1.00 us for fatrelu_and_mul, 1.57 -> 1.22 us for
// gelu_and_mul. Up to kSmallMaxBlocks blocks it is also the faster of the
// two at T = 64 .. 1024 (gelu_and_mul T = 256, d = 4096: 3.45 against
// 4.38 us); above it, the general kernel's several loads in flight per
// thread win (gelu_new at 14336 blocks: 10.5 against 10.1 us).
using launch_shape::kSmallBlock;
constexpr int64_t kSmallMaxBlocks = 8192;
struct SmallParams {
  const void* in;
  void* out;
  int32_t vecs;  // packs per output row
  int32_t d;
  int32_t in_stride;  // elements between rows
  int32_t out_stride;
};

template <typename T, class Op>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kSmallBlock, 1)
    small_activation_kernel(const SmallParams p, const Op op) {
  pdl_enter();
  using A = Access<T, true>;
  constexpr int N = A::kElems;
  const int k = static_cast<int>(blockIdx.x) * kSmallBlock + static_cast<int>(threadIdx.x);
  if (k >= p.vecs) return;
  const int row = static_cast<int>(blockIdx.y);
  typename A::Raw ra;
  typename A::Raw rb;
  load_access<A, Op>(static_cast<const T*>(p.in) + row * p.in_stride, k, p.d, ra, rb);
  float fo[N];
  apply_op<A, Op>(op, ra, rb, fo);
  A::store(static_cast<T*>(p.out) + row * p.out_stride + k * N, fo);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The validated shape (ActivationDims' numbers, without torch).
struct ActShape {
  int64_t rows;
  int64_t d;
  int64_t in_stride;
  int64_t out_stride;
};

template <typename T, class Op>
void launch(const Op& op, const ActShape& dims, const void* in, void* out, cudaStream_t stream) {
  constexpr int64_t kPack = Pack<T>::kElems;
  constexpr int64_t U = packs_per_thread<Op>();
  ActParams p;
  p.in = in;
  p.out = out;
  p.rows = dims.rows;
  p.d = dims.d;
  p.in_stride = dims.in_stride;
  p.out_stride = dims.out_stride;
  const bool vector =
      dims.d % kPack == 0 && aligned16(p.in) && aligned16(p.out) &&
      (dims.rows == 1 ||
       (dims.in_stride % kPack == 0 && dims.out_stride % kPack == 0));
  p.vecs = vector ? dims.d / kPack : dims.d;

  // Small tensors: the lean kernel, where one pack per thread in blocks of
  // kSmallBlock threads needs at most kSmallMaxBlocks blocks (so rows fit
  // grid.y) and every offset fits 32 bits.
  const int64_t row_blocks = launch_shape::small_blocks_per_row(p.vecs);
  const int64_t small_blocks = dims.rows * row_blocks;
  const int64_t in_stride = dims.rows == 1 ? 0 : dims.in_stride;
  const int64_t out_stride = dims.rows == 1 ? 0 : dims.out_stride;
  const int64_t in_row = Op::kInfo.layout == Layout::kElementwise ? dims.d : 2 * dims.d;
  if (vector && small_blocks <= kSmallMaxBlocks &&
      (dims.rows - 1) * in_stride + in_row <= INT32_MAX &&
      (dims.rows - 1) * out_stride + dims.d <= INT32_MAX) {
    const SmallParams sp{p.in, p.out, static_cast<int32_t>(p.vecs),
                         static_cast<int32_t>(dims.d), static_cast<int32_t>(in_stride),
                         static_cast<int32_t>(out_stride)};
    const dim3 grid(static_cast<uint32_t>(row_blocks),
                    static_cast<uint32_t>(dims.rows));
    STABLEOPS_GPU_CHECK(gpu_launch(
        small_activation_kernel<T, Op>,
        grid, kSmallBlock, 0, stream, sp, op));
    return;
  }

  // The scalar path spreads few rows (narrower blocks, then fewer accesses
  // per thread); the vector path takes the widest shape (see the kernel).
  const launch_shape::RowChunks shape = launch_shape::spread_rows(
      dims.rows, p.vecs, U, kBlockThreads, vector ? 1 : kMinGridBlocks, /*min_bx=*/64);
  STD_TORCH_CHECK(shape.row_blocks <= INT32_MAX, Op::kInfo.name, ": ", dims.rows,
                  " rows exceed the kernel's grid");
  p.per_thread = static_cast<int32_t>(shape.per_thread);
  const dim3 grid(static_cast<uint32_t>(shape.row_blocks),
                  static_cast<uint32_t>(shape.chunks < 65535 ? shape.chunks : 65535));
  const dim3 block(static_cast<uint32_t>(shape.bx), static_cast<uint32_t>(shape.by));
  if (vector) {
    STABLEOPS_GPU_CHECK(gpu_launch(activation_kernel<T, true, Op>, grid, block, 0, stream, p, op));
  } else {
    STABLEOPS_GPU_CHECK(gpu_launch(activation_kernel<T, false, Op>, grid, block, 0, stream, p, op));
  }
}

// Every kernel instantiation is reached from launch_op's explicit
// instantiations below, in every compiler pass (the host entry points, which
// the device passes skip, are their only callers).
template <template <class> class OpT>
void launch_op(const Scalars& scalars, const ActShape& dims, const void* in, void* out,
               GpuFloat dtype, cudaStream_t stream) {
  using Op = OpT<GpuMath>;
  const Op op(scalars);
  with_gpu_float(dtype, [&](auto t) { launch<decltype(t)>(op, dims, in, out, stream); });
}

#define STABLEOPS_ACTIVATION_LAUNCH(OpT)                                              \
  template void launch_op<OpT>(const Scalars&, const ActShape&, const void*, void*, \
                               GpuFloat, cudaStream_t)
STABLEOPS_ACTIVATION_LAUNCH(SiluAndMul);
STABLEOPS_ACTIVATION_LAUNCH(MulAndSilu);
STABLEOPS_ACTIVATION_LAUNCH(SiluAndMulWithClamp);
STABLEOPS_ACTIVATION_LAUNCH(GeluAndMul);
STABLEOPS_ACTIVATION_LAUNCH(GeluTanhAndMul);
STABLEOPS_ACTIVATION_LAUNCH(FatreluAndMul);
STABLEOPS_ACTIVATION_LAUNCH(SwigluoaiAndMul);
STABLEOPS_ACTIVATION_LAUNCH(GeluNew);
STABLEOPS_ACTIVATION_LAUNCH(GeluFast);
STABLEOPS_ACTIVATION_LAUNCH(GeluQuick);
#undef STABLEOPS_ACTIVATION_LAUNCH

}  // namespace activation_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace activation_gpu;  // NOLINT: this file's own kernels
using torch::stable::Tensor;

namespace {

template <template <class> class OpT>
void activation_cuda(Tensor& out, const Tensor& input, const Scalars& scalars) {
  using Op = OpT<GpuMath>;
  const ActivationDims dims = check_activation(
      Op::kInfo, scalars, out, input, torch::headeronly::DeviceType::CUDA);
  if (dims.rows == 0 || dims.d == 0) return;
  const GpuFloat dtype = gpu_float_of(Op::kInfo.name, out.scalar_type());

  const int32_t device_index = out.get_device_index();
  const torch::stable::accelerator::DeviceGuard device_guard(device_index);
  const cudaStream_t stream =
      static_cast<cudaStream_t>(current_gpu_stream(device_index));
  const ActShape shape{dims.rows, dims.d, dims.in_stride, dims.out_stride};
  launch_op<OpT>(scalars, shape, input.const_data_ptr(), out.mutable_data_ptr(), dtype, stream);
}

}  // namespace

void silu_and_mul_cuda(Tensor& result, const Tensor& input) {
  activation_cuda<SiluAndMul>(result, input, {});
}

void mul_and_silu_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<MulAndSilu>(out, input, {});
}

void silu_and_mul_with_clamp_cuda(Tensor& result, const Tensor& input, double limit) {
  activation_cuda<SiluAndMulWithClamp>(
      result, input, Scalars{/*limit=*/limit, /*threshold=*/0.0, /*alpha=*/0.0});
}

void gelu_and_mul_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<GeluAndMul>(out, input, {});
}

void gelu_tanh_and_mul_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<GeluTanhAndMul>(out, input, {});
}

void fatrelu_and_mul_cuda(Tensor& out, const Tensor& input, double threshold) {
  activation_cuda<FatreluAndMul>(
      out, input, Scalars{/*limit=*/0.0, /*threshold=*/threshold, /*alpha=*/0.0});
}

void swigluoai_and_mul_cuda(Tensor& out, const Tensor& input, double alpha,
                            double limit) {
  activation_cuda<SwigluoaiAndMul>(
      out, input, Scalars{/*limit=*/limit, /*threshold=*/0.0, /*alpha=*/alpha});
}

void gelu_new_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<GeluNew>(out, input, {});
}

void gelu_fast_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<GeluFast>(out, input, {});
}

void gelu_quick_cuda(Tensor& out, const Tensor& input) {
  activation_cuda<GeluQuick>(out, input, {});
}

#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
