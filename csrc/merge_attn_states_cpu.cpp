// CPU kernel for stableops::merge_attn_states (contract: see ops.h and
// merge_attn_states_check.h). Stable ABI only.
//
// * fp32 / fp16 / bf16 values, all arithmetic in float32.
// * Parallel over the num_tokens * num_heads rows with
//   torch::stable::parallel_for (torch_parallel_for shim, PyTorch >= 2.10), so
//   it honours torch.set_num_threads() and needs no thread pool of its own.
// * The inner loop over head_size is plain branch-free scalar code that GCC
//   and Clang auto-vectorise (half/bfloat16 conversions are written with
//   integer bit operations instead of calls, so they vectorise too). The
//   library is built for baseline x86-64; on x86-64 the row loop is compiled
//   twice with target_clones ("avx2" and "default") and the loader picks the
//   best one via an IFUNC. Define STABLEOPS_NO_TARGET_CLONES to disable.
// * exp/log are implemented here (in double, then rounded to float) instead of
//   calling libm: glibc >= 2.27/2.29 gives expf/logf/exp/log new symbol
//   versions, which would break the GLIBC <= 2.17 floor of the built library.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "merge_attn_states_check.h"
#include "ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(STABLEOPS_NO_TARGET_CLONES) && !defined(__AVX2__)
#define STABLEOPS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define STABLEOPS_CPU_CLONES
#endif

#if defined(__GNUC__) || defined(__clang__)
#define STABLEOPS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define STABLEOPS_ALWAYS_INLINE inline
#endif

namespace stableops {
namespace {

using torch::headeronly::ScalarType;

// ---------------------------------------------------------------------------
// Bit helpers and dtype codecs (storage <-> float32).
// ---------------------------------------------------------------------------

STABLEOPS_ALWAYS_INLINE uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

STABLEOPS_ALWAYS_INLINE float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Branch-free select. Written with masks rather than `?:` because GCC turns
// some ternaries into branches and then refuses to if-convert (and vectorise)
// loops containing floating-point operations under -ftrapping-math.
STABLEOPS_ALWAYS_INLINE uint32_t select_mask(bool c) {
  return 0u - static_cast<uint32_t>(c);
}

STABLEOPS_ALWAYS_INLINE uint32_t blend(uint32_t mask, uint32_t a, uint32_t b) {
  return (a & mask) | (b & ~mask);
}

struct F32Codec {
  using storage_t = float;
  static STABLEOPS_ALWAYS_INLINE float load(float v) {
    return v;
  }
  static STABLEOPS_ALWAYS_INLINE float store(float v) {
    return v;
  }
};

struct BF16Codec {
  using storage_t = uint16_t;
  static STABLEOPS_ALWAYS_INLINE float load(uint16_t v) {
    return bits_f32(static_cast<uint32_t>(v) << 16);
  }
  // Round to nearest even; NaN stays a (quiet) NaN with its sign.
  static STABLEOPS_ALWAYS_INLINE uint16_t store(float f) {
    const uint32_t u = f32_bits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x0040u;
    const uint32_t is_nan = select_mask((u & 0x7fffffffu) > 0x7f800000u);
    return static_cast<uint16_t>(blend(is_nan, nan, rounded));
  }
};

struct F16Codec {
  using storage_t = uint16_t;
  // IEEE binary16 -> binary32, exact, branch free.
  static STABLEOPS_ALWAYS_INLINE float load(uint16_t h) {
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t em = static_cast<uint32_t>(h) & 0x7fffu; // exp+mantissa
    // Normal numbers: rebias the exponent (15 -> 127).
    const uint32_t normal = (em << 13) + ((127u - 15u) << 23);
    // Inf / NaN: all-ones exponent.
    const uint32_t inf_nan = (em << 13) | 0x7f800000u;
    // Zero / subnormal: value = mantissa * 2^-24, exact in float32.
    const uint32_t subnormal =
        f32_bits(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
    uint32_t r = blend(select_mask(em >= 0x7c00u), inf_nan, normal);
    r = blend(select_mask(em < 0x0400u), subnormal, r);
    return bits_f32(r | sign);
  }
  // binary32 -> binary16, round to nearest even, overflow to inf, NaN -> qNaN.
  static STABLEOPS_ALWAYS_INLINE uint16_t store(float f) {
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    // |f| >= 2^-14 (half normal range): rebias, round on the 13 dropped bits,
    // and saturate to inf (0x7c00) when the exponent overflows.
    uint32_t normal = (a - ((127u - 15u) << 23) + 0x0fffu + ((a >> 13) & 1u)) >> 13;
    normal = normal < 0x7c00u ? normal : 0x7c00u;
    // |f| < 2^-14: adding 0.5f (ulp 2^-24) rounds |f| to a multiple of the
    // half subnormal step with round-to-nearest-even; the low mantissa bits
    // are then the half encoding (0x400 == smallest normal, also correct).
    const float abs_f = bits_f32(a);
    const uint32_t subnormal = f32_bits(abs_f + 0.5f) - 0x3f000000u;
    uint32_t r = blend(select_mask(a < 0x38800000u), subnormal, normal);
    r = blend(select_mask(a > 0x7f800000u), 0x7e00u, r);
    return static_cast<uint16_t>(r | sign);
  }
};

// ---------------------------------------------------------------------------
// exp / log without libm (see the file comment). Accuracy is far better than
// float32 needs: both are evaluated in double.
// ---------------------------------------------------------------------------

// exp(x) for x <= 0 or moderate positive x; returns 0 for x = -inf.
double exp_no_libm(double x) {
  if (!(x == x)) {
    return x; // NaN
  }
  if (x < -745.2) {
    return 0.0;
  }
  if (x > 709.7) {
    return std::numeric_limits<double>::infinity();
  }
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  // x = k*ln2 + r, |r| <= ln2/2.
  const double kd = x * kInvLn2 + (x < 0 ? -0.5 : 0.5);
  const int64_t k = static_cast<int64_t>(kd); // truncation toward zero
  const double r = (x - static_cast<double>(k) * kLn2Hi) -
      static_cast<double>(k) * kLn2Lo;
  // exp(r) by Taylor series (|r| <= 0.347: 14 terms give < 1e-17 error).
  double term = 1.0;
  double sum = 1.0;
  for (int i = 1; i <= 14; ++i) {
    term *= r / static_cast<double>(i);
    sum += term;
  }
  // Scale by 2^k in two steps so subnormal results are produced correctly.
  const int64_t k1 = k / 2;
  const int64_t k2 = k - k1;
  auto pow2 = [](int64_t e) {
    const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  };
  return sum * pow2(k1) * pow2(k2);
}

// Natural log of a finite, positive, normal x (the kernel calls it with
// 1 <= x <= 2).
double log_no_libm(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  int64_t e = static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL; // m in [1,2)
  double m;
  std::memcpy(&m, &bits, sizeof(m));
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e += 1;
  }
  // log(m) = 2 atanh(z), z = (m-1)/(m+1), |z| <= 0.1716.
  const double z = (m - 1.0) / (m + 1.0);
  const double z2 = z * z;
  double term = z;
  double sum = 0.0;
  for (int i = 1; i <= 41; i += 2) {
    sum += term / static_cast<double>(i);
    term *= z2;
  }
  constexpr double kLn2 = 6.93147180559945309417e-01;
  return 2.0 * sum + static_cast<double>(e) * kLn2;
}

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
};

template <class Codec>
STABLEOPS_ALWAYS_INLINE void merge_rows(
    const MergeParams& p,
    int64_t begin,
    int64_t end) {
  using T = typename Codec::storage_t;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  const int64_t H = p.num_heads;
  const int64_t D = p.head_size;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t t = row / H;
    const int64_t h = row - t * H;
    float lp = p.prefix_lse[h * p.plse_sh + t * p.plse_st];
    float ls = p.suffix_lse[h * p.slse_sh + t * p.slse_st];
    // +inf is treated as -inf (an empty / fully masked partial result).
    lp = lp == kPosInf ? kNegInf : lp;
    ls = ls == kPosInf ? kNegInf : ls;
    const float m = lp > ls ? lp : ls;

    T* out = static_cast<T*>(p.out) + t * p.out_st + h * p.out_sh;
    const T* pre = static_cast<const T*>(p.prefix) + t * p.pre_st + h * p.pre_sh;
    const T* suf = static_cast<const T*>(p.suffix) + t * p.suf_st + h * p.suf_sh;

    if (m == kNegInf) {
      // Both partial results are empty: pass the prefix through.
      if (out != pre) {
        for (int64_t i = 0; i < D; ++i) {
          out[i] = pre[i];
        }
      }
      if (p.out_lse != nullptr) {
        p.out_lse[h * p.olse_sh + t * p.olse_st] = kNegInf;
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
      out[i] = Codec::store(v);
    }
    if (p.out_lse != nullptr) {
      // NaN LSEs propagate (m is NaN or sum is NaN).
      p.out_lse[h * p.olse_sh + t * p.olse_st] =
          (sum == sum) ? static_cast<float>(m + log_no_libm(sum))
                       : std::numeric_limits<float>::quiet_NaN();
    }
  }
}

STABLEOPS_CPU_CLONES void merge_rows_f32(
    const MergeParams& p,
    int64_t begin,
    int64_t end) {
  merge_rows<F32Codec>(p, begin, end);
}

STABLEOPS_CPU_CLONES void merge_rows_f16(
    const MergeParams& p,
    int64_t begin,
    int64_t end) {
  merge_rows<F16Codec>(p, begin, end);
}

STABLEOPS_CPU_CLONES void merge_rows_bf16(
    const MergeParams& p,
    int64_t begin,
    int64_t end) {
  merge_rows<BF16Codec>(p, begin, end);
}

} // namespace

void merge_attn_states_cpu(
    torch::stable::Tensor& output,
    std::optional<torch::stable::Tensor> output_lse,
    const torch::stable::Tensor& prefix_output,
    const torch::stable::Tensor& prefix_lse,
    const torch::stable::Tensor& suffix_output,
    const torch::stable::Tensor& suffix_lse) {
  const MergeAttnStatesDims dims = check_merge_attn_states_inputs(
      output,
      output_lse,
      prefix_output,
      prefix_lse,
      suffix_output,
      suffix_lse,
      torch::headeronly::DeviceType::CPU);
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

  using RowFn = void (*)(const MergeParams&, int64_t, int64_t);
  RowFn fn = nullptr;
  switch (output.scalar_type()) {
    case ScalarType::Float:
      fn = &merge_rows_f32;
      break;
    case ScalarType::Half:
      fn = &merge_rows_f16;
      break;
    case ScalarType::BFloat16:
      fn = &merge_rows_bf16;
      break;
    default:
      STD_TORCH_CHECK(false, "merge_attn_states: unreachable dtype");
  }

  // About 16K value elements per task keeps scheduling overhead negligible.
  const int64_t grain = std::max<int64_t>(1, 16384 / dims.head_size);
  torch::stable::parallel_for(
      0, rows, grain, [&p, fn](int64_t begin, int64_t end) {
        fn(p, begin, end);
      });
}

} // namespace stableops
