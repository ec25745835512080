// CPU building blocks of the quantization kernels (fp8_quant_cpu.cpp,
// int8_quant_cpu.cpp): branch-free element functions and row loops that
// GCC/Clang auto-vectorise, and the per-dtype dispatch of row functions
// compiled for AVX2 and the baseline (STABLEOPS_CPU_CLONES).
//
// Every quotient is an IEEE float32 division x / s (bit-exact with torch's
// float32 division; never a multiplication by a reciprocal). No libm.
#pragma once

#include <cstdint>
#include <limits>

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/cpu_math.h"
#include "csrc/core/fp8.h"
#include "csrc/quantization/quant_check.h"

namespace stableops {
namespace quant_cpu {

using cpu::bits_f32;
using cpu::f32_bits;

// Round half to even (torch.round) of any float32, without libm: below 2^23
// adding and subtracting 2^23 rounds to an integer in the current (nearest
// even) mode; from 2^23 up every float is an integer already; NaN stays NaN.
STABLEOPS_ALWAYS_INLINE float rne(float v) {
  const uint32_t sign = f32_bits(v) & 0x80000000u;
  const float a = bits_f32(f32_bits(v) & 0x7fffffffu);
  const float r = bits_f32(f32_bits((a + 0x1p23f) - 0x1p23f) | sign);
  return a < 0x1p23f ? r : v;
}

// int8 saturation of an integer-valued float: NaN -> 0, else clamped to
// [-128, 127].
STABLEOPS_ALWAYS_INLINE int8_t sat_int8(float v) {
  v = v != v ? 0.0f : v;
  v = v < -128.0f ? -128.0f : v;
  v = v > 127.0f ? 127.0f : v;
  return static_cast<int8_t>(static_cast<int32_t>(v));
}

// int32 saturation of an integer-valued float, kept as a float: NaN -> 0,
// else clamped to [-2^31, 2^31 - 128] (the largest float below 2^31).
STABLEOPS_ALWAYS_INLINE float sat_int32(float v) {
  v = v != v ? 0.0f : v;
  v = v < -0x1p31f ? -0x1p31f : v;
  v = v > 2147483520.0f ? 2147483520.0f : v;
  return v;
}

// max / min that propagate NaN (torch.clamp / torch.amax semantics).
STABLEOPS_ALWAYS_INLINE float max_nan(float a, float b) {
  return (a != a || a > b) ? a : b;
}
STABLEOPS_ALWAYS_INLINE float min_nan(float a, float b) {
  return (a != a || a < b) ? a : b;
}

// max |x| of a row as float32 bits with the sign cleared: unsigned order of
// these bits is the order of |x|, with NaN above +inf, so the maximum
// propagates NaN like torch.amax.
template <class Codec>
STABLEOPS_ALWAYS_INLINE uint32_t absmax_bits(
    const typename Codec::storage_t* x,
    int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = f32_bits(Codec::load(x[i])) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

// Order-preserving int32 key of a float (for min/max reductions in integer
// registers, which vectorise); its inverse.
STABLEOPS_ALWAYS_INLINE int32_t order_key(float f) {
  const int32_t b = static_cast<int32_t>(f32_bits(f));
  return b ^ ((b >> 31) & 0x7fffffff);
}
STABLEOPS_ALWAYS_INLINE float from_order_key(int32_t k) {
  return bits_f32(static_cast<uint32_t>(k ^ ((k >> 31) & 0x7fffffff)));
}

// min and max of a row; NaN in the row makes both NaN.
template <class Codec>
STABLEOPS_ALWAYS_INLINE void min_max(
    const typename Codec::storage_t* x,
    int64_t n,
    float* mn,
    float* mx) {
  int32_t lo = order_key(std::numeric_limits<float>::infinity());
  int32_t hi = order_key(-std::numeric_limits<float>::infinity());
  uint32_t nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = Codec::load(x[i]);
    const int32_t k = order_key(v);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
    nan |= static_cast<uint32_t>((f32_bits(v) & 0x7fffffffu) > 0x7f800000u);
  }
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  *mn = nan ? kNaN : from_order_key(lo);
  *mx = nan ? kNaN : from_order_key(hi);
}

// out[i] = fp8(clamp(x[i] / s, -MAX, MAX)).
template <class Codec, fp8::Format F>
STABLEOPS_ALWAYS_INLINE void fp8_row(
    const typename Codec::storage_t* x,
    uint8_t* out,
    int64_t n,
    float s) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = fp8::quantize<F>(Codec::load(x[i]) / s);
  }
}

// out[i] = sat_int8(rne(x[i] / s) + azp).
template <class Codec>
STABLEOPS_ALWAYS_INLINE void int8_row(
    const typename Codec::storage_t* x,
    int8_t* out,
    int64_t n,
    float s,
    float azp) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = sat_int8(rne(Codec::load(x[i]) / s) + azp);
  }
}

// Rows per parallel_for task: about 16K elements keeps scheduling overhead
// negligible.
inline int64_t grain_rows(int64_t hidden) {
  return hidden > 0 && hidden < 16384 ? 16384 / hidden : 1;
}

// Defines, for `impl<Codec>(const Args&, int64_t begin, int64_t end)` (a row
// range), one STABLEOPS_CPU_CLONES function per input dtype and
// `name(dtype)` returning the one for `dtype`.
#define STABLEOPS_QUANT_CPU_ROWS(name, impl, Args)                             \
  STABLEOPS_CPU_CLONES void name##_f32(const Args& a, int64_t b, int64_t e) { \
    impl<cpu::F32Codec>(a, b, e);                                               \
  }                                                                             \
  STABLEOPS_CPU_CLONES void name##_f16(const Args& a, int64_t b, int64_t e) { \
    impl<cpu::F16Codec>(a, b, e);                                               \
  }                                                                             \
  STABLEOPS_CPU_CLONES void name##_bf16(                                      \
      const Args& a, int64_t b, int64_t e) {                                    \
    impl<cpu::BF16Codec>(a, b, e);                                              \
  }                                                                             \
  void (*name(torch::headeronly::ScalarType dtype))(                          \
      const Args&, int64_t, int64_t) {                                        \
    switch (dtype) {                                                          \
      case torch::headeronly::ScalarType::Float:                              \
        return &name##_f32;                                                   \
      case torch::headeronly::ScalarType::Half:                               \
        return &name##_f16;                                                   \
      case torch::headeronly::ScalarType::BFloat16:                           \
        return &name##_bf16;                                                  \
      default:                                                                \
        STD_TORCH_CHECK(false, #name ": unreachable input dtype");            \
    }                                                                         \
  }

// Runs `fn(args, begin, end)` over the rows in parallel.
template <class Args>
void for_rows(
    void (*fn)(const Args&, int64_t, int64_t),
    const Args& args,
    const QuantRows& rows) {
  if (rows.num_rows == 0) {
    return;
  }
  torch::stable::parallel_for(
      0, rows.num_rows, grain_rows(rows.hidden),
      [fn, &args](int64_t begin, int64_t end) { fn(args, begin, end); });
}

}  // namespace quant_cpu
}  // namespace stableops
