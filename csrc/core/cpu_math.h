// CPU building blocks shared by the CPU kernels of stableops.
//
// * STABLEOPS_CPU_CLONES: on x86-64 (GCC/Clang, no -mavx2 already) a row
//   function is compiled twice, for AVX2 and the baseline, and the loader
//   picks the best one via an IFUNC. Define STABLEOPS_NO_TARGET_CLONES to
//   disable.
// * STABLEOPS_CPU_F16C (same conditions): f16_to_f32 / f32_to_f16 convert
//   float16 arrays with the F16C instructions, in functions compiled for
//   AVX2 + F16C (STABLEOPS_F16C_TARGET); call them only when has_f16c().
//   They give F16Codec's bits (NaN: a quiet NaN of the same sign, payload
//   aside; tests/cpu_math_test.cpp checks all 65536 halves and a sweep of
//   floats), so a kernel may take either path.
// * Codecs between storage (float32, float16, bfloat16) and float32, written
//   with integer bit operations so loops using them auto-vectorise.
// * exp/log without libm: glibc >= 2.27/2.29 gives expf/logf/exp/log new
//   symbol versions, which would break the GLIBC <= 2.17 floor of the built
//   library (the ABI audit checks it).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(STABLEOPS_NO_TARGET_CLONES) && !defined(__AVX2__)
#define STABLEOPS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define STABLEOPS_CPU_CLONES
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(STABLEOPS_NO_TARGET_CLONES)
#include <cpuid.h>
#include <immintrin.h>
#define STABLEOPS_CPU_F16C 1
#define STABLEOPS_F16C_TARGET __attribute__((target("avx2,f16c")))
#else
#define STABLEOPS_CPU_F16C 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define STABLEOPS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define STABLEOPS_ALWAYS_INLINE inline
#endif

namespace stableops {
namespace cpu {

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

#if STABLEOPS_CPU_F16C
// True when this CPU (and its OS) can run STABLEOPS_F16C_TARGET code. Asks
// CPUID itself: __builtin_cpu_supports("f16c") reads a feature bit that the
// sysroot's libgcc (GCC 10) never sets. Asked once per process (CPUID is a
// serialising instruction; kernels call this per op call).
inline bool detect_f16c() {
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) {
    return false;
  }
  const bool f16c = (c >> 29) & 1u;
  const bool avx = (c >> 28) & 1u;
  const bool osxsave = (c >> 27) & 1u;
  if (!(f16c && avx && osxsave)) {
    return false;
  }
  // The OS saves the YMM registers (XCR0 bits 1 and 2).
  unsigned xcr0_lo = 0;
  unsigned xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) {
    return false;
  }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    return false;
  }
  return (b >> 5) & 1u; // AVX2
}

inline bool has_f16c() {
  static const bool supported = detect_f16c();
  return supported;
}

// n float16 values (bits) -> float32, 8 per F16C instruction; exact.
STABLEOPS_F16C_TARGET inline void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    dst[i] = F16Codec::load(src[i]);
  }
}

// n float32 values -> float16 bits, round to nearest even, as
// F16Codec::store (a NaN: quiet, same sign; the hardware keeps the top of its
// payload, F16Codec does not, and the default NaN gives 0x7e00 in both).
STABLEOPS_F16C_TARGET inline void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) {
    dst[i] = F16Codec::store(src[i]);
  }
}
#endif // STABLEOPS_CPU_F16C

// ---------------------------------------------------------------------------
// exp / log without libm (see the file comment). Accuracy is far better than
// float32 needs: both are evaluated in double.
// ---------------------------------------------------------------------------

// exp(x) for x <= 0 or moderate positive x; returns 0 for x = -inf.
inline double exp_no_libm(double x) {
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
inline double log_no_libm(double x) {
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
// float32 exp / erf / erfc without libm, branch free so that loops calling
// them auto-vectorise (plain scalar code: integer bit tricks and selects, no
// fma, so the AVX2 clone and the baseline give the same bits). Accuracy
// against float64 (tests/cpu_math_test.cpp, every 97th float32 of the whole
// range, subnormal results included): see the bounds there. NaN propagates;
// exp_f32(+inf) = +inf, exp_f32(-inf) = 0, erf_f32(+-inf) = +-1,
// erfc_f32(+inf) = 0, erfc_f32(-inf) = 2.
// ---------------------------------------------------------------------------

// Selects that keep a NaN x (the comparison is false for NaN).
STABLEOPS_ALWAYS_INLINE float min_keep_nan(float x, float hi) {
  return x > hi ? hi : x;
}
STABLEOPS_ALWAYS_INLINE float max_keep_nan(float x, float lo) {
  return x < lo ? lo : x;
}

// e^(hi + lo) for |lo| <= 0.1, lo a correction term that hi's rounding would
// lose. Cody-Waite reduction hi + lo = n ln2 + r (|r| <= ln2/2 + |lo|, n
// rounded with the 1.5 * 2^23 trick), Cephes' degree-7 polynomial for e^r,
// and 2^n applied in two factors so that results in the subnormal range
// round once.
STABLEOPS_ALWAYS_INLINE float exp_f32_hilo(float hi, float lo) {
  // e^-104 < 2^-150 rounds to 0; e^89 > FLT_MAX overflows to inf.
  const float xc = min_keep_nan(max_keep_nan(hi, -104.0f), 89.0f);
  constexpr float kMagic = 12582912.0f; // 1.5 * 2^23
  const float t = (xc + lo) * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const int32_t ni = static_cast<int32_t>(f32_bits(t) - f32_bits(kMagic));
  float r = xc - n * 0.693359375f; // ln2 high part: exact, n * it too
  r = r - n * -2.12194440e-4f; // ln2 - 0.693359375
  r = r + lo;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  // n in [-150, 129]: 2^n = 2^n1 * 2^n2 with both factors normal.
  const int32_t n1 = ni / 2;
  const int32_t n2 = ni - n1;
  const float s1 = bits_f32(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = bits_f32(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

// e^x.
STABLEOPS_ALWAYS_INLINE float exp_f32(float x) {
  return exp_f32_hilo(x, 0.0f);
}

// erf(x) = x + x * erf_small(x) for |x| < 0.875 (degree 5 in x^2, fit to
// erf(x)/x - 1 against float64).
STABLEOPS_ALWAYS_INLINE float erf_small(float x) {
  const float x2 = x * x;
  float s = -6.203601370e-04f;
  s = s * x2 + 5.032254383e-03f;
  s = s * x2 - 2.679151855e-02f;
  s = s * x2 + 1.128245741e-01f;
  s = s * x2 - 3.761255145e-01f;
  s = s * x2 + 1.283791512e-01f;
  return s;
}

// erfc(x) = e^-t^2 H(v) / (1 + 2t) for t = |x| >= 0.875 (2 - that for x < 0),
// with v = (t - 2) / (t + 2) in [-1, 1) and H (degree 10) fit to
// erfc(t) e^(t^2) (1 + 2t) on [0, 11] (a smooth, bounded function: N. Juffa's
// form). e^-t^2 takes t^2 = th^2 + (t - th)(t + th), th = t to 12
// significant bits, so th^2 is exact and t^2's rounding (up to 2^-24 * 121
// relative) never reaches the result. Relative accuracy down to the
// subnormal range (erfc(10) = 2e-45); erfc(11) < 2^-150 rounds to 0.
STABLEOPS_ALWAYS_INLINE float erfc_f32(float x) {
  const float a = bits_f32(f32_bits(x) & 0x7fffffffu);
  const float t = min_keep_nan(a, 11.0f); // no inf - inf below
  const float v = (t - 2.0f) / (t + 2.0f);
  float h = 3.719332017e-05f;
  h = h * v - 3.430651559e-04f;
  h = h * v - 1.251803595e-03f;
  h = h * v + 1.254513511e-03f;
  h = h * v + 8.631615900e-03f;
  h = h * v - 8.039208129e-03f;
  h = h * v - 5.420286581e-02f;
  h = h * v + 1.640525907e-01f;
  h = h * v - 1.660315692e-01f;
  h = h * v - 9.276387841e-02f;
  h = h * v + 1.276978374e+00f;
  const float th = bits_f32(f32_bits(t) & 0xfffff000u);
  const float e = exp_f32_hilo(-(th * th), -((t - th) * (t + th)));
  const float r = e * h / (1.0f + 2.0f * t);
  const float tail = bits_f32(
      blend(select_mask(x < 0.0f), f32_bits(2.0f - r), f32_bits(r)));
  // |x| < 0.875: 1 - erf(x) from erf's series, more accurate there.
  const float small = (1.0f - x) - x * erf_small(x);
  return bits_f32(
      blend(select_mask(a < 0.875f), f32_bits(small), f32_bits(tail)));
}

// erf(x): x + x * erf_small(x) below |x| = 0.875 (relative accuracy near 0),
// sign(x) (1 - erfc(|x|)) above; both are evaluated and one is selected.
STABLEOPS_ALWAYS_INLINE float erf_f32(float x) {
  const uint32_t sign = f32_bits(x) & 0x80000000u;
  const float a = bits_f32(f32_bits(x) & 0x7fffffffu);
  const float small = x + x * erf_small(x);
  const float large = bits_f32(f32_bits(1.0f - erfc_f32(a)) | sign);
  return bits_f32(
      blend(select_mask(a < 0.875f), f32_bits(small), f32_bits(large)));
}

} // namespace cpu
} // namespace stableops
