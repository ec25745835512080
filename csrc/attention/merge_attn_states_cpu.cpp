// CPU kernel for stableops::merge_attn_states (contract: see ops.h and
// merge_attn_states_check.h). Stable ABI only.
//
// * fp32 / fp16 / bf16 values, all arithmetic in float32.
// * Parallel over the num_tokens * num_heads rows with
//   torch::stable::parallel_for (torch_parallel_for shim, PyTorch >= 2.10), so
//   it honours torch.set_num_threads() and needs no thread pool of its own.
// * The inner loop over head_size is plain branch-free scalar code that GCC
//   and Clang auto-vectorise (csrc/core/cpu_math.h's codecs), compiled for
//   AVX2 and the baseline (STABLEOPS_CPU_CLONES).
// * exp/log come from cpu_math.h (no libm: see there).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/attention/merge_attn_states_check.h"
#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/core/fp8.h"
#include "csrc/ops.h"

namespace stableops {
namespace {

using torch::headeronly::ScalarType;
using cpu::BF16Codec;
using cpu::F16Codec;
using cpu::F32Codec;
using cpu::exp_no_libm;
using cpu::log_no_libm;

// ---------------------------------------------------------------------------
// Kernel.
// ---------------------------------------------------------------------------

struct MergeParams {
  void* out;
  const void* prefix;
  const void* suffix;
  int64_t out_st, out_sh; // value strides (elements) of dims 0 and 1
  int64_t pre_st, pre_sh;
  int64_t suf_st, suf_sh;
  const float* prefix_lse; // [H, T]
  int64_t plse_sh, plse_st;
  const float* suffix_lse;
  int64_t slse_sh, slse_st;
  float* out_lse; // may be null
  int64_t olse_sh, olse_st;
  int64_t num_heads;
  int64_t head_size;
  int64_t merge_tokens; // tokens at index >= this take the suffix unchanged
  float out_scale; // FP8 output: stored value = fp8(merged / out_scale)
};

// Output policies: the input dtype itself, or FP8 of value / scale.
template <class Codec>
struct SameOut {
  using storage_t = typename Codec::storage_t;
  static constexpr bool kSame = true;
  static STABLEOPS_ALWAYS_INLINE storage_t store(float v, float /*scale*/) {
    return Codec::store(v);
  }
};

template <fp8::Format F>
struct Fp8Out {
  using storage_t = uint8_t;
  static constexpr bool kSame = false;
  static STABLEOPS_ALWAYS_INLINE uint8_t store(float v, float scale) {
    return fp8::quantize<F>(v / scale);
  }
};

// out[i] = src[i] (raw copy when the output has the input dtype, else the
// value converted by the output policy).
template <class Codec, class Out>
STABLEOPS_ALWAYS_INLINE void pass_through(
    typename Out::storage_t* out,
    const typename Codec::storage_t* src,
    int64_t n,
    float scale) {
  if constexpr (Out::kSame) {
    if (static_cast<const void*>(out) != static_cast<const void*>(src)) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = src[i];
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = Out::store(Codec::load(src[i]), scale);
    }
  }
}

template <class Codec, class Out>
STABLEOPS_ALWAYS_INLINE void merge_rows(
    const MergeParams& p,
    int64_t begin,
    int64_t end) {
  using T = typename Codec::storage_t;
  using O = typename Out::storage_t;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  const int64_t H = p.num_heads;
  const int64_t D = p.head_size;
  const float scale = p.out_scale;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t t = row / H;
    const int64_t h = row - t * H;
    O* out = static_cast<O*>(p.out) + t * p.out_st + h * p.out_sh;
    const T* pre = static_cast<const T*>(p.prefix) + t * p.pre_st + h * p.pre_sh;
    const T* suf = static_cast<const T*>(p.suffix) + t * p.suf_st + h * p.suf_sh;
    float* out_lse = p.out_lse != nullptr ? p.out_lse + h * p.olse_sh + t * p.olse_st : nullptr;

    if (t >= p.merge_tokens) {
      // No prefix for this token: the suffix, and its LSE, unchanged.
      pass_through<Codec, Out>(out, suf, D, scale);
      if (out_lse != nullptr) {
        *out_lse = p.suffix_lse[h * p.slse_sh + t * p.slse_st];
      }
      continue;
    }

    float lp = p.prefix_lse[h * p.plse_sh + t * p.plse_st];
    float ls = p.suffix_lse[h * p.slse_sh + t * p.slse_st];
    // +inf is treated as -inf (an empty / fully masked partial result).
    lp = lp == kPosInf ? kNegInf : lp;
    ls = ls == kPosInf ? kNegInf : ls;
    const float m = lp > ls ? lp : ls;

    if (m == kNegInf) {
      // Both partial results are empty: pass the prefix through.
      pass_through<Codec, Out>(out, pre, D, scale);
      if (out_lse != nullptr) {
        *out_lse = kNegInf;
      }
      continue;
    }

    const double ps = exp_no_libm(static_cast<double>(lp) - m);
    const double ss = exp_no_libm(static_cast<double>(ls) - m);
    const double sum = ps + ss;
    const float wp = static_cast<float>(ps / sum);
    const float ws = static_cast<float>(ss / sum);

    for (int64_t i = 0; i < D; ++i) {
      const float v = Codec::load(pre[i]) * wp + Codec::load(suf[i]) * ws;
      out[i] = Out::store(v, scale);
    }
    if (out_lse != nullptr) {
      // NaN LSEs propagate (m is NaN or sum is NaN).
      *out_lse = (sum == sum) ? static_cast<float>(m + log_no_libm(sum))
                              : std::numeric_limits<float>::quiet_NaN();
    }
  }
}

using RowFn = void (*)(const MergeParams&, int64_t, int64_t);

// One entry per (input dtype, output) pair. Same-dtype outputs are cloned for
// AVX2 and the baseline (their loops vectorise). FP8 outputs are not: the
// exact conversion branches, and clang does not emit the inline functions it
// calls (torch's Float8 constructors) for target_clones functions, which
// left them as undefined symbols.
#define STABLEOPS_MERGE_ROWS_FN(ATTR, NAME, CODEC, OUT)                  \
  ATTR void NAME(const MergeParams& p, int64_t begin, int64_t end) {    \
    merge_rows<CODEC, OUT>(p, begin, end);                              \
  }
STABLEOPS_MERGE_ROWS_FN(STABLEOPS_CPU_CLONES, merge_rows_f32, F32Codec, SameOut<F32Codec>)
STABLEOPS_MERGE_ROWS_FN(STABLEOPS_CPU_CLONES, merge_rows_f16, F16Codec, SameOut<F16Codec>)
STABLEOPS_MERGE_ROWS_FN(STABLEOPS_CPU_CLONES, merge_rows_bf16, BF16Codec, SameOut<BF16Codec>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_f32_fn, F32Codec, Fp8Out<fp8::Format::kE4M3FN>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_f16_fn, F16Codec, Fp8Out<fp8::Format::kE4M3FN>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_bf16_fn, BF16Codec, Fp8Out<fp8::Format::kE4M3FN>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_f32_fnuz, F32Codec, Fp8Out<fp8::Format::kE4M3FNUZ>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_f16_fnuz, F16Codec, Fp8Out<fp8::Format::kE4M3FNUZ>)
STABLEOPS_MERGE_ROWS_FN(, merge_rows_bf16_fnuz, BF16Codec, Fp8Out<fp8::Format::kE4M3FNUZ>)
#undef STABLEOPS_MERGE_ROWS_FN

RowFn pick_row_fn(ScalarType in, bool fp8_output, fp8::Format format) {
  // [input dtype][output: same, e4m3fn, e4m3fnuz]
  static constexpr RowFn kTable[3][3] = {
      {&merge_rows_f32, &merge_rows_f32_fn, &merge_rows_f32_fnuz},
      {&merge_rows_f16, &merge_rows_f16_fn, &merge_rows_f16_fnuz},
      {&merge_rows_bf16, &merge_rows_bf16_fn, &merge_rows_bf16_fnuz},
  };
  const int i = in == ScalarType::Float ? 0 : in == ScalarType::Half ? 1 : 2;
  const int j = !fp8_output ? 0 : format == fp8::Format::kE4M3FN ? 1 : 2;
  return kTable[i][j];
}

} // namespace

void merge_attn_states_cpu(
    torch::stable::Tensor& output,
    std::optional<torch::stable::Tensor> output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse,
    std::optional<int64_t> prefill_tokens_with_context,
    const std::optional<torch::stable::Tensor>& output_scale) {
  const MergeAttnStatesDims dims = check_merge_attn_states_inputs(
      output,
      output_lse,
      prefix_output,
      prefix_lse,
      suffix_output,
      suffix_lse,
      prefill_tokens_with_context,
      output_scale,
      cpu_kernel_device(output));
  if (validation_only(output)) {
    return;
  }
  const int64_t rows = dims.num_tokens * dims.num_heads;
  if (rows == 0) {
    return;
  }
  const bool has_out_lse = output_lse.has_value() && output_lse->defined();

  MergeParams p{};
  p.out = output.mutable_data_ptr();
  p.prefix = prefix_output.const_data_ptr();
  p.suffix = suffix_output.const_data_ptr();
  p.out_st = output.stride(0);
  p.out_sh = output.stride(1);
  p.pre_st = prefix_output.stride(0);
  p.pre_sh = prefix_output.stride(1);
  p.suf_st = suffix_output.stride(0);
  p.suf_sh = suffix_output.stride(1);
  p.prefix_lse = static_cast<const float*>(prefix_lse.const_data_ptr());
  p.plse_sh = prefix_lse.stride(0);
  p.plse_st = prefix_lse.stride(1);
  p.suffix_lse = static_cast<const float*>(suffix_lse.const_data_ptr());
  p.slse_sh = suffix_lse.stride(0);
  p.slse_st = suffix_lse.stride(1);
  if (has_out_lse) {
    p.out_lse = static_cast<float*>(output_lse->mutable_data_ptr());
    p.olse_sh = output_lse->stride(0);
    p.olse_st = output_lse->stride(1);
  }
  p.num_heads = dims.num_heads;
  p.head_size = dims.head_size;
  p.merge_tokens = dims.merge_tokens;
  p.out_scale = dims.fp8_output
      ? *static_cast<const float*>(output_scale->const_data_ptr())
      : 1.0f;

  const RowFn fn = pick_row_fn(prefix_output.scalar_type(), dims.fp8_output, dims.fp8_format);

  // About 16K value elements per task keeps scheduling overhead negligible.
  const int64_t grain = std::max<int64_t>(1, 16384 / dims.head_size);
  torch::stable::parallel_for(
      0, rows, grain, [&p, fn](int64_t begin, int64_t end) {
        fn(p, begin, end);
      });
}

} // namespace stableops
