// Accuracy of csrc/core/cpu_math.h's float32 exp_f32 / erf_f32 / erfc_f32 against the
// float64 libm (this test binary may use libm; the shipped library may not),
// over every 97th float32 of the ranges that matter plus the special values.
// Also: the F16C float16 conversions (f16_to_f32 / f32_to_f16) give the bits
// of the portable F16Codec, on a CPU that has F16C (the kernels pick either).
// Prints the worst error of each and exits non-zero on a failure.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "csrc/core/cpu_math.h"

namespace {

using stableops::cpu::erf_f32;
using stableops::cpu::erfc_f32;
using stableops::cpu::exp_f32;

int failures = 0;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// |got - want| in units of the float32 ulp at want (2^-149 in the subnormal
// range); a wrong inf or NaN counts as an infinite error.
double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) {
    return std::isnan(want) == std::isnan(got) ? 0.0 : INFINITY;
  }
  // A reference beyond FLT_MAX rounds to inf in float32.
  if (std::isinf(static_cast<float>(want)) || std::isinf(got)) {
    return got == static_cast<float>(want) ? 0.0 : INFINITY;
  }
  const double a = std::fabs(want);
  const int e = a == 0.0 ? -1000 : std::ilogb(a);
  const double ulp = std::ldexp(1.0, e - 23 > -149 ? e - 23 : -149);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

template <class F32, class F64>
void sweep(const char* name, F32 f32, F64 f64, float lo, float hi, double max_ulp) {
  double worst = 0.0;
  float worst_x = 0.0f;
  uint64_t n = 0;
  // Every 97th bit pattern of [lo, hi] (both signs of the range).
  for (uint64_t u = 0; u <= 0xffffffffull; u += 97) {
    const float x = from_bits(static_cast<uint32_t>(u));
    if (!(x >= lo && x <= hi)) {
      continue;
    }
    ++n;
    const double err = ulp_error(f32(x), f64(static_cast<double>(x)));
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  std::printf(
      "%s on [%g, %g]: %" PRIu64 " points, max error %.3f ulp at x = %.9g "
      "(bound %.1f)\n",
      name, lo, hi, n, worst, worst_x, max_ulp);
  if (!(worst <= max_ulp)) {
    std::printf("FAIL: %s error above the bound\n", name);
    ++failures;
  }
}

void expect(const char* what, float got, double want, double max_ulp = 0.0) {
  if (!(ulp_error(got, want) <= max_ulp)) {
    std::printf("FAIL: %s = %.9g, expected %.9g\n", what, got, want);
    ++failures;
  }
}

#if STABLEOPS_CPU_F16C
using stableops::cpu::F16Codec;

bool is_nan16(uint16_t h) {
  return (h & 0x7fffu) > 0x7c00u;
}

// Every half through both loads; every 61st float (and the half range's
// rounding boundaries, where ties to even matter) through both stores, in
// arrays whose length is not a multiple of 8 so the scalar tail runs too.
void check_f16c() {
  if (!stableops::cpu::has_f16c()) {
    std::printf("F16C: not on this CPU; only the portable codec runs here\n");
    return;
  }
  constexpr int64_t kHalves = 65536;
  static uint16_t halves[kHalves + 3];
  static float floats[kHalves + 3];
  for (int64_t i = 0; i < kHalves + 3; ++i) {
    halves[i] = static_cast<uint16_t>(i);
  }
  stableops::cpu::f16_to_f32(halves, floats, kHalves + 3);
  int64_t bad = 0;
  for (int64_t i = 0; i < kHalves + 3; ++i) {
    const float want = F16Codec::load(halves[i]);
    uint32_t a;
    uint32_t b;
    std::memcpy(&a, &floats[i], 4);
    std::memcpy(&b, &want, 4);
    if (a != b && !(std::isnan(want) && std::isnan(floats[i]) && (a >> 31) == (b >> 31))) {
      if (bad++ < 5) {
        std::printf("FAIL: f16_to_f32(0x%04x) = 0x%08x, F16Codec 0x%08x\n", halves[i], a, b);
      }
    }
  }
  // Floats: a sweep of bit patterns plus each half's midpoints to its
  // neighbours (ties) and one float either side of them.
  constexpr int64_t kChunk = 4099;
  static float in[kChunk];
  static uint16_t got[kChunk];
  int64_t n = 0;
  int64_t checked = 0;
  auto flush = [&]() {
    stableops::cpu::f32_to_f16(in, got, n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = F16Codec::store(in[i]);
      if (got[i] != want && !(is_nan16(got[i]) && is_nan16(want) && (got[i] >> 15) == (want >> 15))) {
        if (bad++ < 5) {
          uint32_t u;
          std::memcpy(&u, &in[i], 4);
          std::printf("FAIL: f32_to_f16(0x%08x) = 0x%04x, F16Codec 0x%04x\n", u, got[i], want);
        }
      }
    }
    checked += n;
    n = 0;
  };
  auto add = [&](float f) {
    in[n++] = f;
    if (n == kChunk) flush();
  };
  for (uint64_t u = 0; u <= 0xffffffffull; u += 61) {
    add(from_bits(static_cast<uint32_t>(u)));
  }
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const double lo = F16Codec::load(static_cast<uint16_t>(h | sign));
      const double hi = F16Codec::load(static_cast<uint16_t>((h + 1) | sign));
      const float mid = static_cast<float>((lo + hi) / 2);
      add(mid);
      add(std::nextafter(mid, 0.0f));
      add(std::nextafter(mid, INFINITY));
    }
  }
  flush();
  std::printf("F16C: 65539 halves and %" PRId64 " floats against F16Codec: %" PRId64 " mismatches\n",
              checked, bad);
  if (bad) {
    ++failures;
  }
}
#endif

} // namespace

int main() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto exp64 = [](double x) { return std::exp(x); };
  const auto erf64 = [](double x) { return std::erf(x); };

  // exp: the whole range from underflow to overflow, subnormal results too.
  sweep("exp_f32", exp_f32, exp64, -110.0f, 95.0f, 1.5);
  sweep("exp_f32 (small |x|)", exp_f32, exp64, -1.0f, 1.0f, 1.5);
  expect("exp_f32(0)", exp_f32(0.0f), 1.0);
  expect("exp_f32(+inf)", exp_f32(inf), INFINITY);
  expect("exp_f32(-inf)", exp_f32(-inf), 0.0);
  expect("exp_f32(nan)", exp_f32(nan), NAN);
  expect("exp_f32(-nan)", exp_f32(-nan), NAN);
  expect("exp_f32(89)", exp_f32(89.0f), INFINITY);
  expect("exp_f32(1000)", exp_f32(1000.0f), INFINITY);
  expect("exp_f32(-104)", exp_f32(-104.0f), 0.0);
  expect("exp_f32(-1e30)", exp_f32(-1e30f), 0.0);

  // erf: saturates to +-1 beyond |x| ~ 3.92.
  sweep("erf_f32", erf_f32, erf64, -6.0f, 6.0f, 2.0);
  sweep("erf_f32 (large |x|)", erf_f32, erf64, -1e30f, 1e30f, 2.0);
  expect("erf_f32(0)", erf_f32(0.0f), 0.0);
  expect("erf_f32(+inf)", erf_f32(inf), 1.0);
  expect("erf_f32(-inf)", erf_f32(-inf), -1.0);
  expect("erf_f32(nan)", erf_f32(nan), NAN);
  expect("erf_f32(1e-40)", erf_f32(1e-40f), std::erf(1e-40), 1.0);
  const float neg_zero = erf_f32(-0.0f);
  if (!(neg_zero == 0.0f && std::signbit(neg_zero))) {
    std::printf("FAIL: erf_f32(-0) = %g, expected -0\n", neg_zero);
    ++failures;
  }

  // erfc: relative accuracy down to the subnormal range (erfc(10) = 2e-45),
  // 2 for x << 0.
  const auto erfc64 = [](double x) { return std::erfc(x); };
  sweep("erfc_f32", erfc_f32, erfc64, -6.0f, 11.0f, 4.0);
  sweep("erfc_f32 (large |x|)", erfc_f32, erfc64, -1e30f, 1e30f, 4.0);
  expect("erfc_f32(0)", erfc_f32(0.0f), 1.0);
  expect("erfc_f32(+inf)", erfc_f32(inf), 0.0);
  expect("erfc_f32(-inf)", erfc_f32(-inf), 2.0);
  expect("erfc_f32(nan)", erfc_f32(nan), NAN);
  expect("erfc_f32(12)", erfc_f32(12.0f), 0.0);

#if STABLEOPS_CPU_F16C
  check_f16c();
#endif

  std::printf(failures ? "%d FAILED\n" : "all passed\n", failures);
  return failures ? 1 : 0;
}
