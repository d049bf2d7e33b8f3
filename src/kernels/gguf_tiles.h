// The 4- to 6-bit GGUF types re-laid in 16-row tiles (TensorLayout::kGgufTiles16, tensor/gguf_tiles.h) for the
// quantized GEMM: the copy made at load and the accessors the reference kernel and dequantization read a tile with.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/gguf_tiles.h"
#include "tensor/tensor.h"

namespace minfer::kernels {

// True for a row-major matrix of a type the tiles hold, in whole blocks.
bool gguf_tiles_hold(const Tensor& w);
// The tiled copy of such a matrix (the tiles split across `pool` when given). Throws Error for anything else.
Tensor to_gguf_tiles(const Tensor& w, ThreadPool* pool = nullptr);

// Weight (j, 32 b + c) of a tile's group = d * (value - zero_point) - m, value being tile_value (IQ4: code book + 128)
// and the scales those of the half c / 16 of the block (they differ only for Q6_K, whose scales cover 16 columns).
struct TileBlockScales {
  float d = 0.0f, m = 0.0f;
  int zero_point = 0;
};
TileBlockScales tile_block_scales(const GgufTiles& t, const uint8_t* group, int64_t b, int64_t j, int64_t half);
uint8_t tile_value(const GgufTiles& t, const uint8_t* group, int64_t b, int64_t j, int64_t c);
// Row r of a tiled matrix, dequantized to f32 (the values gguf-py gives for the original).
void gguf_tiles_row(const Tensor& w, int64_t r, float* out);

}  // namespace minfer::kernels
