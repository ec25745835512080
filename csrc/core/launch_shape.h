// Launch shapes shared by the GPU kernels that cut rows into independent
// units of work: the constants of the small-tensor kernels (activation.cu's
// small_activation_kernel, quant_gpu.h's small_rows_kernel) and of the grid
// size launches aim for, and the spreading of few rows over a general kernel
// (activation.cu's activation_kernel: small tensors on its vector path take
// the lean one-pack-per-thread kernel instead, large ones the widest shape,
// so spread_rows serves its scalar path). Host code only: no CUDA or HIP
// names, so //tests:launch_shape_test checks it on the CPU.
//
// A block is [bx threads along a row] x [by rows]; a thread handles up to
// `per_thread` units of a chunk of bx * per_thread units (units bx apart, all
// loads issued before any math); grid.x covers the rows, grid.y the chunks of
// a row. The widest shape (per_thread = the kernel's maximum, bx the smallest
// power of two covering a row in that many steps, by filling the block) is
// the fastest for large tensors: many loads in flight per thread, few
// threads. A small tensor would leave most SMs idle under it (one token of
// 4096 bf16 values: one block, 16-32 values per thread, every thread's
// loads, math and stores one after another), so spread_rows narrows blocks
// to one row and at least `min_bx` threads, then halves per_thread, until the
// grid has `min_blocks` blocks (or nothing is left to spread).
#pragma once

#include <cstdint>

namespace stableops {
namespace launch_shape {

// Blocks a launch aims for at least: 2 per SM of an H100/H200's 132.
constexpr int64_t kMinGridBlocks = 264;

// The small-tensor kernels' block: one unit of work per thread and no loop,
// in blocks of one AMD wavefront (two NVIDIA warps).
constexpr int kSmallBlock = 64;

// Blocks of kSmallBlock threads covering `units` units of a row, one each.
constexpr int64_t small_blocks_per_row(int64_t units) {
  return (units + kSmallBlock - 1) / kSmallBlock;
}

struct RowChunks {
  int64_t bx = 1;          // threads along a row: a power of two
  int64_t by = 1;          // rows per block (<= rows)
  int64_t per_thread = 1;  // units per thread per chunk
  int64_t row_blocks = 1;  // ceil(rows / by): grid.x
  int64_t chunks = 1;      // ceil(units / (bx * per_thread)): grid.y before a cap

  int64_t blocks() const { return row_blocks * chunks; }
};

// The shape for `rows` rows (>= 1) of `units` units (>= 1): a block of at
// most `block_threads` threads (a power of two), per_thread at most
// `max_per_thread` (a power of two), grids of at least `min_blocks` blocks
// where the tensor allows, blocks narrowed to no fewer than `min_bx` threads
// along a row.
inline RowChunks spread_rows(int64_t rows, int64_t units, int64_t max_per_thread,
                             int64_t block_threads, int64_t min_blocks,
                             int64_t min_bx) {
  RowChunks best;
  bool have_best = false;
  for (int64_t per = max_per_thread; per >= 1; per /= 2) {
    int64_t bx = 1;
    while (bx < block_threads && bx * per < units) bx *= 2;
    const int64_t fill = block_threads / bx;
    const int64_t by = fill < rows ? fill : rows;
    for (;;) {
      RowChunks s;
      s.bx = bx;
      s.by = by;
      s.per_thread = per;
      s.row_blocks = (rows + by - 1) / by;
      s.chunks = (units + bx * per - 1) / (bx * per);
      if (s.blocks() >= min_blocks) return s;
      // Ties go to the later shape: less work per thread.
      if (!have_best || s.blocks() >= best.blocks()) {
        best = s;
        have_best = true;
      }
      // Narrow only blocks that hold every row they can (one row, or all of
      // them): then fewer threads per block means more blocks.
      if (bx / 2 < min_bx || (s.row_blocks > 1 && by > 1)) break;
      bx /= 2;
    }
  }
  return best;
}

}  // namespace launch_shape
}  // namespace stableops
