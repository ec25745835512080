// CPU kernel of stableops_cache_ops::swap_blocks: both src and dst on the
// CPU (a call with a CUDA tensor goes to the CUDA kernel, swap_blocks.cu).
// Contract: csrc/ops.h; validation: cache_check.h. Stable ABI only.
//
// Every block index is checked before the first byte moves; then the pairs
// are copied in block_mapping order (memmove: src and dst may be one tensor).
#include <cstdint>
#include <cstring>

#include <torch/csrc/stable/tensor.h>

#include "csrc/cache/cache_check.h"
#include "csrc/core/check.h"
#include "csrc/ops.h"

namespace stableops {

void swap_blocks_cpu(
    const torch::stable::Tensor& src,
    torch::stable::Tensor& dst,
    int64_t block_size_in_bytes,
    const torch::stable::Tensor& block_mapping) {
  const SwapBlocksPlan plan = check_swap_blocks(
      src, dst, block_size_in_bytes, block_mapping, cpu_kernel_device(src));
  if (validation_only(src)) {
    return;
  }
  check_block_mapping_in_range(src, dst, block_mapping);
  const char* s = static_cast<const char*>(src.const_data_ptr());
  char* d = static_cast<char*>(dst.mutable_data_ptr());
  for (int64_t i = 0; i < plan.num_pairs; ++i) {
    const int64_t sb = block_mapping_at(block_mapping, i, 0);
    const int64_t db = block_mapping_at(block_mapping, i, 1);
    std::memmove(
        d + db * plan.dst_block_stride_bytes,
        s + sb * plan.src_block_stride_bytes,
        static_cast<size_t>(block_size_in_bytes));
  }
}

} // namespace stableops
