// Reference leaves of the GGUF block-type GEMM: activations quantized per block of 32 to int8, each weight row decoded
// (kernels/gguf_blocks.h) and multiplied in exact int32 sums of 16, combined in f32 in element order. The vector
// variants compute the same int32 sums and differ only in the order of the f32 combination.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gguf_blocks.h"
#include "kernels/gguf_tiles.h"
#include "kernels/ref/ref_quant.h"

namespace minfer::kernels::ref {

void quantize_q8(const float* x, int64_t rows, int64_t k, int8_t* q, float* d16, float* s16, int32_t* sum16) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float* xb = x + i * k + b * 32;
      int8_t* qb = q + i * k + b * 32;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const float d = amax / 127.0f;
      const float id = d > 0.0f ? 1.0f / d : 0.0f;
      int32_t sums[2] = {0, 0};
      for (int j = 0; j < 32; ++j) {
        qb[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
        sums[j / 16] += qb[j];
      }
      for (int h = 0; h < 2; ++h) {
        d16[i * (k / 16) + 2 * b + h] = d;
        s16[i * (k / 16) + 2 * b + h] = d * static_cast<float>(sums[h]);
      }
      sum16[i * (k / 16) + 2 * b] = sums[0];
      sum16[i * (k / 16) + 2 * b + 1] = sums[1];
    }
  }
}

void gguf_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* w, int64_t n, const float* bias,
               float* y, int64_t n0, int64_t n1) {
  const int64_t subs = k / gguf::kSubBlock;
  const size_t row_bytes = dtype_bytes(type, static_cast<size_t>(k));
  const int32_t z = gguf::zero_point(type);
  std::vector<uint8_t> u(static_cast<size_t>(k));
  std::vector<float> d(static_cast<size_t>(subs)), off(static_cast<size_t>(subs));
  for (int64_t j = n0; j < n1; ++j) {
    gguf::decode_row(type, w + static_cast<size_t>(j) * row_bytes, k, u.data(), d.data(), off.data());
    for (int64_t i = 0; i < m; ++i) {
      const int8_t* xq = x.q + i * k;
      float sum = 0.0f;
      for (int64_t g = 0; g < subs; ++g) {
        int32_t dot = 0;
        for (int64_t e = g * 16; e < g * 16 + 16; ++e) dot += (u[static_cast<size_t>(e)] - z) * xq[e];
        sum += d[static_cast<size_t>(g)] * x.d16[i * subs + g] * static_cast<float>(dot);
        sum -= off[static_cast<size_t>(g)] * x.s16[i * subs + g];
      }
      y[i * n + j] = bias ? sum + bias[j] : sum;
    }
  }
}

void gguf_tiles_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* tiles, int64_t n,
                     const float* bias, float* y, int64_t n0, int64_t n1) {
  const GgufTiles t{type, n, k};
  for (int64_t r = n0; r < n1; ++r) {
    const int64_t tile = r / GgufTiles::kRows, j = r % GgufTiles::kRows;
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t g = 0; g < t.groups(); ++g) {
        const uint8_t* group = tiles + t.group_offset(tile, g);
        for (int64_t b = 0; b < t.blocks_per_group(); ++b) {
          const int64_t block = g * t.blocks_per_group() + b;  // the block's index along the row
          const float dx = x.d16[i * (k / 16) + 2 * block];
          for (int64_t half = 0; half < 2; ++half) {  // 16 columns: the finest scale granularity (Q6_K)
            const TileBlockScales s = tile_block_scales(t, group, b, j, half);
            const int8_t* xq = x.q + i * k + block * 32 + 16 * half;
            int32_t dot = 0;
            for (int64_t c = 0; c < 16; ++c) dot += (tile_value(t, group, b, j, 16 * half + c) - s.zero_point) * xq[c];
            sum += s.d * dx * static_cast<float>(dot);
            sum -= s.m * (dx * static_cast<float>(x.sum16[i * (k / 16) + 2 * block + half]));
          }
        }
      }
      y[i * n + r] = bias ? sum + bias[r] : sum;
    }
  }
}

}  // namespace minfer::kernels::ref
