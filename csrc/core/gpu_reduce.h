// Lane exchange and sum reductions across GPU threads, correct for a warp of
// 32 (NVIDIA, AMD RDNA) and a wavefront of 64 (AMD CDNA): STABLEOPS_WARP_SIZE
// is the compile target's. Included only from .cu sources (CUDA and HIP).
//
// Every lane of a warp must call these together (no lane may have returned):
// launch blocks whose size is a multiple of 64 and keep idle threads in the
// reduction with a zero.
#pragma once

#include "csrc/gpu_compat.h"

namespace stableops {
namespace gpu {

// The value `v` of the lane whose index is this lane's XOR lane_mask, for a
// 32-bit type (float, or unsigned words: raw bits such as packed
// half/bfloat16 pairs travel unconverted).
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int lane_mask) {
  static_assert(sizeof(V) == 4, "shfl_xor moves 32-bit values");
#if STABLEOPS_ROCM
  return __shfl_xor(v, lane_mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#endif
}

// Sum over aligned groups of `width` consecutive lanes; every lane gets its
// group's sum. `width` is a power of two <= 32, so a group never straddles a
// warp of 32 or a wavefront of 64.
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int mask = width / 2; mask > 0; mask /= 2) {
    v += shfl_xor(v, mask);
  }
  return v;
}

// Sum over the whole warp (wavefront); every lane gets it.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int mask = STABLEOPS_WARP_SIZE / 2; mask > 0; mask /= 2) {
    v += shfl_xor(v, mask);
  }
  return v;
}

// The number of floats block_sum() needs in shared memory for blocks of up to
// `max_threads` threads (one per warp of the smallest warp size).
constexpr int block_sum_scratch(int max_threads) {
  return max_threads / 32;
}

// Sum over a 1-D block (blockDim.x a multiple of 64, at most 1024); every
// thread gets the total. One __syncthreads(): each warp reduces the per-warp
// partial sums itself. `scratch` holds block_sum_scratch(blockDim.x) floats
// of shared memory; call it once per kernel (a second call on the same
// scratch needs a __syncthreads() first).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % STABLEOPS_WARP_SIZE;
  const int warp = static_cast<int>(threadIdx.x) / STABLEOPS_WARP_SIZE;
  const int num_warps = static_cast<int>(blockDim.x) / STABLEOPS_WARP_SIZE;
  v = warp_sum(v);
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  // num_warps <= 1024 / 32 <= STABLEOPS_WARP_SIZE: one warp covers them.
  return warp_sum(lane < num_warps ? scratch[lane] : 0.0f);
}

} // namespace gpu
} // namespace stableops
