// CUDA/ROCm kernel of stableops_cache_ops::swap_blocks (one source for both).
// Contract: csrc/ops.h; validation: cache_check.h.
//
// Registered under CUDA: the dispatcher picks it whenever src or dst is a
// CUDA tensor (block_mapping is always on the CPU), so it handles
// GPU -> GPU (same device), pinned CPU -> GPU and GPU -> pinned CPU. All-CPU
// calls go to the CPU kernel (swap_blocks_cpu.cpp).
//
// Everything is checked before the first copy: the shared check, every
// block index, and that the CPU side of a host<->device copy is pinned
// (cudaPointerGetAttributes says cudaMemoryTypeHost): pageable memory would
// make cudaMemcpyAsync synchronous and is rejected.
//
// Copies (all on the current stream of the GPU involved, never synchronised,
// CUDA-graph capturable, nothing allocated):
//   * host <-> device: one cudaMemcpyAsync per pair (the copy engines; large
//     blocks reach the link's bandwidth);
//   * device -> device: one batched copy kernel for up to kMaxPairs pairs
//     per launch (grid.y = pair, grid.x = 16 KiB chunks of the block, each
//     thread with 4 16-byte loads in flight), avoiding a memcpy launch per
//     block. When the addresses are not 16-byte multiples, or src and dst
//     share memory (pairs must then run in order), one cudaMemcpyAsync per
//     pair instead, in block_mapping order.
#include <cstdint>

#include <torch/headeronly/util/Exception.h>

#include "csrc/gpu_compat.h"

// The torch side is host code only: the device passes skip its headers
// (gpu_compat.h, STABLEOPS_DEVICE_PASS). The kernel is not a template and
// has external linkage (a named namespace), so every pass compiles it,
// though its only launch is in host code the device passes skip.
#if !STABLEOPS_DEVICE_PASS
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>

#include "csrc/cache/cache_check.h"
#include "csrc/core/check.h"
#include "csrc/ops.h"
#endif

namespace stableops {
namespace swap_blocks_gpu {

constexpr int kBlockThreads = 256;
constexpr int kUnroll = 4;
constexpr int64_t kChunkVecs = kBlockThreads * kUnroll;  // 16 KiB per block
constexpr int kMaxPairs = 128;  // ~2 KiB of kernel parameters

struct SwapBatch {
  const char* src;
  char* dst;
  int64_t vecs;  // 16-byte vectors per block
  int64_t src_off[kMaxPairs];  // byte offsets of the pairs' blocks
  int64_t dst_off[kMaxPairs];
};

__global__ void __launch_bounds__(kBlockThreads)
    swap_blocks_kernel(const SwapBatch b) {
  pdl_enter();
  const uint4* src = reinterpret_cast<const uint4*>(b.src + b.src_off[blockIdx.y]);
  uint4* dst = reinterpret_cast<uint4*>(b.dst + b.dst_off[blockIdx.y]);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunkVecs + threadIdx.x;
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kBlockThreads;
    if (i < b.vecs) v[u] = STABLEOPS_LDG(src + i);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kBlockThreads;
    if (i < b.vecs) dst[i] = v[u];
  }
}

#if !STABLEOPS_DEVICE_PASS
using torch::headeronly::DeviceType;
using torch::stable::Tensor;

// Whether `t`'s memory is page-locked host memory the GPU can DMA from.
bool is_pinned(const Tensor& t) {
  cudaPointerAttributes attr;
  const cudaError_t err = cudaPointerGetAttributes(&attr, t.data_ptr());
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // unregistered memory on older runtimes
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

void check_pinned(const Tensor& t, const char* name) {
  STD_TORCH_CHECK(is_pinned(t), "swap_blocks: ", name,
                  " is a cpu tensor in pageable memory; copies between cpu and "
                  "cuda need pinned memory (tensor.pin_memory())");
}

// [first byte, last byte + 1) of every block of `t` (blocks along dim 0).
void span_of(const Tensor& t, int64_t block_stride, int64_t bytes,
             uintptr_t& lo, uintptr_t& hi) {
  lo = reinterpret_cast<uintptr_t>(t.data_ptr());
  hi = lo + static_cast<uintptr_t>((t.size(0) - 1) * block_stride + bytes);
}
#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace swap_blocks_gpu

#if !STABLEOPS_DEVICE_PASS
using namespace swap_blocks_gpu;  // NOLINT: this file's own kernel


void swap_blocks_cuda(const Tensor& src, Tensor& dst, int64_t block_size_in_bytes,
                      const Tensor& block_mapping) {
  const SwapBlocksPlan plan = check_swap_blocks(src, dst, block_size_in_bytes,
                                                block_mapping, DeviceType::CUDA);
  check_block_mapping_in_range(src, dst, block_mapping);
  if (plan.kind == SwapKind::kHostToDevice) check_pinned(src, "src");
  if (plan.kind == SwapKind::kDeviceToHost) check_pinned(dst, "dst");
  const int64_t n = plan.num_pairs;
  if (n == 0) return;

  const Tensor& gpu_tensor = plan.kind == SwapKind::kHostToDevice ? dst : src;
  const int32_t device = gpu_tensor.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const cudaStream_t stream = static_cast<cudaStream_t>(current_gpu_stream(device));
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(dst.data_ptr());
  const int64_t bytes = block_size_in_bytes;

  bool batched = plan.kind == SwapKind::kDeviceToDevice;
  if (batched) {
    const uintptr_t mask = reinterpret_cast<uintptr_t>(s) |
                           reinterpret_cast<uintptr_t>(d) |
                           static_cast<uintptr_t>(plan.src_block_stride_bytes) |
                           static_cast<uintptr_t>(plan.dst_block_stride_bytes) |
                           static_cast<uintptr_t>(bytes);
    uintptr_t slo, shi, dlo, dhi;
    span_of(src, plan.src_block_stride_bytes, bytes, slo, shi);
    span_of(dst, plan.dst_block_stride_bytes, bytes, dlo, dhi);
    const bool overlap = slo < dhi && dlo < shi;
    batched = (mask % 16) == 0 && !overlap;
  }

  if (!batched) {
    const cudaMemcpyKind kind =
        plan.kind == SwapKind::kDeviceToDevice ? cudaMemcpyDeviceToDevice
        : plan.kind == SwapKind::kHostToDevice ? cudaMemcpyHostToDevice
                                               : cudaMemcpyDeviceToHost;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t sb = block_mapping_at(block_mapping, i, 0);
      const int64_t db = block_mapping_at(block_mapping, i, 1);
      STABLEOPS_GPU_CHECK(cudaMemcpyAsync(d + db * plan.dst_block_stride_bytes,
                                          s + sb * plan.src_block_stride_bytes,
                                          static_cast<size_t>(bytes), kind, stream));
    }
    return;
  }

  SwapBatch batch;
  batch.src = s;
  batch.dst = d;
  batch.vecs = bytes / 16;
  const uint64_t chunks = static_cast<uint64_t>((batch.vecs + kChunkVecs - 1) / kChunkVecs);
  STD_TORCH_CHECK(chunks <= 0x7fffffffull, "swap_blocks: block_size_in_bytes (",
                  bytes, ") is too large for one launch");
  for (int64_t first = 0; first < n; first += kMaxPairs) {
    const int64_t count = n - first < kMaxPairs ? n - first : kMaxPairs;
    for (int64_t i = 0; i < count; ++i) {
      batch.src_off[i] = block_mapping_at(block_mapping, first + i, 0) *
                         plan.src_block_stride_bytes;
      batch.dst_off[i] = block_mapping_at(block_mapping, first + i, 1) *
                         plan.dst_block_stride_bytes;
    }
    const dim3 grid(static_cast<uint32_t>(chunks), static_cast<uint32_t>(count));
    STABLEOPS_GPU_CHECK(gpu_launch(swap_blocks_kernel, grid, kBlockThreads, 0, stream, batch));
  }
}

#endif  // !STABLEOPS_DEVICE_PASS

}  // namespace stableops
