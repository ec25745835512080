// CPU kernels of the RMSNorm family: stableops::rms_norm, rms_norm_weightless,
// fused_add_rms_norm and fused_add_rms_norm_weightless (contract: ops.h and
// rms_norm_check.h). Stable ABI only.
//
// Per row of `hidden` elements (statistics in float32):
//   fused:  z = round(x + residual), stored to residual; x := z
//   inv   = 1 / sqrt(sum(x^2) / hidden + epsilon)
//   y     = round(x * inv)              (rounded to the dtype, as vLLM / HF)
//   out   = round(y * weight)           (the weightless ops: out = y)
// where round() is the conversion to the tensors' dtype (identity for fp32).
//
// * Parallel over rows with torch::stable::parallel_for (honours
//   torch.set_num_threads()); a row is processed by one thread in a fixed
//   order, so results do not depend on the thread count.
// * The inner loops are branch-free and auto-vectorise: the sum of squares
//   keeps kLanes independent partial sums (a vector of accumulators, no
//   reassociation needed), the codecs of cpu_math.h convert fp16/bf16 with
//   integer operations; compiled for AVX2 and the baseline
//   (STABLEOPS_CPU_CLONES). No libm: 1/sqrt is the one sqrtf of a row.
// * Odd hidden sizes need no special path (a scalar tail of < kLanes
//   elements); any row stride works (rows are addressed by stride).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/norm/rms_norm_check.h"
#include "csrc/ops.h"

namespace stableops {
namespace {

using cpu::BF16Codec;
using cpu::F16Codec;
using cpu::F32Codec;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Independent partial sums of the sum of squares: two AVX2 registers of
// float32, enough to hide the add latency.
constexpr int kLanes = 16;

STABLEOPS_ALWAYS_INLINE float lanes_total(float (&acc)[kLanes]) {
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) {
      acc[j] += acc[j + w];
    }
  }
  return acc[0];
}

// Sum of squares of one row.
template <class Codec>
STABLEOPS_ALWAYS_INLINE float sum_of_squares(
    const typename Codec::storage_t* x,
    int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float v = Codec::load(x[i + j]);
      acc[j] += v * v;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const float v = Codec::load(x[i + j]);
    acc[j] += v * v;
  }
  return lanes_total(acc);
}

// residual := round(x + residual), and the sum of squares of the stored
// (rounded) values.
template <class Codec>
STABLEOPS_ALWAYS_INLINE float add_residual_sum_of_squares(
    const typename Codec::storage_t* x,
    typename Codec::storage_t* res,
    int64_t n) {
  using T = typename Codec::storage_t;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const T z = Codec::store(Codec::load(x[i + j]) + Codec::load(res[i + j]));
      res[i + j] = z;
      const float v = Codec::load(z);
      acc[j] += v * v;
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const T z = Codec::store(Codec::load(x[i + j]) + Codec::load(res[i + j]));
    res[i + j] = z;
    const float v = Codec::load(z);
    acc[j] += v * v;
  }
  return lanes_total(acc);
}

template <class Codec, bool kWeight, bool kFused>
STABLEOPS_ALWAYS_INLINE void norm_rows(
    const RmsNormProblem& p,
    int64_t begin,
    int64_t end) {
  using T = typename Codec::storage_t;
  const int64_t n = p.hidden;
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t row = begin; row < end; ++row) {
    T* out = static_cast<T*>(p.out) + row * p.out_stride;
    const T* x = static_cast<const T*>(p.in) + row * p.in_stride;
    float ss;
    if constexpr (kFused) {
      T* res = static_cast<T*>(p.residual) + row * p.res_stride;
      ss = add_residual_sum_of_squares<Codec>(x, res, n);
      x = res; // normalise the stored sum
    } else {
      ss = sum_of_squares<Codec>(x, n);
    }
    // mean(x^2) as sum / hidden, like a float32 mean.
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + p.epsilon);
    for (int64_t i = 0; i < n; ++i) {
      const float y = Codec::load(Codec::store(Codec::load(x[i]) * inv));
      if constexpr (kWeight) {
        out[i] = Codec::store(y * Codec::load(w[i]));
      } else {
        out[i] = Codec::store(y);
      }
    }
  }
}

template <class Codec>
STABLEOPS_ALWAYS_INLINE void norm_rows_any(
    const RmsNormProblem& p,
    int64_t begin,
    int64_t end) {
  if (p.fused) {
    p.weighted ? norm_rows<Codec, true, true>(p, begin, end)
             : norm_rows<Codec, false, true>(p, begin, end);
  } else {
    p.weighted ? norm_rows<Codec, true, false>(p, begin, end)
             : norm_rows<Codec, false, false>(p, begin, end);
  }
}

STABLEOPS_CPU_CLONES void norm_rows_f32(
    const RmsNormProblem& p,
    int64_t begin,
    int64_t end) {
  norm_rows_any<F32Codec>(p, begin, end);
}

STABLEOPS_CPU_CLONES void norm_rows_f16(
    const RmsNormProblem& p,
    int64_t begin,
    int64_t end) {
  norm_rows_any<F16Codec>(p, begin, end);
}

STABLEOPS_CPU_CLONES void norm_rows_bf16(
    const RmsNormProblem& p,
    int64_t begin,
    int64_t end) {
  norm_rows_any<BF16Codec>(p, begin, end);
}

void run(const RmsNormProblem& p) {
  if (p.rows == 0 || p.hidden == 0) {
    return;
  }
  using RowFn = void (*)(const RmsNormProblem&, int64_t, int64_t);
  RowFn fn = nullptr;
  switch (p.dtype) {
    case ScalarType::Float:
      fn = &norm_rows_f32;
      break;
    case ScalarType::Half:
      fn = &norm_rows_f16;
      break;
    case ScalarType::BFloat16:
      fn = &norm_rows_bf16;
      break;
    default:
      STD_TORCH_CHECK(false, p.op, ": unreachable dtype ", scalar_type_name(p.dtype));
  }
  // About 16K elements per task keeps scheduling overhead negligible.
  const int64_t grain = std::max<int64_t>(1, 16384 / p.hidden);
  torch::stable::parallel_for(
      0, p.rows, grain, [&p, fn](int64_t begin, int64_t end) {
        fn(p, begin, end);
      });
}

} // namespace

// Each kernel validates (shared check), then returns when the fake called it
// on meta tensors to validate only.
void rms_norm_cpu(
    Tensor& result,
    const Tensor& input,
    const Tensor& weight,
    double epsilon) {
  const RmsNormProblem p =
      check_rms_norm(result, input, &weight, epsilon, cpu_kernel_device(result));
  if (!validation_only(result)) {
    run(p);
  }
}

void rms_norm_weightless_cpu(Tensor& result, const Tensor& input, double epsilon) {
  const RmsNormProblem p =
      check_rms_norm(result, input, nullptr, epsilon, cpu_kernel_device(result));
  if (!validation_only(result)) {
    run(p);
  }
}

void fused_add_rms_norm_cpu(
    Tensor& input,
    Tensor& residual,
    const Tensor& weight,
    double epsilon) {
  const RmsNormProblem p = check_fused_add_rms_norm(
      input, residual, &weight, epsilon, cpu_kernel_device(input));
  if (!validation_only(input)) {
    run(p);
  }
}

void fused_add_rms_norm_weightless_cpu(
    Tensor& input,
    Tensor& residual,
    double epsilon) {
  const RmsNormProblem p = check_fused_add_rms_norm(
      input, residual, nullptr, epsilon, cpu_kernel_device(input));
  if (!validation_only(input)) {
    run(p);
  }
}

} // namespace stableops
