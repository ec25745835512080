// CUDA/ROCm kernels of the FP8 quantization ops (one source for both; the
// runtime names are mapped by gpu_compat.h). Contract: ops.h and
// quant_check.h (validation shared with the CPU kernel and the fake).
//
//   static_scaled_fp8_quant             one pass: rows_kernel
//   dynamic_per_token_scaled_fp8_quant  one pass: dynamic_rows_kernel (a row
//                                       per [tx] threads, read once into
//                                       registers when H <= 256 * 4 units,
//                                       amax reduced, scale written, row
//                                       quantised from registers)
//   dynamic_scaled_fp8_quant            small contiguous inputs (<= 32K
//                                       elements): one block, the whole
//                                       tensor as one row of
//                                       dynamic_rows_kernel. Otherwise three
//                                       launches: scale[0] = 0; amax pass
//                                       (one wave of blocks, grid-stride,
//                                       4 loads in flight per thread, one
//                                       atomicMax per block of the block's
//                                       scale as float bits); the
//                                       quantise pass (rows_kernel) reading
//                                       scale[0], last rows first (they are
//                                       still in L2).
//
// The atomicMax combines per-block scales max(amax_b / MAX, 1/(MAX*512)):
// that function is monotone, so the maximum over blocks is the scale of the
// global amax; non-negative float32 bits order like unsigned integers, with
// NaN (from a NaN input) above everything, so a NaN input gives a NaN scale
// (torch.amax semantics). Every launch goes on the current stream under a
// DeviceGuard; no allocation, no host synchronisation: CUDA-graph capturable.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/fp8.h"
#include "csrc/gpu_compat.h"
#include "csrc/quantization/quant_gpu.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>

#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#include "csrc/quantization/quant_check.h"
#endif

namespace stableops {
namespace fp8_quant_gpu {

using namespace quant_gpu;  // NOLINT(build/namespaces): this file's toolkit
using fp8::Format;

// Calls f(T{}, std::integral_constant<Format, F>{}) for the input's element
// type T and the result's format F: every instantiation of this file's
// kernels is reached from here, in every compiler pass.
template <class Fn>
void dispatch(GpuFloat input, Format format, Fn&& f) {
  with_gpu_float(input, [&](auto t) {
    if (format == Format::kE4M3FN) {
      f(t, std::integral_constant<Format, Format::kE4M3FN>{});
    } else {
      f(t, std::integral_constant<Format, Format::kE4M3FNUZ>{});
    }
  });
}

__global__ void zero_word_kernel(uint32_t* p) {
  pdl_enter();
  *p = 0u;
}

// amax over every row, combined across blocks with one atomicMax of the
// block's scale (see the file comment).
template <typename T, int N, Format F>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, 4)
    absmax_scale_kernel(const DynParams p) {
  pdl_enter();
  __shared__ uint32_t smem[kMaxWarps];
  uint32_t acc = AbsMaxOp::init();
  const int64_t row_blocks = (p.num_rows + blockDim.y - 1) / blockDim.y;
  for (int64_t rb = blockIdx.x; rb < row_blocks; rb += gridDim.x) {
    const int64_t row = rb * blockDim.y + threadIdx.y;
    if (row >= p.num_rows) continue;
    const T* x = static_cast<const T*>(p.in) + row * p.in_stride;
    for_row_units<T, N>(x, threadIdx.x, p.units, [&](int, int, const float (&f)[N]) {
#pragma unroll
      for (int i = 0; i < N; ++i) acc = AbsMaxOp::add(acc, f[i]);
    });
  }
  acc = segment_reduce<AbsMaxOp>(acc, kBlockThreads, smem);
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const float s = dynamic_fp8_scale<F>(__uint_as_float(acc), INFINITY);
    atomicMax(reinterpret_cast<unsigned int*>(p.scale), __float_as_uint(s));
  }
}

// scale[0] = 0, the amax pass (one wave of blocks: the kernel's registers,
// not an assumed 8 blocks per multiprocessor, decide how many), then the
// quantise pass over q.
template <typename T, Format F>
void launch_tensor_scale(const DynParams& a, dim3 block, int64_t row_blocks, RowsParams q,
                         bool vec, int32_t device, cudaStream_t stream, const char* op) {
  static ResidentGrid resident[2];  // [scalar, vector] of this T and F
  const int max_blocks =
      vec ? resident[1].blocks(absmax_scale_kernel<T, kVec, F>, kBlockThreads, device)
          : resident[0].blocks(absmax_scale_kernel<T, 1, F>, kBlockThreads, device);
  const dim3 grid(static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(row_blocks, max_blocks))));
  STABLEOPS_GPU_CHECK(gpu_launch(
      zero_word_kernel, 1, 1, 0, stream, reinterpret_cast<uint32_t*>(a.scale)));
  if (vec) {
    STABLEOPS_GPU_CHECK(gpu_launch(absmax_scale_kernel<T, kVec, F>, grid, block, 0, stream, a));
  } else {
    STABLEOPS_GPU_CHECK(gpu_launch(absmax_scale_kernel<T, 1, F>, grid, block, 0, stream, a));
  }
  launch_rows<T, Fp8Q<F>>(q, vec, stream, op);
}

// The launches of each op, from plain parameters (the Tensor entry points
// below fill them in).
void launch_static(const RowsParams& p, bool vec, GpuFloat input, Format format,
                   cudaStream_t stream, const char* op) {
  dispatch(input, format, [&](auto t, auto fmt) {
    launch_rows<decltype(t), Fp8Q<decltype(fmt)::value>>(p, vec, stream, op);
  });
}

void launch_per_row(const DynParams& p, int64_t hidden, bool vec, GpuFloat input,
                    Format format, cudaStream_t stream, const char* op) {
  dispatch(input, format, [&](auto t, auto fmt) {
    launch_dynamic<decltype(t), Fp8DynMode<decltype(fmt)::value>>(p, hidden, vec, stream, op);
  });
}

void launch_per_tensor(const DynParams& a, dim3 block, int64_t row_blocks, const RowsParams& q,
                       bool vec, GpuFloat input, Format format, int32_t device,
                       cudaStream_t stream, const char* op) {
  dispatch(input, format, [&](auto t, auto fmt) {
    launch_tensor_scale<decltype(t), decltype(fmt)::value>(a, block, row_blocks, q, vec, device,
                                                           stream, op);
  });
}

}  // namespace fp8_quant_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace fp8_quant_gpu;  // NOLINT(build/namespaces): this file's kernels
using torch::headeronly::DeviceType;

namespace {

// Largest input the one-block path of dynamic_scaled_fp8_quant takes.
constexpr int64_t kSingleBlockElems = 32768;

}  // namespace

void static_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<std::vector<int64_t>> group_shape) {
  constexpr const char* kOp = "static_scaled_fp8_quant";
  const StaticFp8Plan plan = check_static_scaled_fp8_quant(
      result, input, scale, group_shape, DeviceType::CUDA);
  if (plan.rows.num_rows == 0 || plan.rows.hidden == 0) return;
  check_hidden_fits(kOp, plan.rows.hidden);

  RowsParams p = rows_params(plan.rows, input, result,
                             static_cast<const float*>(scale.const_data_ptr()));
  p.group_m = plan.group_m;
  p.group_n = static_cast<int32_t>(std::min(plan.group_n, plan.rows.hidden));
  p.scale_stride_m = plan.scale_stride_m;
  p.scale_stride_n = plan.scale_stride_n;
  const bool vec = vector_rows(plan.rows, input, result);

  const GpuLaunchContext ctx(result);
  launch_static(p, vec, gpu_float_of(kOp, input.scalar_type()), plan.format, ctx.stream, kOp);
}

void dynamic_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale) {
  constexpr const char* kOp = "dynamic_scaled_fp8_quant";
  const DynamicFp8Plan plan =
      check_dynamic_scaled_fp8_quant(result, input, scale, DeviceType::CUDA);
  const QuantRows& rows = plan.rows;
  check_hidden_fits(kOp, rows.hidden);
  const GpuFloat in_type = gpu_float_of(kOp, input.scalar_type());
  float* scale_ptr = static_cast<float*>(scale.mutable_data_ptr());
  const int64_t numel = rows.num_rows * rows.hidden;
  const bool dense = rows.num_rows <= 1 ||
      (rows.in_row_stride == rows.hidden && rows.out_row_stride == rows.hidden);

  const GpuLaunchContext ctx(result);

  if (dense && numel <= kSingleBlockElems) {
    // The whole tensor as one row (zero elements included: scale = 1 /
    // (MAX * 512)).
    const QuantRows one{1, numel, numel, numel};
    const DynParams p = dyn_params(one, input, result, scale_ptr, 0);
    const bool vec = numel > 0 && vector_rows(one, input, result);
    launch_per_row(p, numel, vec, in_type, plan.format, ctx.stream, kOp);
    return;
  }

  const bool vec = vector_rows(rows, input, result);
  DynParams a = dyn_params(rows, input, result, scale_ptr, 0);
  a.units = static_cast<int32_t>(vec ? rows.hidden / kVec : rows.hidden);
  const dim3 block = block_shape(a.units);
  const int64_t row_blocks = (rows.num_rows + block.y - 1) / block.y;
  RowsParams q = rows_params(rows, input, result, scale_ptr);
  q.reverse = true;  // the amax pass read the last rows last
  launch_per_tensor(a, block, row_blocks, q, vec, in_type, plan.format, ctx.device, ctx.stream,
                    kOp);
}

void dynamic_per_token_scaled_fp8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> scale_ub) {
  constexpr const char* kOp = "dynamic_per_token_scaled_fp8_quant";
  const PerTokenFp8Plan plan = check_dynamic_per_token_scaled_fp8_quant(
      result, input, scale, scale_ub, DeviceType::CUDA);
  if (plan.rows.num_rows == 0) return;
  check_hidden_fits(kOp, plan.rows.hidden);
  DynParams p = dyn_params(plan.rows, input, result,
                           static_cast<float*>(scale.mutable_data_ptr()),
                           plan.scale_stride);
  p.scale_ub = plan.has_scale_ub
      ? static_cast<const float*>(scale_ub->const_data_ptr())
      : nullptr;
  const bool vec = vector_rows(plan.rows, input, result);

  const GpuLaunchContext ctx(result);
  launch_per_row(p, plan.rows.hidden, vec, gpu_float_of(kOp, input.scalar_type()), plan.format, ctx.stream, kOp);
}

#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
