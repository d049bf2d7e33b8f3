// The column loop of the Q8_0-tile GEMM leaves of both x86 ISAs (gemm_q8_0_tiles_avx2.cpp, _avx512.cpp), over
// weights in TensorLayout::kQ8_0Tiles16: rows of X in chunks kept in L2, tiles of 16 weight rows front to back,
// and the ISA's Tile::rows<MR> for groups of MR rows of X, largest first. Internal linkage: each ISA's file
// compiles its own copy with its own flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/quant_leaf.h"
#include "tensor/q8_0_tiles.h"

namespace minfer::kernels::x86 {
namespace {

// The int16 pair of X at p (two consecutive elements) as the 32 bits a broadcast repeats in every lane.
inline int32_t pair_bits(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

constexpr int64_t kQ80TilesRowChunk = 64;  // rows of X per pass over the weights (their int16 stay in L2 meanwhile)

// Rows [i, r1) of X in groups of MR while whole groups remain; returns the first row left.
template <class Tile, int MR, class Cols>
int64_t q8_0_tile_groups(const Int16Blocks& x, int64_t i, int64_t r1, int64_t k, const uint8_t* tile, const float* bias,
                         float* y, int64_t ldy, Cols cols) {
  for (; i + MR <= r1; i += MR) Tile::template rows<MR>(x, i, k, tile, bias, y, ldy, cols);
  return i;
}

// Columns [n0, n1) of y[m, n] (quant_leaf.h's Q80TilesColsFn). Tile::columns(c) makes what Tile::rows takes for
// the first c (or all 16) of a tile's outputs: a count or a mask register. MRs: the row groups, ending in 1.
template <class Tile, int... MRs>
void q8_0_tiles_cols(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias,
                     float* y, int64_t n0, int64_t n1) {
  const Q80Tiles layout{n, k};
  for (int64_t r0 = 0; r0 < m; r0 += kQ80TilesRowChunk) {
    const int64_t r1 = std::min(m, r0 + kQ80TilesRowChunk);
    for (int64_t j = n0; j < n1; j += Q80Tiles::kRows) {
      const uint8_t* tile = tiles + layout.block_offset(j / Q80Tiles::kRows, 0);
      const auto cols = Tile::columns(n1 - j);
      const float* b = bias ? bias + j : nullptr;
      int64_t i = r0;
      ((i = q8_0_tile_groups<Tile, MRs>(x, i, r1, k, tile, b, y + j, n, cols)), ...);
    }
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
