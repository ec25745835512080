// x / s for kernels that quantise every value of a row by one scale s (FP8
// and INT8 quantisation, FP8 KV caches), without a division per value.
//
// Why: the IEEE float32 division nvcc emits for `x / s` is a reciprocal,
// four FMAs, a range check and a branch to a slow path, per value. In the
// quantisation kernels those branches keep the compiler from interleaving
// the values of a thread, and the kernels ran at 55-70% of the copy
// bandwidth on H200 (docs/PERFORMANCE.md).
//
// What: ScaleDivisor d(s) computes r = 1 / s once (IEEE, correctly rounded);
// d.quotient(x) is then q = x * r, corrected by Markstein's step
// q' = q - (q * s - x) * r (two FMAs): q' is the correctly rounded x / s
// whenever r is within half an ulp of 1 / s, q within one ulp of x / s, and
// the remainder q * s - x is exact, which holds for normal quotients of
// values |x| >= 2^-100. d.fast says whether s is in the range where this is
// used at all, 2^-80 <= s <= 2^100 (positive: r normal, and the signs of
// zero come out right; callers take the plain division for the whole row
// otherwise, a uniform branch). Within it:
//   * x = +-0: +-0, as x / s (the written form keeps the sign: q - (+0) * r
//     with q = +-0);
//   * x * r infinite (x = +-inf, or a quotient at the top of the float
//     range): x * r, the infinity of x / s or a value that clamps or
//     saturates to the same code;
//   * x NaN: NaN (the GPU's arithmetic NaN, as its division gives);
//   * |x| < 2^-100: the quotient may be off by an ulp, but it is below
//     2^-100 / 2^-80 = 2^-20 in magnitude with the sign of x / s, so its FP8
//     code (smallest step 2^-10) and INT8 code are those of x / s.
// So every FP8 and INT8 code computed from d.quotient(x) equals the code of
// x / s. //tests:scale_div_test checks exactly that on the host (this header
// is also host code): every bfloat16 and float16 value and millions of
// random floats against many scales, both FP8 formats and INT8, plus the
// quotient's bits wherever |x / s| >= 2^-20; the GPU tests compare the
// kernels' codes with torch's own `x / s`.
#pragma once

#include <cmath>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define STABLEOPS_SCALE_DIV_FN __host__ __device__ __forceinline__
#else
#define STABLEOPS_SCALE_DIV_FN inline
#endif

namespace stableops {

struct ScaleDivisor {
  float s;
  float r;
  bool fast;

  STABLEOPS_SCALE_DIV_FN explicit ScaleDivisor(float divisor)
      : s(divisor), r(1.0f / divisor) {
    fast = divisor >= 0x1p-80f && divisor <= 0x1p100f;  // false for NaN
  }

  // x / s as described above; only when `fast`.
  STABLEOPS_SCALE_DIV_FN float quotient(float x) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    const float q = __fmul_rn(x, r);  // never contracted into an FMA
#else
    const float q = x * r;
#endif
    const float corrected = fmaf(-fmaf(q, s, -x), r, q);
    return fabsf(q) < INFINITY ? corrected : q;
  }
};

} // namespace stableops
