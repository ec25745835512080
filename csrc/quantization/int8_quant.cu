// CUDA/ROCm kernels of the INT8 quantization ops (one source for both; the
// runtime names are mapped by gpu_compat.h). Contract: ops.h,
// quant_check.h and int8_quant_cpu.cpp (rne, saturation, NaN, zero rows).
//
//   static_scaled_int8_quant   one pass: rows_kernel (per-tensor scale and
//                              zero point read from device memory)
//   dynamic_scaled_int8_quant  one pass: dynamic_rows_kernel (a row per [tx]
//                              threads, read once into registers when
//                              H <= 256 * 4 units; amax, or min and max,
//                              reduced; scale (and azp) written; the row
//                              quantised from registers)
//
// rne is rintf (round half to even); x / s the IEEE float32 division. Every
// launch goes on the current stream under a DeviceGuard; no allocation, no
// host synchronisation: CUDA-graph capturable.
#include <cstdint>

#include "csrc/gpu_compat.h"
#include "csrc/quantization/quant_gpu.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <optional>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#include "csrc/quantization/quant_check.h"
#endif

namespace stableops {
namespace int8_quant_gpu {

using namespace quant_gpu;  // NOLINT(build/namespaces): this file's toolkit

// The launches of each op, from plain parameters (the Tensor entry points
// below fill them in): every instantiation of the INT8 kernels is reached
// from here, in every compiler pass.
void launch_static(const RowsParams& p, bool vec, GpuFloat input, cudaStream_t stream,
                   const char* op) {
  with_gpu_float(input, [&](auto t) {
    using T = decltype(t);
    if (p.azp != nullptr) {
      launch_rows<T, Int8Q<true>>(p, vec, stream, op);
    } else {
      launch_rows<T, Int8Q<false>>(p, vec, stream, op);
    }
  });
}

void launch_per_row(const DynParams& p, int64_t hidden, bool vec, GpuFloat input,
                    cudaStream_t stream, const char* op) {
  with_gpu_float(input, [&](auto t) {
    using T = decltype(t);
    if (p.azp != nullptr) {
      launch_dynamic<T, Int8AsymMode>(p, hidden, vec, stream, op);
    } else {
      launch_dynamic<T, Int8SymMode>(p, hidden, vec, stream, op);
    }
  });
}

}  // namespace int8_quant_gpu

#if !STABLEOPS_DEVICE_PASS
using torch::headeronly::DeviceType;

void static_scaled_int8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp) {
  constexpr const char* kOp = "static_scaled_int8_quant";
  const StaticInt8Plan plan =
      check_static_scaled_int8_quant(result, input, scale, azp, DeviceType::CUDA);
  const QuantRows& rows = plan.rows;
  if (rows.num_rows == 0 || rows.hidden == 0) return;
  quant_gpu::check_hidden_fits(kOp, rows.hidden);

  quant_gpu::RowsParams p = quant_gpu::rows_params(
      rows, input, result, static_cast<const float*>(scale.const_data_ptr()));
  p.azp = plan.has_azp ? static_cast<const int32_t*>(azp->const_data_ptr()) : nullptr;
  const bool vec = quant_gpu::vector_rows(rows, input, result);

  const quant_gpu::GpuLaunchContext ctx(result);
  int8_quant_gpu::launch_static(p, vec, gpu_float_of(kOp, input.scalar_type()), ctx.stream, kOp);
}

void dynamic_scaled_int8_quant_cuda(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp) {
  constexpr const char* kOp = "dynamic_scaled_int8_quant";
  const DynamicInt8Plan plan =
      check_dynamic_scaled_int8_quant(result, input, scale, azp, DeviceType::CUDA);
  const QuantRows& rows = plan.rows;
  if (rows.num_rows == 0) return;
  quant_gpu::check_hidden_fits(kOp, rows.hidden);

  quant_gpu::DynParams p = quant_gpu::dyn_params(
      rows, input, result, static_cast<float*>(scale.mutable_data_ptr()),
      plan.scale_stride);
  p.azp = plan.has_azp ? static_cast<int32_t*>(azp->mutable_data_ptr()) : nullptr;
  p.azp_stride = plan.azp_stride;
  const bool vec = quant_gpu::vector_rows(rows, input, result);

  const quant_gpu::GpuLaunchContext ctx(result);
  int8_quant_gpu::launch_per_row(p, rows.hidden, vec, gpu_float_of(kOp, input.scalar_type()), ctx.stream, kOp);
}

#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
