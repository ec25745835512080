// The activation ops of stableops, defined once for every backend.
//
// Each op is a functor templated on a math policy M that supplies
//   M::exp(x) (float32), M::div(a, b) (a / b) and M::inv_ge1(d) (1 / d for
//   d >= 1):
// the CPU kernel instantiates it with csrc/core/cpu_math.h's libm-free,
// vectorisable functions, the GPU kernel with gpu_compat.h's fast forms.
// erfc is built here from those (erfc_cheb_abs), the same on every backend. The
// functor also carries the op's description (Info: name, output argument,
// memory layout, scalar arguments), read by the one validation of the family
// (activation_check.h), so the kernels of both backends and the fake accept
// the same inputs.
//
// Layouts (d = last dim of the output, input rows of 2d for gated ops):
//   kSplit        out[j] = op(in[j], in[d + j])        (x[..., :d], x[..., d:])
//   kInterleaved  out[j] = op(in[2j], in[2j + 1])      (x[..., 0::2], x[..., 1::2])
//   kElementwise  out[j] = op(in[j])                   (same shape)
// All math is float32, in forms without cancellation for negative x:
//   0.5 x (1 + tanh(z))        = x sigmoid(2z)          (one exp, no tanh)
//   0.5 x (1 + erf(x / sqrt2)) = 0.5 x erfc(-x / sqrt2)
// (exact algebra; the left sides lose all precision once 1 + tanh or 1 + erf
// falls below float32's resolution of 1, e.g. gelu(-7) * up = -0 * up).
#pragma once

#include <cmath>
#include <cstdint>

// The math: device code in GPU sources. Constructors (from the op's Scalars)
// are host code.
#if defined(__CUDACC__) || defined(__HIP__)
#define STABLEOPS_ACT_FN __device__ __forceinline__
#else
#define STABLEOPS_ACT_FN inline __attribute__((always_inline))
#endif

namespace stableops {
namespace activation {

enum class Layout { kSplit, kInterleaved, kElementwise };

// Bits of Info::scalars: which scalar arguments an op takes.
inline constexpr uint32_t kLimit = 1u;
inline constexpr uint32_t kThreshold = 2u;
inline constexpr uint32_t kAlpha = 4u;

struct Info {
  const char* name; // op name: the prefix of every error message
  const char* out_name; // the schema's name of the output argument
  Layout layout;
  uint32_t scalars; // kLimit | kThreshold | kAlpha
};

// The scalar arguments, as the schema passes them; an op reads the ones its
// Info declares (validated by check_activation).
struct Scalars {
  double limit = 0.0;
  double threshold = 0.0;
  double alpha = 0.0;
};

// One id per op: the CPU kernel switches on it outside its inner loops.
enum class OpId {
  kSiluAndMul,
  kMulAndSilu,
  kSiluAndMulWithClamp,
  kGeluAndMul,
  kGeluTanhAndMul,
  kFatreluAndMul,
  kSwigluoaiAndMul,
  kGeluNew,
  kGeluFast,
  kGeluQuick,
};

// ---------------------------------------------------------------------------
// Building blocks. Comparisons are written so that a NaN input propagates.
// ---------------------------------------------------------------------------

// v * sigmoid(z) = v / (1 + e^-z): 0 (with v's sign) once e^-z overflows, NaN
// for v = -inf, z = -inf (as the formula gives in float64).
template <class M>
STABLEOPS_ACT_FN float mul_sigmoid(float v, float z) {
  return M::div(v, 1.0f + M::exp(-z));
}

template <class M>
STABLEOPS_ACT_FN float silu(float x) {
  return mul_sigmoid<M>(x, x);
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class M>
STABLEOPS_ACT_FN float gelu_tanh(float x) {
  constexpr float k2Beta = 1.5957691216057308f; // 2 * sqrt(2 / pi)
  return mul_sigmoid<M>(x, k2Beta * (x + 0.044715f * (x * x * x)));
}

// erfc(x) from the Chebyshev fit of Numerical Recipes (2nd ed., section 6.2,
// erfcc; fractional error below 1.2e-7 for every x): t = 1 / (1 + |x|/2),
// erfc(|x|) = t exp(-x^2 + P(t)), erfc(x) = 2 - erfc(|x|) for x < 0. In
// float32 with M's exp and division the fit's 1.2e-7 grows with x^2: the
// rounding of -x^2 + P(t) and the exp's own error (the GPU's fast exp:
// 2 + 1.2 x^2 ulp) add about 1e-7 * x^2 relative (1.6e-6 at |x| = 4, where
// erfc is 1.5e-8); results below float32's range flush to 0. One division
// and one exp, no branch: cheaper than erfcf (GPU) and cpu::erfc_f32 (CPU),
// whose 4 ulp the activation tolerances (1e-5 relative for float32) do not
// need.
// erfc_cheb_abs(z) is erfc(z) for z = |x| >= 0 (erfc(x) = 2 - erfc(|x|) for
// x < 0; gelu_erf applies that); erfc(+inf) = 0, NaN propagates.
// M::inv_ge1(d) is 1 / d for d >= 1.
template <class M>
STABLEOPS_ACT_FN float erfc_cheb_abs(float z) {
  const float t = M::inv_ge1(1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * M::exp(p - z * z);
}

// 0.5 x (1 + erf(x / sqrt(2))) = 0.5 x erfc(-x / sqrt(2)), with
// erfc(-x / sqrt(2)) = erfc_cheb_abs(|x| / sqrt(2)) for x <= 0 and 2 minus that
// for x > 0 (NaN: x > 0 is false, the NaN propagates).
template <class M>
STABLEOPS_ACT_FN float gelu_erf(float x) {
  const float r = erfc_cheb_abs<M>(fabsf(x) * 0.70710678118654752f);
  return 0.5f * x * (x > 0.0f ? 2.0f - r : r);
}

// min(x, hi), NaN kept.
STABLEOPS_ACT_FN float clamp_max(float x, float hi) {
  return x > hi ? hi : x;
}

// clamp(x, -limit, limit) for limit >= 0, NaN kept.
STABLEOPS_ACT_FN float clamp_abs(float x, float limit) {
  const float lo = x < -limit ? -limit : x;
  return lo > limit ? limit : lo;
}

// ---------------------------------------------------------------------------
// Gated ops: operator()(a, b), a from the first (gate) half, b from the
// second (up) half.
// ---------------------------------------------------------------------------

template <class M>
struct SiluAndMul {
  static constexpr Info kInfo{"silu_and_mul", "result", Layout::kSplit, 0};
  static constexpr OpId kId = OpId::kSiluAndMul;
  explicit SiluAndMul(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return silu<M>(a) * b;
  }
};

template <class M>
struct MulAndSilu {
  static constexpr Info kInfo{"mul_and_silu", "out", Layout::kSplit, 0};
  static constexpr OpId kId = OpId::kMulAndSilu;
  explicit MulAndSilu(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return a * silu<M>(b);
  }
};

// silu(g) * clamp(b, -limit, limit) with g = min(a, limit).
template <class M>
struct SiluAndMulWithClamp {
  static constexpr Info kInfo{
      "silu_and_mul_with_clamp", "result", Layout::kSplit, kLimit};
  static constexpr OpId kId = OpId::kSiluAndMulWithClamp;
  float limit;
  explicit SiluAndMulWithClamp(const Scalars& s)
      : limit(static_cast<float>(s.limit)) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return silu<M>(clamp_max(a, limit)) * clamp_abs(b, limit);
  }
};

template <class M>
struct GeluAndMul {
  static constexpr Info kInfo{"gelu_and_mul", "out", Layout::kSplit, 0};
  static constexpr OpId kId = OpId::kGeluAndMul;
  explicit GeluAndMul(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return gelu_erf<M>(a) * b;
  }
};

template <class M>
struct GeluTanhAndMul {
  static constexpr Info kInfo{"gelu_tanh_and_mul", "out", Layout::kSplit, 0};
  static constexpr OpId kId = OpId::kGeluTanhAndMul;
  explicit GeluTanhAndMul(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return gelu_tanh<M>(a) * b;
  }
};

// (a if a > threshold else 0) * b; a NaN a counts as not above the threshold.
template <class M>
struct FatreluAndMul {
  static constexpr Info kInfo{
      "fatrelu_and_mul", "out", Layout::kSplit, kThreshold};
  static constexpr OpId kId = OpId::kFatreluAndMul;
  float threshold;
  explicit FatreluAndMul(const Scalars& s)
      : threshold(static_cast<float>(s.threshold)) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    return (a > threshold ? a : 0.0f) * b;
  }
};

// gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit),
// (u + 1) * g * sigmoid(alpha * g); gate and up interleaved.
template <class M>
struct SwigluoaiAndMul {
  static constexpr Info kInfo{
      "swigluoai_and_mul", "out", Layout::kInterleaved, kAlpha | kLimit};
  static constexpr OpId kId = OpId::kSwigluoaiAndMul;
  float alpha;
  float limit;
  explicit SwigluoaiAndMul(const Scalars& s)
      : alpha(static_cast<float>(s.alpha)),
        limit(static_cast<float>(s.limit)) {}
  STABLEOPS_ACT_FN float operator()(float a, float b) const {
    const float g = clamp_max(a, limit);
    return (clamp_abs(b, limit) + 1.0f) * mul_sigmoid<M>(g, alpha * g);
  }
};

// ---------------------------------------------------------------------------
// Elementwise ops: operator()(x).
// ---------------------------------------------------------------------------

template <class M>
struct GeluNew {
  static constexpr Info kInfo{"gelu_new", "out", Layout::kElementwise, 0};
  static constexpr OpId kId = OpId::kGeluNew;
  explicit GeluNew(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float x) const {
    return gelu_tanh<M>(x);
  }
};

// 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2))): gelu_new's function
// with its own rounding order.
template <class M>
struct GeluFast {
  static constexpr Info kInfo{"gelu_fast", "out", Layout::kElementwise, 0};
  static constexpr OpId kId = OpId::kGeluFast;
  explicit GeluFast(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float x) const {
    constexpr float k2Beta = 1.5957691216f; // 2 * 0.7978845608
    return mul_sigmoid<M>(x, k2Beta * x * (1.0f + 0.044715f * x * x));
  }
};

// x * sigmoid(1.702 x).
template <class M>
struct GeluQuick {
  static constexpr Info kInfo{"gelu_quick", "out", Layout::kElementwise, 0};
  static constexpr OpId kId = OpId::kGeluQuick;
  explicit GeluQuick(const Scalars&) {}
  STABLEOPS_ACT_FN float operator()(float x) const {
    return mul_sigmoid<M>(x, 1.702f * x);
  }
};

} // namespace activation
} // namespace stableops
