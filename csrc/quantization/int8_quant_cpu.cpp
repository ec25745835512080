// CPU kernels of the INT8 quantization ops (contract: ops.h and
// quant_check.h). Stable ABI only.
//
//   static_scaled_int8_quant   q = sat(rne(x / scale) + azp)
//   dynamic_scaled_int8_quant  per row, symmetric (azp None):
//                                s = amax(|x|) / 127, q = sat(rne(x / s))
//                              asymmetric (azp given):
//                                s = (max - min) / 255,
//                                azp = sat32(rne(-128 - min / s)),
//                                q = sat(rne(x / s) + azp)
//
// All in float32: x / s is an IEEE division, rne rounds half to even
// (torch.round), "+ azp" adds the zero point as a float32, sat clamps to
// [-128, 127] and maps NaN to 0, sat32 clamps to [-2^31, 2^31 - 128] and maps
// NaN to 0. A row whose s is 0 (all zeros, or max == min) is written as
// zeros with scale 0 and azp 0: nothing is divided by zero. A NaN in a row
// makes its scale NaN and its q and azp 0.
//
// Rows run in parallel (torch::stable::parallel_for); the loops over a row
// are branch-free and auto-vectorise (quant_cpu.h), compiled for AVX2 and the
// baseline.
#include <cstdint>
#include <cstring>
#include <optional>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/ops.h"
#include "csrc/quantization/quant_check.h"
#include "csrc/quantization/quant_cpu.h"

namespace stableops {
namespace {

using quant_cpu::int8_row;
using quant_cpu::rne;
using quant_cpu::sat_int32;

struct StaticArgs {
  const void* in;
  int8_t* out;
  QuantRows rows;
  float scale;
  float azp;
};

template <class Codec>
STABLEOPS_ALWAYS_INLINE void static_rows(const StaticArgs& a, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  for (int64_t r = begin; r < end; ++r) {
    int8_row<Codec>(
        static_cast<const T*>(a.in) + r * a.rows.in_row_stride,
        a.out + r * a.rows.out_row_stride, a.rows.hidden, a.scale, a.azp);
  }
}

STABLEOPS_QUANT_CPU_ROWS(static_rows_for, static_rows, StaticArgs)

struct DynamicArgs {
  const void* in;
  int8_t* out;
  QuantRows rows;
  float* scale;
  int64_t scale_stride;
  int32_t* azp;  // nullptr: symmetric
  int64_t azp_stride;
};

template <class Codec>
STABLEOPS_ALWAYS_INLINE void dynamic_rows(const DynamicArgs& a, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  const int64_t H = a.rows.hidden;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.in) + r * a.rows.in_row_stride;
    int8_t* o = a.out + r * a.rows.out_row_stride;
    float s = 0.0f;
    float azp = 0.0f;
    if (a.azp == nullptr) {
      s = cpu::bits_f32(quant_cpu::absmax_bits<Codec>(x, H)) / 127.0f;
    } else {
      float mn = 0.0f;
      float mx = 0.0f;
      quant_cpu::min_max<Codec>(x, H, &mn, &mx);
      s = (mx - mn) / 255.0f;
      azp = s == 0.0f ? 0.0f : sat_int32(rne(-128.0f - mn / s));
      a.azp[r * a.azp_stride] = static_cast<int32_t>(azp);
    }
    a.scale[r * a.scale_stride] = s;
    if (s == 0.0f) {
      std::memset(o, 0, static_cast<size_t>(H));
    } else {
      int8_row<Codec>(x, o, H, s, azp);
    }
  }
}

STABLEOPS_QUANT_CPU_ROWS(dynamic_rows_for, dynamic_rows, DynamicArgs)

}  // namespace

void static_scaled_int8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp) {
  const StaticInt8Plan plan = check_static_scaled_int8_quant(
      result, input, scale, azp, cpu_kernel_device(result));
  if (validation_only(result)) {
    return;
  }
  StaticArgs a{};
  a.in = input.const_data_ptr();
  a.out = static_cast<int8_t*>(result.mutable_data_ptr());
  a.rows = plan.rows;
  a.scale = *static_cast<const float*>(scale.const_data_ptr());
  a.azp = plan.has_azp
      ? static_cast<float>(*static_cast<const int32_t*>(azp->const_data_ptr()))
      : 0.0f;
  quant_cpu::for_rows(static_rows_for(input.scalar_type()), a, plan.rows);
}

void dynamic_scaled_int8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> azp) {
  const DynamicInt8Plan plan = check_dynamic_scaled_int8_quant(
      result, input, scale, azp, cpu_kernel_device(result));
  if (validation_only(result)) {
    return;
  }
  DynamicArgs a{};
  a.in = input.const_data_ptr();
  a.out = static_cast<int8_t*>(result.mutable_data_ptr());
  a.rows = plan.rows;
  a.scale = static_cast<float*>(scale.mutable_data_ptr());
  a.scale_stride = plan.scale_stride;
  a.azp = plan.has_azp ? static_cast<int32_t*>(azp->mutable_data_ptr()) : nullptr;
  a.azp_stride = plan.azp_stride;
  quant_cpu::for_rows(dynamic_rows_for(input.scalar_type()), a, plan.rows);
}

}  // namespace stableops
