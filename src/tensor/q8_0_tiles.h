// TensorLayout::kQ8_0Tiles16: a GGUF Q8_0 matrix [n, k] re-laid for the quantized GEMM. GGUF stores each row as
// blocks of 32 weights (34 bytes: an f16 scale, then 32 int8). Here rows go in tiles of 16 (the last tile padded
// with zero rows) and a tile is stored block by block; a tile's block g is 544 bytes:
//   16 f16 scales (row 0..15 of the tile), then for each column pair p < 16 the 16 rows' (w[2p], w[2p+1]).
// So one 32-byte load holds a column pair for 16 rows, which vpdpwssd multiplies by a broadcast pair of int16
// activations into 16 row sums at once, and a GEMV over a tile reads one contiguous stream. Same bytes as GGUF's
// layout for n a multiple of 16.
#pragma once

#include <cstdint>

namespace minfer {

inline constexpr int64_t kQ80BlockBytes = 34;  // GGUF's block: f16 scale + 32 int8

struct Q80Tiles {
  static constexpr int64_t kRows = 16;         // weight rows per tile
  static constexpr int64_t kBlockBytes = 544;  // a tile's block of 32 columns: 16 scales + 16 pairs x 16 rows x 2
  int64_t n = 0, k = 0;

  int64_t tiles() const { return (n + kRows - 1) / kRows; }
  int64_t blocks() const { return k / 32; }
  int64_t bytes() const { return tiles() * blocks() * kBlockBytes; }
  int64_t block_offset(int64_t tile, int64_t g) const { return (tile * blocks() + g) * kBlockBytes; }
  // Within a tile's block: the f16 scale of the tile's row j, and row j's column pair p (weights 2p, 2p + 1).
  static constexpr int64_t scale_in_block(int64_t j) { return 2 * j; }
  static constexpr int64_t pair_in_block(int64_t p, int64_t j) { return 32 + 32 * p + 2 * j; }
  // Where the f16 scale of row r's block g, and weight (r, c), sit.
  int64_t scale_offset(int64_t r, int64_t g) const { return block_offset(r / kRows, g) + scale_in_block(r % kRows); }
  int64_t weight_offset(int64_t r, int64_t c) const {
    return block_offset(r / kRows, c / 32) + pair_in_block(c % 32 / 2, r % kRows) + c % 2;
  }
};

}  // namespace minfer
