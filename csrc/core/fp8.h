// FP8 (E4M3) conversion shared by the quantization, KV-cache and attention
// kernels, on the CPU and on CUDA and HIP devices.
//
// Two formats, chosen by the output tensor's dtype:
//   * e4m3fn   (torch.float8_e4m3fn, OCP; CUDA, MI350/gfx950): max 448,
//     NaN 0x7f/0xff, a negative zero;
//   * e4m3fnuz (torch.float8_e4m3fnuz; MI300/gfx942): max 240, NaN 0x80, no
//     negative zero.
// A quantised value is clamp(v, -MAX, MAX) (NaN kept, as torch.clamp does)
// converted with round-to-nearest-even. The bits equal torch's own
// conversion of the same float32 value (`t.clamp(-MAX, MAX).to(dtype)`) under
// every torch >= 2.11: torch 2.13 changed what an out-of-range value becomes
// (NaN before, the largest finite value since), but a clamped value is never
// out of range, and both versions turn NaN into the format's NaN.
//
// encode() is the exact conversion of a clamped value, written branch-free
// so CPU loops using it vectorise (and always inlined: clang does not emit
// out-of-line copies of inline functions called from target_clones
// functions, which is what torch's own Float8 constructors became there).
// tests/test_fp8_encoding.py checks it against torch's conversion. On the
// device, quantize2() uses the hardware conversion
// where the architecture has one that provably gives the same bits: CUDA
// sm_89 and newer for e4m3fn (cvt.rn.satfinite.e4m3x2.f32: round to nearest
// even, saturating, after which only NaN's sign differs from torch, fixed
// here). Everything else uses the exact software conversion, HIP included:
// no AMD GPU exists here to prove that the gfx942/gfx950 instructions match
// torch bit for bit.
#pragma once

#include <cstdint>

#include <cstring>

// The dtype side (format_of) is host code; a GPU device pass, which
// has no torch headers (gpu_compat.h, STABLEOPS_DEVICE_PASS), skips it.
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define STABLEOPS_FP8_DTYPES 1
#include <torch/headeronly/core/ScalarType.h>
#else
#define STABLEOPS_FP8_DTYPES 0
#endif

#if defined(__CUDACC__) && !defined(USE_ROCM) && !defined(__HIP_PLATFORM_AMD__)
#include <cuda_fp8.h>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define STABLEOPS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define STABLEOPS_HOST_DEVICE inline __attribute__((always_inline))
#endif

namespace stableops {
namespace fp8 {

enum class Format : uint8_t { kE4M3FN, kE4M3FNUZ };

template <Format F>
struct Traits;

// kBias: exponent bias. kMinNormal: float32 bits of the smallest normal
// value. kDenormMagic: float32 bits of 2^(23 + log2(the subnormal step)):
// adding it rounds a value below kMinNormal to a multiple of the subnormal
// step (round to nearest even), and the low bits are then the encoding.
template <>
struct Traits<Format::kE4M3FN> {
  static constexpr float kMax = 448.0f;
  static constexpr uint32_t kBias = 7;
  static constexpr uint32_t kMinNormal = UINT32_C(121) << 23;  // 2^-6
  static constexpr uint32_t kDenormMagic = UINT32_C(141) << 23;  // 2^14
};

template <>
struct Traits<Format::kE4M3FNUZ> {
  static constexpr float kMax = 240.0f;
  static constexpr uint32_t kBias = 8;
  static constexpr uint32_t kMinNormal = UINT32_C(120) << 23;  // 2^-7
  static constexpr uint32_t kDenormMagic = UINT32_C(140) << 23;  // 2^13
};

#if STABLEOPS_FP8_DTYPES
// The format of an FP8 dtype; false if `dtype` is not one of the two.
inline bool format_of(torch::headeronly::ScalarType dtype, Format* out) {
  if (dtype == torch::headeronly::ScalarType::Float8_e4m3fn) {
    *out = Format::kE4M3FN;
    return true;
  }
  if (dtype == torch::headeronly::ScalarType::Float8_e4m3fnuz) {
    *out = Format::kE4M3FNUZ;
    return true;
  }
  return false;
}
#endif

inline float max_of(Format f) {
  return f == Format::kE4M3FN ? Traits<Format::kE4M3FN>::kMax
                              : Traits<Format::kE4M3FNUZ>::kMax;
}

// clamp(x, -max, max), keeping NaN (torch.clamp semantics).
STABLEOPS_HOST_DEVICE float clamp(float x, float max) {
  return x != x ? x : (x > max ? max : (x < -max ? -max : x));
}

STABLEOPS_HOST_DEVICE uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

STABLEOPS_HOST_DEVICE float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// The encoding of `x`, which must already be clamped to [-MAX, MAX] or NaN
// (round to nearest even; the same bits as torch's conversion). Branch-free.
template <Format F>
STABLEOPS_HOST_DEVICE uint8_t encode(float x) {
  using Tr = Traits<F>;
  const uint32_t u = float_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  // Normal: rebias the exponent and round the 20 dropped mantissa bits to
  // nearest even (add 0x7ffff, plus one when the kept mantissa is odd).
  const uint32_t normal =
      (a + ((Tr::kBias - 127u) << 23) + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  // Subnormal: the float addition rounds to a multiple of the step.
  const uint32_t subnormal =
      float_bits(bits_float(a) + bits_float(Tr::kDenormMagic)) - Tr::kDenormMagic;
  uint32_t r = a < Tr::kMinNormal ? subnormal : normal;
  const bool is_nan = a > 0x7f800000u;
  if constexpr (F == Format::kE4M3FN) {
    r = (is_nan ? 0x7fu : r) | sign;
  } else {
    // No negative zero; NaN is 0x80 whatever the sign.
    r = is_nan ? 0x80u : (r == 0u ? 0u : (r | sign));
  }
  return static_cast<uint8_t>(r);
}

// Quantises one value: the bits of clamp(x, -MAX, MAX) in format F.
template <Format F>
STABLEOPS_HOST_DEVICE uint8_t quantize(float x) {
  return encode<F>(clamp(x, Traits<F>::kMax));
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// Whether device code compiled now converts format F with the hardware
// instruction (see the file comment): CUDA sm_89 and newer, e4m3fn.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) && \
    !defined(USE_ROCM) && !defined(__HIP_PLATFORM_AMD__)
template <Format F>
inline constexpr bool kHardware = F == Format::kE4M3FN;
#else
template <Format F>
inline constexpr bool kHardware = false;
#endif

// Two codes (a at the low byte) equal to quantize<F>(a) | quantize<F>(b) << 8,
// except that with the hardware conversion (kHardware<F>) a NaN becomes 0x7f
// whatever its sign, where torch keeps the sign (0xff). In that format 0x7f
// is only ever NaN, so a caller can find the rare byte and fix it; quantize2
// does.
template <Format F>
__device__ __forceinline__ uint16_t quantize2_nan_unsigned(float a, float b) {
  if constexpr (kHardware<F>) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) && \
    !defined(USE_ROCM) && !defined(__HIP_PLATFORM_AMD__)
    // .satfinite gives what clamping to +-448 first gives: values beyond 448
    // (infinities included) saturate to +-448, in-range values round to
    // nearest even; NaN stays NaN.
    return static_cast<uint16_t>(
        __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
#endif
  }
  return static_cast<uint16_t>(quantize<F>(a) | (quantize<F>(b) << 8));
}

// Quantises two values into two bytes (a at the low address): the bits of
// quantize<F>(a) and quantize<F>(b), with the hardware conversion where it
// matches torch (see the file comment).
template <Format F>
__device__ __forceinline__ uint16_t quantize2(float a, float b) {
  uint16_t bits = quantize2_nan_unsigned<F>(a, b);
  if constexpr (kHardware<F>) {
    if (a != a) bits = (bits & 0xff00u) | quantize<F>(a);
    if (b != b) bits = (bits & 0x00ffu) | (quantize<F>(b) << 8);
  }
  return bits;
}

// The codes of N values (N a multiple of 4), four to a word (v[4k] in the
// low byte of w[k]): the bits of quantize<F>, with the hardware conversion
// where it matches torch. A NaN's sign is restored only when a word holds
// 0x7f (never a finite code of a hardware format): no branch per value.
template <Format F, int N>
__device__ __forceinline__ void quantize_words(const float (&v)[N], uint32_t (&w)[N / 4]) {
  static_assert(N % 4 == 0, "whole words");
  bool nan = false;
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    w[k] = quantize2_nan_unsigned<F>(v[4 * k], v[4 * k + 1]) |
        (static_cast<uint32_t>(quantize2_nan_unsigned<F>(v[4 * k + 2], v[4 * k + 3])) << 16);
    if constexpr (kHardware<F>) {
      const uint32_t y = w[k] ^ 0x7f7f7f7fu;  // a zero byte where w[k] has 0x7f
      nan = nan || ((y - 0x01010101u) & ~y & 0x80808080u) != 0u;
    }
  }
  if constexpr (kHardware<F>) {
    if (nan) {
#pragma unroll
      for (int k = 0; k < N / 4; ++k) {
        w[k] = quantize<F>(v[4 * k]) | (quantize<F>(v[4 * k + 1]) << 8) |
            (quantize<F>(v[4 * k + 2]) << 16) |
            (static_cast<uint32_t>(quantize<F>(v[4 * k + 3])) << 24);
      }
    }
  }
}
#endif

} // namespace fp8
} // namespace stableops
