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
// from_float_exact() is torch's own conversion (the header-only
// torch::headeronly::Float8_e4m3fn / Float8_e4m3fnuz constructors): exact on
// every backend. On the device, from_float2() uses the hardware conversion
// where the architecture has one that provably gives the same bits: CUDA
// sm_89 and newer for e4m3fn (cvt.rn.satfinite.e4m3x2.f32: round to nearest
// even, saturating, after which only NaN's sign differs from torch, fixed
// here). Everything else uses the exact software conversion, HIP included:
// no AMD GPU exists here to prove that the gfx942/gfx950 instructions match
// torch bit for bit.
#pragma once

#include <cstdint>

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Float8_e4m3fn.h>
#include <torch/headeronly/util/Float8_e4m3fnuz.h>

#if defined(__CUDACC__) && !defined(USE_ROCM) && !defined(__HIP_PLATFORM_AMD__)
#include <cuda_fp8.h>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define STABLEOPS_HOST_DEVICE __host__ __device__
#else
#define STABLEOPS_HOST_DEVICE
#endif

namespace stableops {
namespace fp8 {

enum class Format : uint8_t { kE4M3FN, kE4M3FNUZ };

template <Format F>
struct Traits;

template <>
struct Traits<Format::kE4M3FN> {
  static constexpr float kMax = 448.0f;
  static constexpr torch::headeronly::ScalarType kDtype =
      torch::headeronly::ScalarType::Float8_e4m3fn;
};

template <>
struct Traits<Format::kE4M3FNUZ> {
  static constexpr float kMax = 240.0f;
  static constexpr torch::headeronly::ScalarType kDtype =
      torch::headeronly::ScalarType::Float8_e4m3fnuz;
};

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

inline float max_of(Format f) {
  return f == Format::kE4M3FN ? Traits<Format::kE4M3FN>::kMax
                              : Traits<Format::kE4M3FNUZ>::kMax;
}

// clamp(x, -max, max), keeping NaN (torch.clamp semantics).
STABLEOPS_HOST_DEVICE inline float clamp(float x, float max) {
  return x != x ? x : (x > max ? max : (x < -max ? -max : x));
}

// torch's conversion of a float32 value (exact, any input).
template <Format F>
STABLEOPS_HOST_DEVICE inline uint8_t from_float_exact(float x) {
  if constexpr (F == Format::kE4M3FN) {
    return torch::headeronly::Float8_e4m3fn(x).x;
  } else {
    return torch::headeronly::Float8_e4m3fnuz(x).x;
  }
}

// Quantises one value: the bits of clamp(x, -MAX, MAX) in format F.
template <Format F>
STABLEOPS_HOST_DEVICE inline uint8_t quantize(float x) {
  return from_float_exact<F>(clamp(x, Traits<F>::kMax));
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// Quantises two values into two bytes (a at the low address), with the
// hardware conversion where it matches torch (see the file comment).
template <Format F>
__device__ inline uint16_t quantize2(float a, float b) {
  a = clamp(a, Traits<F>::kMax);
  b = clamp(b, Traits<F>::kMax);
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) && \
    !defined(USE_ROCM) && !defined(__HIP_PLATFORM_AMD__)
  if constexpr (F == Format::kE4M3FN) {
    uint16_t bits = static_cast<uint16_t>(
        __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
    // The instruction's NaN is 0x7f whatever the sign; torch keeps the sign.
    if (a != a) bits = (bits & 0xff00u) | from_float_exact<F>(a);
    if (b != b) bits = (bits & 0x00ffu) | (from_float_exact<F>(b) << 8);
    return bits;
  }
#endif
  return static_cast<uint16_t>(
      from_float_exact<F>(a) | (from_float_exact<F>(b) << 8));
}
#endif

} // namespace fp8
} // namespace stableops
