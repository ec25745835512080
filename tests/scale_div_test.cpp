// csrc/core/scale_div.h on the host: for every scale in the fast range, the
// FP8 (e4m3fn, e4m3fnuz) and INT8 codes of ScaleDivisor::quotient(x) equal
// those of the IEEE division x / s, and the quotient's bits equal x / s
// wherever |x / s| >= 2^-20 and x / s is finite. Inputs: every bfloat16 and
// every float16 value, and random float32 bit patterns, against powers of
// two across the whole (positive) fast range, its edges, and log-uniform
// random scales.
// Also: the range check itself (what is fast and what is not). Exits
// non-zero on the first kind of failure, after printing a few examples.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "csrc/core/fp8.h"
#include "csrc/core/scale_div.h"

namespace {

using stableops::ScaleDivisor;
namespace fp8 = stableops::fp8;

int failures = 0;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// float16 bits -> float (exact).
float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return from_bits(sign | 0x7f800000u | (m << 13));
  if (e != 0) return from_bits(sign | ((e + 112u) << 23) | (m << 13));
  const float v = std::ldexp(static_cast<float>(m), -24);
  return sign ? -v : v;
}

// The INT8 code the kernels store for quotient v and zero point azp.
int int8_code(float v, float azp) {
  float t = std::nearbyint(v) + azp;  // round half to even (default mode)
  if (t != t) t = 0.0f;
  t = std::fmin(std::fmax(t, -128.0f), 127.0f);
  return static_cast<int>(t);
}

void report(const char* what, float x, float s, float want, float got) {
  ++failures;
  if (failures <= 20) {
    std::printf("FAIL %s: x=%a s=%a x/s=%a (0x%08" PRIx32 ") quotient=%a (0x%08" PRIx32 ")\n",
                what, x, s, want, to_bits(want), got, to_bits(got));
  }
}

uint64_t checked = 0;

void check(float x, const ScaleDivisor& d) {
  ++checked;
  const float want = x / d.s;
  const float got = d.quotient(x);
  if (fp8::quantize<fp8::Format::kE4M3FN>(got) != fp8::quantize<fp8::Format::kE4M3FN>(want)) {
    report("e4m3fn code", x, d.s, want, got);
  }
  if (fp8::quantize<fp8::Format::kE4M3FNUZ>(got) != fp8::quantize<fp8::Format::kE4M3FNUZ>(want)) {
    report("e4m3fnuz code", x, d.s, want, got);
  }
  for (const float azp : {0.0f, 3.0f, -100.0f}) {
    if (int8_code(got, azp) != int8_code(want, azp)) {
      report("int8 code", x, d.s, want, got);
    }
  }
  if (std::isnan(want) != std::isnan(got)) {
    report("NaN-ness", x, d.s, want, got);
  } else if (std::isfinite(want) && std::fabs(want) >= 0x1p-20f && to_bits(got) != to_bits(want)) {
    report("quotient bits", x, d.s, want, got);
  }
}

}  // namespace

int main() {
  // The range check.
  struct RangeCase {
    float s;
    bool fast;
  };
  const RangeCase ranges[] = {
      {0x1p-80f, true},          {-0x1p-80f, false},        {0x1p100f, true},
      {-0x1p100f, false},        {1.0f, true},              {-1.0f, false},
      {0x1.fffffep-81f, false},
      {0x1.000002p100f, false},  {0.0f, false},             {-0.0f, false},
      {INFINITY, false},         {-INFINITY, false},        {NAN, false},
      {0x1p-140f, false},        {0x1p120f, false},
  };
  for (const RangeCase& c : ranges) {
    if (ScaleDivisor(c.s).fast != c.fast) {
      ++failures;
      std::printf("FAIL range: s=%a fast=%d, want %d\n", c.s, ScaleDivisor(c.s).fast, c.fast);
    }
  }

  std::vector<float> scales;
  for (int e = -80; e <= 100; e += 3) {
    scales.push_back(std::ldexp(1.0f, e));
    if (e < 100) scales.push_back(std::ldexp(1.0f, e) * 1.5f);
  }
  scales.push_back(0x1p-80f);
  scales.push_back(0x1.fffffep99f);
  scales.push_back(0x1p100f);
  scales.push_back(0x1.000002p-80f);
  // Typical quantisation scales: amax / 448, amax / 240, amax / 127.
  for (const float amax : {1.0f, 3.14159f, 17.5f, 448.0f, 1e-3f, 65504.0f}) {
    scales.push_back(amax / 448.0f);
    scales.push_back(amax / 240.0f);
    scales.push_back(amax / 127.0f);
  }
  std::mt19937_64 rng(20261203);
  std::uniform_real_distribution<double> log2_scale(-80.0, 100.0);
  for (int i = 0; i < 150; ++i) {
    scales.push_back(static_cast<float>(std::exp2(log2_scale(rng))));
  }

  for (const float s : scales) {
    const ScaleDivisor d(s);
    if (!d.fast) {
      ++failures;
      std::printf("FAIL: test scale %a is outside the fast range\n", s);
      continue;
    }
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
      check(from_bits(h << 16), d);  // bfloat16
      check(half_to_float(static_cast<uint16_t>(h)), d);
    }
  }
  // Random float32 values (every exponent, NaN and inf included).
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<size_t> pick(0, scales.size() - 1);
  for (int i = 0; i < 20000000; ++i) {
    check(from_bits(bits(rng)), ScaleDivisor(scales[pick(rng)]));
  }

  std::printf("%" PRIu64 " quotients over %zu scales checked, %d failures\n", checked,
              scales.size(), failures);
  return failures == 0 ? 0 : 1;
}
