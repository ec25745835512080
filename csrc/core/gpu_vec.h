// GPU building blocks shared by the .cu kernels of stableops (CUDA and HIP;
// included only from .cu sources).
//
// Pack<T>: one 16-byte memory access (uint4) as 4 float32 or 8 float16 /
// bfloat16 values, converted to and from float32 (round to nearest even).
#pragma once

#include <cstdint>

#include "csrc/gpu_compat.h"

namespace stableops {
namespace gpu {

template <typename T>
struct Pack;

template <>
struct Pack<float> {
  static constexpr int kElems = 4;
  __device__ __forceinline__ static void to_float(const uint4& v, float (&f)[kElems]) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ __forceinline__ static uint4 from_float(const float (&f)[kElems]) {
    uint4 v;
    v.x = __float_as_uint(f[0]);
    v.y = __float_as_uint(f[1]);
    v.z = __float_as_uint(f[2]);
    v.w = __float_as_uint(f[3]);
    return v;
  }
};

template <>
struct Pack<stableops_half> {
  static constexpr int kElems = 8;
  __device__ __forceinline__ static void to_float(const uint4& v, float (&f)[kElems]) {
    const stableops_half2* h = reinterpret_cast<const stableops_half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __half22float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
  __device__ __forceinline__ static uint4 from_float(const float (&f)[kElems]) {
    uint4 v;
    stableops_half2* h = reinterpret_cast<stableops_half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    }
    return v;
  }
};

template <>
struct Pack<stableops_bf16> {
  static constexpr int kElems = 8;
  __device__ __forceinline__ static void to_float(const uint4& v, float (&f)[kElems]) {
    const stableops_bf162* h = reinterpret_cast<const stableops_bf162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __bfloat1622float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
  __device__ __forceinline__ static uint4 from_float(const float (&f)[kElems]) {
    uint4 v;
    stableops_bf162* h = reinterpret_cast<stableops_bf162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    }
    return v;
  }
};

} // namespace gpu
} // namespace stableops
