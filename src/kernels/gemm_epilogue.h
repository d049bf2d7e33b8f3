// The hook through which fused operators finish a GEMM's output while it is still in cache. The GEMM driver
// splits the output columns into tiles (every row of X, a range of columns); after a tile is computed, the
// thread that computed it calls `apply` on it. Tile boundaries are multiples of `col_align` (and of 16), so an
// epilogue can ask for whole attention heads or whole gate/up blocks in one tile.
#pragma once

#include <cstdint>

namespace minfer::kernels {

struct GemmEpilogue {
  // y is the GEMM output [m, n] (row stride n); the tile is columns [n0, n1) of every row. Called concurrently
  // for different tiles, so it may only write data that belongs to its own tile.
  void (*apply)(const void* ctx, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) = nullptr;
  const void* ctx = nullptr;
  int64_t col_align = 1;
};

}  // namespace minfer::kernels
