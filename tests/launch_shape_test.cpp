// csrc/core/launch_shape.h on the host: for every rows x units of a range
// (and a few large ones), spread_rows gives a legal block (a power-of-two bx,
// bx * by <= 256, by <= rows), a per_thread that is a power of two no larger
// than asked, and a grid that covers every unit of every row exactly once
// under the kernels' indexing (rows blockIdx.x * by + y, units chunk * bx *
// per + x + u * bx); large tensors keep the widest shape; a shape short of
// min_blocks has nothing left to spread; small_blocks_per_row gives the
// fewest kSmallBlock-thread blocks holding a row's units, one per thread.
// Exits non-zero on a failure, after printing it.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "csrc/core/launch_shape.h"

namespace {

using stableops::launch_shape::RowChunks;
using stableops::launch_shape::spread_rows;

constexpr int64_t kThreads = 256;
constexpr int64_t kMinBlocks = stableops::launch_shape::kMinGridBlocks;
constexpr int64_t kMinBx = 64;

int failures = 0;

void fail(const char* what, int64_t rows, int64_t units, int64_t max_per, const RowChunks& s) {
  if (++failures <= 20) {
    std::printf("FAIL %s: rows=%" PRId64 " units=%" PRId64 " max_per=%" PRId64
                " -> bx=%" PRId64 " by=%" PRId64 " per=%" PRId64 " row_blocks=%" PRId64
                " chunks=%" PRId64 "\n",
                what, rows, units, max_per, s.bx, s.by, s.per_thread, s.row_blocks, s.chunks);
  }
}

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The widest shape: per_thread = max_per, bx covering a row in that many
// steps, by filling the block.
RowChunks widest(int64_t rows, int64_t units, int64_t max_per) {
  RowChunks s;
  s.per_thread = max_per;
  while (s.bx < kThreads && s.bx * max_per < units) s.bx *= 2;
  s.by = kThreads / s.bx < rows ? kThreads / s.bx : rows;
  s.row_blocks = (rows + s.by - 1) / s.by;
  s.chunks = (units + s.bx * max_per - 1) / (s.bx * max_per);
  return s;
}

void check(int64_t rows, int64_t units, int64_t max_per, bool enumerate) {
  const RowChunks s = spread_rows(rows, units, max_per, kThreads, kMinBlocks, kMinBx);
  if (!pow2(s.bx) || s.bx > kThreads || s.by < 1 || s.by > rows || s.bx * s.by > kThreads) {
    fail("illegal block", rows, units, max_per, s);
    return;
  }
  if (!pow2(s.per_thread) || s.per_thread > max_per) fail("per_thread", rows, units, max_per, s);
  if (s.row_blocks != (rows + s.by - 1) / s.by) fail("row_blocks", rows, units, max_per, s);
  if (s.chunks != (units + s.bx * s.per_thread - 1) / (s.bx * s.per_thread)) {
    fail("chunks", rows, units, max_per, s);
  }
  const RowChunks w = widest(rows, units, max_per);
  if (w.blocks() >= kMinBlocks &&
      (s.bx != w.bx || s.by != w.by || s.per_thread != w.per_thread)) {
    fail("a large tensor lost the widest shape", rows, units, max_per, s);
  }
  if (s.blocks() < kMinBlocks && s.per_thread != 1) {
    fail("short of min_blocks with work per thread left to split", rows, units, max_per, s);
  }
  if (s.blocks() < w.blocks()) fail("fewer blocks than the widest shape", rows, units, max_per, s);
  if (!enumerate) return;
  // Every (row, unit) exactly once.
  std::vector<int> seen(static_cast<size_t>(rows * units), 0);
  for (int64_t bxi = 0; bxi < s.row_blocks; ++bxi) {
    for (int64_t c = 0; c < s.chunks; ++c) {
      for (int64_t y = 0; y < s.by; ++y) {
        const int64_t row = bxi * s.by + y;
        if (row >= rows) continue;
        for (int64_t x = 0; x < s.bx; ++x) {
          for (int64_t u = 0; u < s.per_thread; ++u) {
            const int64_t k = c * s.bx * s.per_thread + x + u * s.bx;
            if (k < units) ++seen[static_cast<size_t>(row * units + k)];
          }
        }
      }
    }
  }
  for (int v : seen) {
    if (v != 1) {
      fail("a unit not covered exactly once", rows, units, max_per, s);
      break;
    }
  }
}

}  // namespace

int main() {
  for (int64_t max_per : {1, 2, 4}) {
    for (int64_t rows = 1; rows <= 40; ++rows) {
      for (int64_t units = 1; units <= 2100; units += (units < 300 ? 1 : 37)) {
        check(rows, units, max_per, /*enumerate=*/true);
      }
    }
    for (int64_t rows : {64, 255, 256, 263, 264, 1000, 4096, 16384, 1 << 20}) {
      for (int64_t units : {1, 8, 96, 512, 1024, 1792, 1 << 20}) {
        check(rows, units, max_per, /*enumerate=*/rows * units <= (1 << 22));
      }
    }
  }
  // One token of 4096 bf16 values (512 packs), two packs per thread at most:
  // eight blocks of 64 threads, one pack each.
  const RowChunks t1 = spread_rows(1, 512, 2, kThreads, kMinBlocks, kMinBx);
  if (t1.bx != 64 || t1.by != 1 || t1.per_thread != 1 || t1.chunks != 8) {
    fail("one token of 512 packs", 1, 512, 2, t1);
  }
  // 4096 tokens of the same: the widest shape, unchanged.
  const RowChunks big = spread_rows(4096, 512, 2, kThreads, kMinBlocks, kMinBx);
  if (big.bx != 256 || big.by != 1 || big.per_thread != 2 || big.chunks != 1) {
    fail("4096 tokens of 512 packs", 4096, 512, 2, big);
  }
  // The small-tensor kernels: every unit has a thread, no block is idle.
  using stableops::launch_shape::kSmallBlock;
  for (int64_t units = 1; units <= 70000; ++units) {
    const int64_t b = stableops::launch_shape::small_blocks_per_row(units);
    if (b * kSmallBlock < units || (b - 1) * kSmallBlock >= units) {
      std::printf("FAIL small_blocks_per_row(%" PRId64 ") = %" PRId64 "\n", units, b);
      ++failures;
      break;
    }
  }
  if (failures != 0) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("launch_shape: all shapes legal, covering and as wide as the grid allows\n");
  return 0;
}
