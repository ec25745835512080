// GPU building blocks shared by the .cu kernels of stableops (CUDA and HIP;
// included only from .cu sources).
//
// Pack<T>: one 16-byte memory access (uint4) as 4 float32 or 8 float16 /
// bfloat16 values, converted to and from float32 (round to nearest even).
// store16: one 16-byte store.
#pragma once

#include <cstdint>
#include <cstring>

#include "csrc/gpu_compat.h"

namespace stableops {
namespace gpu {

// Stores 16 bytes at p (16-byte aligned) with one instruction. nvcc
// compiled `*reinterpret_cast<uint4*>(p) = v` into four 4-byte stores in
// the activation kernels (seen in their sm_90a SASS: four times the store
// instructions, each a quarter of a sector per thread), whatever way the
// pack was assembled, so CUDA states the vector store in PTX (a plain weak
// st.global.v4; __stwb's .wb form compiles to a strong store). HIP's
// compiler emits one 16-byte store for the plain assignment.
__device__ __forceinline__ void store16(void* p, const uint4& v) {
#if STABLEOPS_ROCM
  *reinterpret_cast<uint4*>(p) = v;
#else
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}

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
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const stableops_half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, sizeof(w[i]));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

template <>
struct Pack<stableops_bf16> {
  static constexpr int kElems = 8;
  // A bfloat16 is the high half of its float32 (exact, NaNs included), so
  // each word gives its two values with a shift and a mask. nvcc compiled
  // __bfloat1622float2 into byte permutes of 16-bit halves and kept them
  // apart (150 PRMT and spilled 16-bit values in rms_norm's K = 4 kernel,
  // where fp16 needed neither).
  __device__ __forceinline__ static void to_float(const uint4& v, float (&f)[kElems]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);  // element 2i: the low half
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ __forceinline__ static uint4 from_float(const float (&f)[kElems]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const stableops_bf162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, sizeof(w[i]));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

} // namespace gpu
} // namespace stableops
