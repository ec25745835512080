// CPU kernels of the FP8 quantization ops (contract: ops.h and
// quant_check.h). Stable ABI only.
//
//   static_scaled_fp8_quant             q = fp8(clamp(x / scale, -MAX, MAX))
//   dynamic_scaled_fp8_quant            scale = max(amax(|x|) / MAX, 1/(MAX*512))
//   dynamic_per_token_scaled_fp8_quant  per row: scale = max(min(amax_row,
//                                       scale_ub) / MAX, 1/(MAX*512))
//
// MAX is 448 (float8_e4m3fn) or 240 (float8_e4m3fnuz); the conversion is
// fp8::quantize (torch's own, bit-exact). NaN propagates: a NaN input makes
// its amax, hence its scale, NaN (torch.amax semantics), and every element
// quantised with a NaN scale is the format's NaN.
//
// Rows run in parallel (torch::stable::parallel_for); the loops over a row
// are branch-free and auto-vectorise (quant_cpu.h), compiled for AVX2 and the
// baseline.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/core/fp8.h"
#include "csrc/ops.h"
#include "csrc/quantization/quant_check.h"
#include "csrc/quantization/quant_cpu.h"

namespace stableops {
namespace {

using fp8::Format;
using quant_cpu::absmax_bits;
using quant_cpu::fp8_row;
using quant_cpu::max_nan;
using quant_cpu::min_nan;

// torch's FP8 conversion is a plain `inline` function. Clang emits such a
// function only when an ordinary function uses it: called from target_clones
// functions alone (the row functions below), it is neither emitted nor
// inlined, and the shared object is left with an undefined symbol. This
// ordinary (kept) function uses both formats' conversions, so clang emits
// them and inlines them into the clones.
__attribute__((used)) uint8_t emit_fp8_conversions(float x) {
  return fp8::quantize<Format::kE4M3FN>(x) ^ fp8::quantize<Format::kE4M3FNUZ>(x);
}

// The scale of an amax: max(min(amax, ub) / MAX, 1 / (MAX * 512)), NaN
// propagating. Monotone in amax.
float dynamic_scale(float amax, float ub, Format format) {
  const float max = fp8::max_of(format);
  return max_nan(min_nan(amax, ub) / max, 1.0f / (max * 512.0f));
}

// ---------------------------------------------------------------------------
// Scale per group of rows x columns (static; also the quantise pass of the
// dynamic per-tensor op).
// ---------------------------------------------------------------------------
struct GroupArgs {
  const void* in;
  uint8_t* out;
  QuantRows rows;
  Format format;
  const float* scale;
  int64_t group_m, group_n, scale_stride_m, scale_stride_n;
};

template <class Codec, Format F>
STABLEOPS_ALWAYS_INLINE void group_rows_f(const GroupArgs& a, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  const int64_t H = a.rows.hidden;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.in) + r * a.rows.in_row_stride;
    uint8_t* o = a.out + r * a.rows.out_row_stride;
    const float* srow = a.scale + (r / a.group_m) * a.scale_stride_m;
    if (a.group_n >= H) {
      fp8_row<Codec, F>(x, o, H, srow[0]);
    } else if (a.group_n == 1) {
      for (int64_t c = 0; c < H; ++c) {
        o[c] = fp8::quantize<F>(Codec::load(x[c]) / srow[c * a.scale_stride_n]);
      }
    } else {
      for (int64_t c = 0; c < H; c += a.group_n) {
        fp8_row<Codec, F>(
            x + c, o + c, std::min(a.group_n, H - c),
            srow[(c / a.group_n) * a.scale_stride_n]);
      }
    }
  }
}

template <class Codec>
STABLEOPS_ALWAYS_INLINE void group_rows(const GroupArgs& a, int64_t begin, int64_t end) {
  if (a.format == Format::kE4M3FN) {
    group_rows_f<Codec, Format::kE4M3FN>(a, begin, end);
  } else {
    group_rows_f<Codec, Format::kE4M3FNUZ>(a, begin, end);
  }
}

STABLEOPS_QUANT_CPU_ROWS(group_rows_for, group_rows, GroupArgs)

// ---------------------------------------------------------------------------
// amax over rows (dynamic per-tensor, first pass).
// ---------------------------------------------------------------------------
struct AbsmaxArgs {
  const void* in;
  QuantRows rows;
  std::atomic<uint32_t>* amax_bits;  // |x| bits, see quant_cpu::absmax_bits
};

template <class Codec>
STABLEOPS_ALWAYS_INLINE void absmax_rows(const AbsmaxArgs& a, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  uint32_t m = 0;
  for (int64_t r = begin; r < end; ++r) {
    const uint32_t row = absmax_bits<Codec>(
        static_cast<const T*>(a.in) + r * a.rows.in_row_stride, a.rows.hidden);
    m = row > m ? row : m;
  }
  uint32_t seen = a.amax_bits->load(std::memory_order_relaxed);
  while (m > seen &&
         !a.amax_bits->compare_exchange_weak(seen, m, std::memory_order_relaxed)) {
  }
}

STABLEOPS_QUANT_CPU_ROWS(absmax_rows_for, absmax_rows, AbsmaxArgs)

// ---------------------------------------------------------------------------
// Per-token: amax, scale and quantisation of each row.
// ---------------------------------------------------------------------------
struct PerTokenArgs {
  const void* in;
  uint8_t* out;
  QuantRows rows;
  Format format;
  float* scale;
  int64_t scale_stride;
  float scale_ub;  // +inf when absent
};

template <class Codec, Format F>
STABLEOPS_ALWAYS_INLINE void per_token_rows_f(const PerTokenArgs& a, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  const int64_t H = a.rows.hidden;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.in) + r * a.rows.in_row_stride;
    const float amax = cpu::bits_f32(absmax_bits<Codec>(x, H));
    const float s = dynamic_scale(amax, a.scale_ub, F);
    a.scale[r * a.scale_stride] = s;
    fp8_row<Codec, F>(x, a.out + r * a.rows.out_row_stride, H, s);
  }
}

template <class Codec>
STABLEOPS_ALWAYS_INLINE void per_token_rows(const PerTokenArgs& a, int64_t begin, int64_t end) {
  if (a.format == Format::kE4M3FN) {
    per_token_rows_f<Codec, Format::kE4M3FN>(a, begin, end);
  } else {
    per_token_rows_f<Codec, Format::kE4M3FNUZ>(a, begin, end);
  }
}

STABLEOPS_QUANT_CPU_ROWS(per_token_rows_for, per_token_rows, PerTokenArgs)

}  // namespace

void static_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    const torch::stable::Tensor& scale,
    std::optional<std::vector<int64_t>> group_shape) {
  const StaticFp8Plan plan = check_static_scaled_fp8_quant(
      result, input, scale, group_shape, cpu_kernel_device(result));
  if (validation_only(result)) {
    return;
  }
  GroupArgs a{};
  a.in = input.const_data_ptr();
  a.out = static_cast<uint8_t*>(result.mutable_data_ptr());
  a.rows = plan.rows;
  a.format = plan.format;
  a.scale = static_cast<const float*>(scale.const_data_ptr());
  a.group_m = plan.group_m;
  a.group_n = plan.group_n;
  a.scale_stride_m = plan.scale_stride_m;
  a.scale_stride_n = plan.scale_stride_n;
  quant_cpu::for_rows(group_rows_for(input.scalar_type()), a, plan.rows);
}

void dynamic_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale) {
  const DynamicFp8Plan plan = check_dynamic_scaled_fp8_quant(
      result, input, scale, cpu_kernel_device(result));
  if (validation_only(result)) {
    return;
  }
  std::atomic<uint32_t> amax_bits{0};
  const AbsmaxArgs am{input.const_data_ptr(), plan.rows, &amax_bits};
  quant_cpu::for_rows(absmax_rows_for(input.scalar_type()), am, plan.rows);
  const float s = dynamic_scale(
      cpu::bits_f32(amax_bits.load()), std::numeric_limits<float>::infinity(),
      plan.format);
  *static_cast<float*>(scale.mutable_data_ptr()) = s;

  GroupArgs a{};
  a.in = input.const_data_ptr();
  a.out = static_cast<uint8_t*>(result.mutable_data_ptr());
  a.rows = plan.rows;
  a.format = plan.format;
  a.scale = &s;
  a.group_m = std::max<int64_t>(plan.rows.num_rows, 1);
  a.group_n = std::max<int64_t>(plan.rows.hidden, 1);
  quant_cpu::for_rows(group_rows_for(input.scalar_type()), a, plan.rows);
}

void dynamic_per_token_scaled_fp8_quant_cpu(
    torch::stable::Tensor& result,
    const torch::stable::Tensor& input,
    torch::stable::Tensor& scale,
    std::optional<torch::stable::Tensor> scale_ub) {
  const PerTokenFp8Plan plan = check_dynamic_per_token_scaled_fp8_quant(
      result, input, scale, scale_ub, cpu_kernel_device(result));
  if (validation_only(result)) {
    return;
  }
  PerTokenArgs a{};
  a.in = input.const_data_ptr();
  a.out = static_cast<uint8_t*>(result.mutable_data_ptr());
  a.rows = plan.rows;
  a.format = plan.format;
  a.scale = static_cast<float*>(scale.mutable_data_ptr());
  a.scale_stride = plan.scale_stride;
  a.scale_ub = plan.has_scale_ub
      ? *static_cast<const float*>(scale_ub->const_data_ptr())
      : std::numeric_limits<float>::infinity();
  quant_cpu::for_rows(per_token_rows_for(input.scalar_type()), a, plan.rows);
}

}  // namespace stableops
