// CUDA/ROCm kernel of stableops::merge_attn_states (one source for both: the
// runtime names are mapped by gpu_compat.h when compiled with hipcc).
//
// Contract (validated by check_merge_attn_states_inputs, shared with the CPU
// kernel): output/prefix_output/suffix_output [T, H, D] of one dtype among
// float32/float16/bfloat16, last dim contiguous, dims 0/1 any stride that is a
// multiple of the vector width, 16-byte aligned data; LSEs float32 [H, T] with
// any strides; output_lse optional.
//
//   p, s   = prefix/suffix LSE of row (t, h), +inf replaced by -inf
//   both -inf  -> output = prefix_output, output_lse = -inf
//   otherwise  -> m = max(p, s), wp = exp(p-m)/Z, ws = exp(s-m)/Z,
//                 Z = exp(p-m) + exp(s-m), output = wp*prefix + ws*suffix,
//                 output_lse = m + log(Z)
//   a NaN LSE propagates (output and output_lse NaN), like the math reference.
//
// Design (memory-bound; ~3 * T*H*D*elsize bytes move):
//   * one thread owns one 16-byte pack (4 fp32 or 8 fp16/bf16) of a row and
//     does 128-bit loads (and 16-byte stores, 4- or 8-byte ones for FP8); a
//     block is a 2-D tile of [rows_per_block x packs_per_row] threads so
//     every row starts on a thread-x boundary and (t, h) is computed once per
//     row, not per element;
//   * a grid of at most as many blocks as the GPU holds at once, each
//     looping over row tiles (grid stride): no tail of partial waves, no
//     cost of scheduling thousands of short blocks;
//   * both LSEs of a row are read by every thread of the row from the same
//     address (one memory transaction per warp, L1 broadcast), so there is
//     no shared memory and no __syncthreads;
//   * tokens at index >= merge_tokens (prefill_tokens_with_context) copy the
//     suffix and its LSE; with output_scale the output is FP8 of
//     merged / scale (csrc/core/fp8.h's conversion of the quotient, bit-exact
//     with torch); the quotient comes from core/scale_div.h's ScaleDivisor
//     (the codes of the IEEE division without a division per value: eight
//     IEEE divisions per thread held this path at 63-69% of copy on an
//     H200), the plain division where the scale is outside its range;
//   * exp uses the fast __expf (|rel err| ~1e-7 for the arguments seen here,
//     which are <= 0); the weights use one approximate reciprocal of a value
//     in [1, 2]; output_lse uses the accurate log1pf (one thread per row);
//   * exactly one kernel launch on the tensor's current stream, no host
//     synchronisation, no allocation -> CUDA-graph capturable.
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include <torch/headeronly/util/Exception.h>

#include "csrc/core/fp8.h"
#include "csrc/core/gpu_vec.h"
#include "csrc/core/scale_div.h"
#include "csrc/gpu_compat.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS).
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

#include "csrc/attention/merge_attn_states_check.h"
#include "csrc/core/check.h"
#include "csrc/core/gpu_float.h"
#include "csrc/ops.h"
#endif

namespace stableops {
namespace merge_gpu {

using gpu::Pack;

constexpr int kBlockThreads = 256;
// Residency we ask ptxas to guarantee (caps registers per thread): 6 blocks of
// 256 threads (1536 threads: the most every target architecture allows,
// sm_86/89/120 included; the kernel needs ~31 registers, so Ampere and Hopper
// still reach 8 blocks).
constexpr int kMinBlocksPerSm = 6;

struct MergeParams {
  void* out;
  float* out_lse;  // nullptr when output_lse is None
  const void* prefix;
  const float* prefix_lse;
  const void* suffix;
  const float* suffix_lse;
  const float* out_scale;  // FP8 output only
  uint32_t num_rows;       // T * H
  uint32_t num_heads;      // H
  uint32_t merge_tokens;   // tokens >= this take the suffix unchanged
  uint32_t packs_per_row;  // D / elements per pack
  // Value strides in elements (dims 0 and 1; dim 2 is contiguous).
  int64_t out_s0, out_s1, prefix_s0, prefix_s1, suffix_s0, suffix_s1;
  // LSE strides in elements: [H, T] -> (head stride, token stride).
  int64_t prefix_lse_sh, prefix_lse_st, suffix_lse_sh, suffix_lse_st;
  int64_t out_lse_sh, out_lse_st;
};

// x / scale for the FP8 output: ScaleDivisor's quotient (same FP8 codes as
// the IEEE division), or the division itself where the scale is outside
// ScaleDivisor's range (chosen once per kernel: a uniform branch).
struct FastDivide {
  ScaleDivisor d;
  __device__ __forceinline__ float operator()(float x) const { return d.quotient(x); }
};
struct IeeeDivide {
  float s;
  __device__ __forceinline__ float operator()(float x) const { return x / s; }
};
// The input dtype's output divides nothing.
struct NoDivide {};

// Output policies: a pack of the input dtype (raw copies keep the input's
// bits), or the pack's values quantised to FP8 (N bytes).
template <typename T>
struct SameOut {
  static constexpr bool kSame = true;
  using Store = uint4;
  template <class Div>
  __device__ __forceinline__ static void store(void* row, uint32_t k, const float (&f)[Pack<T>::kElems], const Div&) {
    reinterpret_cast<uint4*>(row)[k] = Pack<T>::from_float(f);
  }
  template <class Div>
  __device__ __forceinline__ static void copy(void* row, uint32_t k, const uint4& v, const Div&) {
    reinterpret_cast<uint4*>(row)[k] = v;
  }
};

template <typename T, fp8::Format F>
struct Fp8Out {
  static constexpr bool kSame = false;
  static constexpr int N = Pack<T>::kElems;
  // 4 fp32 -> 4 bytes, 8 fp16/bf16 -> 8 bytes.
  using Store = typename std::conditional<N == 8, uint2, uint32_t>::type;
  template <class Div>
  __device__ __forceinline__ static void store(void* row, uint32_t k, const float (&f)[N], const Div& divide) {
    uint16_t b[N / 2];
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
      b[j] = fp8::quantize2<F>(divide(f[2 * j]), divide(f[2 * j + 1]));
    }
    Store v;
    static_assert(sizeof(v) == sizeof(b), "FP8 store size");
    memcpy(&v, b, sizeof(v));
    reinterpret_cast<Store*>(row)[k] = v;
  }
  template <class Div>
  __device__ __forceinline__ static void copy(void* row, uint32_t k, const uint4& v, const Div& divide) {
    float f[N];
    Pack<T>::to_float(v, f);
    store(row, k, f, divide);
  }
};

template <typename T, typename Out>
__device__ __forceinline__ void* out_row(const MergeParams& p, uint32_t t, uint32_t h) {
  using O = typename std::conditional<Out::kSame, T, uint8_t>::type;
  return static_cast<O*>(p.out) + t * p.out_s0 + h * p.out_s1;
}

// One row: thread x of the row's threads handles packs x, x + blockDim.x, ...
template <typename T, typename Out, class Div>
__device__ __forceinline__ void merge_row(const MergeParams& p, uint32_t row, const Div& divide) {
  constexpr int N = Pack<T>::kElems;
  constexpr float kPosInf = INFINITY;
  constexpr float kNegInf = -INFINITY;

  const uint32_t t = row / p.num_heads;
  const uint32_t h = row - t * p.num_heads;
  void* dst = out_row<T, Out>(p, t, h);
  const uint4* src_s = reinterpret_cast<const uint4*>(
      static_cast<const T*>(p.suffix) + t * p.suffix_s0 + h * p.suffix_s1);

  if (t >= p.merge_tokens) {
    // No prefix for this token: the suffix, and its LSE, unchanged.
    if (p.out_lse != nullptr && threadIdx.x == 0) {
      p.out_lse[h * p.out_lse_sh + t * p.out_lse_st] =
          STABLEOPS_LDG(p.suffix_lse + (h * p.suffix_lse_sh + t * p.suffix_lse_st));
    }
    for (uint32_t k = threadIdx.x; k < p.packs_per_row; k += blockDim.x) {
      Out::copy(dst, k, STABLEOPS_LDG(src_s + k), divide);
    }
    return;
  }

  float pl = STABLEOPS_LDG(p.prefix_lse + (h * p.prefix_lse_sh + t * p.prefix_lse_st));
  float sl = STABLEOPS_LDG(p.suffix_lse + (h * p.suffix_lse_sh + t * p.suffix_lse_st));
  pl = (pl == kPosInf) ? kNegInf : pl;
  sl = (sl == kPosInf) ? kNegInf : sl;
  const bool any_nan = (pl != pl) || (sl != sl);
  const float m = any_nan ? pl + sl : fmaxf(pl, sl);  // NaN if any NaN
  const bool copy_prefix = (m == kNegInf);

  // e = exp(min - max) in [0, 1]; Z = 1 + e. -inf - finite = -inf -> e = 0.
  const float e = __expf(-fabsf(pl - sl));
  const float inv_z = __fdividef(1.0f, 1.0f + e);
  const bool p_is_max = pl >= sl;
  const float w_p = p_is_max ? inv_z : e * inv_z;
  const float w_s = p_is_max ? e * inv_z : inv_z;

  const uint4* src_p = reinterpret_cast<const uint4*>(
      static_cast<const T*>(p.prefix) + t * p.prefix_s0 + h * p.prefix_s1);
  // One thread per row writes the merged LSE; the accurate log1pf is
  // evaluated only there.
  if (p.out_lse != nullptr && threadIdx.x == 0) {
    p.out_lse[h * p.out_lse_sh + t * p.out_lse_st] = copy_prefix ? kNegInf : m + log1pf(e);
  }

  for (uint32_t k = threadIdx.x; k < p.packs_per_row; k += blockDim.x) {
    // Both loads are issued before any math so they are in flight together.
    const uint4 a = STABLEOPS_LDG(src_p + k);
    if (copy_prefix) {
      Out::copy(dst, k, a, divide);
      continue;
    }
    const uint4 b = STABLEOPS_LDG(src_s + k);
    float fp[N];
    float fs[N];
    float fo[N];
    Pack<T>::to_float(a, fp);
    Pack<T>::to_float(b, fs);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      fo[j] = fmaf(fp[j], w_p, fs[j] * w_s);
    }
    Out::store(dst, k, fo, divide);
  }
}

// blockDim = (packs_x, rows_y): thread (x, y) of block b handles rows
// b * rows_y + y, then gridDim.x * rows_y further on, ...
template <typename T, typename Out>
__global__ void STABLEOPS_LAUNCH_BOUNDS(kBlockThreads, kMinBlocksPerSm)
    merge_attn_states_kernel(const MergeParams p) {
  pdl_enter();
  const auto rows = [&](const auto& divide) {
    const uint32_t stride = gridDim.x * blockDim.y;
    for (uint32_t row = blockIdx.x * blockDim.y + threadIdx.y; row < p.num_rows; row += stride) {
      merge_row<T, Out>(p, row, divide);
    }
  };
  if constexpr (Out::kSame) {
    rows(NoDivide{});
  } else {
    const ScaleDivisor d(*p.out_scale);
    if (d.fast) {
      rows(FastDivide{d});
    } else {
      rows(IeeeDivide{d.s});
    }
  }
}

template <typename T, typename Out>
void launch_merge(const MergeParams& params, int32_t device, cudaStream_t stream) {
  const uint32_t packs_x =
      params.packs_per_row < static_cast<uint32_t>(kBlockThreads)
          ? params.packs_per_row
          : static_cast<uint32_t>(kBlockThreads);
  const uint32_t rows_y = static_cast<uint32_t>(kBlockThreads) / packs_x;
  const dim3 block(packs_x, rows_y);
  // One row per thread row: faster at every benchmarked shape than two rows
  // per thread, whose extra registers cost occupancy (docs/PERFORMANCE.md).
  const uint64_t rows_per_block = rows_y;
  const uint64_t tiles = (params.num_rows + rows_per_block - 1) / rows_per_block;
  static ResidentGrid resident;  // one per kernel instantiation
  const int max_blocks = resident.blocks(merge_attn_states_kernel<T, Out>, kBlockThreads, device);
  const dim3 grid(static_cast<uint32_t>(
      std::min<uint64_t>(tiles, static_cast<uint64_t>(max_blocks))));
  STABLEOPS_GPU_CHECK(gpu_launch(merge_attn_states_kernel<T, Out>, grid, block, 0, stream, params));
}

template <typename T>
void launch_for_output(const MergeParams& params, bool fp8_output, fp8::Format fp8_format,
                       int32_t device, cudaStream_t stream) {
  if (!fp8_output) {
    launch_merge<T, SameOut<T>>(params, device, stream);
  } else if (fp8_format == fp8::Format::kE4M3FN) {
    launch_merge<T, Fp8Out<T, fp8::Format::kE4M3FN>>(params, device, stream);
  } else {
    launch_merge<T, Fp8Out<T, fp8::Format::kE4M3FNUZ>>(params, device, stream);
  }
}

// Every kernel instantiation is reached from here, in every compiler pass.
// Its only caller is the host entry point below, which the device passes
// skip; a named namespace gives it external linkage, so those passes still
// compile it (and instantiate the kernels) instead of dropping it as unused.
void launch_for_dtype(const MergeParams& params, GpuFloat dtype, bool fp8_output,
                      fp8::Format fp8_format, int32_t device, cudaStream_t stream) {
  with_gpu_float(dtype, [&](auto t) {
    launch_for_output<decltype(t)>(params, fp8_output, fp8_format, device, stream);
  });
}

}  // namespace merge_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace merge_gpu;  // NOLINT: this file's own kernels


void merge_attn_states_cuda(torch::stable::Tensor& output,
                            std::optional<torch::stable::Tensor> output_lse,
                            const torch::stable::Tensor& prefix_output,
                            const torch::stable::Tensor& prefix_lse,
                            const torch::stable::Tensor& suffix_output,
                            const torch::stable::Tensor& suffix_lse,
                            std::optional<int64_t> prefill_tokens_with_context,
                            const std::optional<torch::stable::Tensor>& output_scale) {
  // Shared validation: shapes, dtypes, devices, last-dim contiguity,
  // alignment, strides and head_size multiples of the vector width.
  const MergeAttnStatesDims dims = check_merge_attn_states_inputs(
      output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
      prefill_tokens_with_context, output_scale,
      torch::headeronly::DeviceType::CUDA, kMergeAttnStatesVecBytes);

  const int64_t elem_size = static_cast<int64_t>(prefix_output.element_size());
  const int64_t pack_elems = kMergeAttnStatesVecBytes / elem_size;
  // Defence in depth: the kernel's correctness depends on this.
  STD_TORCH_CHECK(dims.head_size % pack_elems == 0,
                  "merge_attn_states: head_size (", dims.head_size,
                  ") must be a multiple of ", pack_elems,
                  " (128-bit vectors) for this dtype");

  const int64_t num_rows = dims.num_tokens * dims.num_heads;
  if (num_rows == 0) return;  // T == 0 (or H == 0): nothing to launch.
  // 32-bit row indices (with headroom for the last block's overshoot).
  STD_TORCH_CHECK(num_rows <= static_cast<int64_t>(INT32_MAX),
                  "merge_attn_states: num_tokens * num_heads (", num_rows,
                  ") exceeds the kernel's 32-bit row index");

  // Same rule as the shared check: an undefined tensor in the optional means
  // "no output_lse".
  const bool has_output_lse = output_lse.has_value() && output_lse->defined();

  MergeParams params;
  params.out = output.data_ptr();
  params.out_lse =
      has_output_lse ? static_cast<float*>(output_lse->data_ptr()) : nullptr;
  params.prefix = prefix_output.data_ptr();
  params.prefix_lse = static_cast<const float*>(prefix_lse.data_ptr());
  params.suffix = suffix_output.data_ptr();
  params.suffix_lse = static_cast<const float*>(suffix_lse.data_ptr());
  params.out_scale = dims.fp8_output ? static_cast<const float*>(output_scale->data_ptr()) : nullptr;
  params.num_rows = static_cast<uint32_t>(num_rows);
  params.num_heads = static_cast<uint32_t>(dims.num_heads);
  params.merge_tokens = static_cast<uint32_t>(dims.merge_tokens);
  params.packs_per_row = static_cast<uint32_t>(dims.head_size / pack_elems);
  params.out_s0 = output.stride(0);
  params.out_s1 = output.stride(1);
  params.prefix_s0 = prefix_output.stride(0);
  params.prefix_s1 = prefix_output.stride(1);
  params.suffix_s0 = suffix_output.stride(0);
  params.suffix_s1 = suffix_output.stride(1);
  params.prefix_lse_sh = prefix_lse.stride(0);
  params.prefix_lse_st = prefix_lse.stride(1);
  params.suffix_lse_sh = suffix_lse.stride(0);
  params.suffix_lse_st = suffix_lse.stride(1);
  params.out_lse_sh = has_output_lse ? output_lse->stride(0) : 0;
  params.out_lse_st = has_output_lse ? output_lse->stride(1) : 0;

  const int32_t device_index = output.get_device_index();
  const torch::stable::accelerator::DeviceGuard device_guard(device_index);
  const cudaStream_t stream =
      static_cast<cudaStream_t>(current_gpu_stream(device_index));

  const GpuFloat dtype = gpu_float_of("merge_attn_states", prefix_output.scalar_type());
  launch_for_dtype(params, dtype, dims.fp8_output, dims.fp8_format, device_index, stream);
}
#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
