// Reference quantized GEMM leaves: plain loops, the oracle of the vector variants. W8A16 dequantizes each weight
// element and sums in k order; W8A8 sums exact int32 dot products per group and combines the groups with fused
// multiply-adds in group order (the same arithmetic every variant performs, so they agree bit for bit).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "kernels/quant_leaf.h"
#include "kernels/ref/ref_quant.h"
#include "tensor/q8_0_tiles.h"

namespace minfer::kernels::ref {

void w8a16_cols(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias, float* y,
                int64_t n0, int64_t n1, float* /*scratch*/) {
  for (int64_t j = n0; j < n1; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = x + i * k;
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += xr[p] * w8a16_weight(w, k, j, p);
      y[i * n + j] = bias ? sum + bias[j] : sum;
    }
  }
}

float w8a16_weight(const W8A16View& w, int64_t k, int64_t row, int64_t col) {
  if (w.q8_0) {
    const uint8_t* block = static_cast<const uint8_t*>(w.data) + (row * (k / 32) + col / 32) * 34;
    uint16_t d;
    std::memcpy(&d, block, 2);
    return f16_to_f32(d) * static_cast<float>(static_cast<int8_t>(block[2 + col % 32]));
  }
  const int64_t g = col / w.group_size;
  const float q = static_cast<float>(static_cast<const int8_t*>(w.data)[row * k + col]);
  const float z = w.zeros ? w.zeros[row * w.groups + g] : 0.0f;
  return w.scales[row * w.groups + g] * (q - z);
}

void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t k4, int64_t group_size, int64_t groups, uint8_t* q,
                   float* scale, int32_t* sums) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * k;
    float amax = 0.0f;
    for (int64_t p = 0; p < k; ++p) amax = std::fmax(amax, std::fabs(xr[p]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    scale[i] = amax / 127.0f;
    int8_t* qr = reinterpret_cast<int8_t*>(q + i * k4);
    for (int64_t p = 0; p < k; ++p) qr[p] = static_cast<int8_t>(std::nearbyint(xr[p] * inv));
    for (int64_t p = k; p < k4; ++p) qr[p] = 0;
    if (sums) {
      for (int64_t g = 0; g < groups; ++g) {
        int32_t s = 0;
        for (int64_t p = g * group_size; p < std::min(k, (g + 1) * group_size); ++p) s += qr[p];
        sums[i * groups + g] = s;
      }
    }
  }
}

void w8a8_cols(const QuantizedRows& a, int64_t m, const W8A8View& w, int64_t n, const float* bias, float* y, int64_t n0,
               int64_t n1) {
  const int64_t quads = w.k4 / 4;
  for (int64_t j = n0; j < n1; ++j) {
    const int64_t panel = j / 16, lane = j % 16;
    const int8_t* wp = w.panels + panel * quads * 64 + lane * 4;
    for (int64_t i = 0; i < m; ++i) {
      const int8_t* xr = reinterpret_cast<const int8_t*>(a.q + i * w.k4);
      float acc = 0.0f;
      for (int64_t g = 0; g < w.groups; ++g) {
        const int64_t p0 = g * w.group_size, p1 = g + 1 == w.groups ? w.k4 : (g + 1) * w.group_size;
        int32_t dot = 0;
        for (int64_t p = p0; p < p1; ++p) dot += static_cast<int32_t>(xr[p]) * wp[(p / 4) * 64 + p % 4];
        const int64_t at = (panel * w.groups + g) * 16 + lane;
        if (w.zeros) dot -= w.zeros[at] * a.sums[i * w.groups + g];
        acc = std::fma(static_cast<float>(dot), w.scales[at], acc);
      }
      y[i * n + j] = std::fma(acc, a.scale[i], bias ? bias[j] : 0.0f);
    }
  }
}

void quantize_int16(const float* x, int64_t rows, int64_t k, int16_t* q, float* scale) {
  const int64_t blocks = k / 32;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t g = 0; g < blocks; ++g) {
      const float* xb = x + i * k + g * 32;
      float amax = 0.0f;
      for (int c = 0; c < 32; ++c) amax = std::fmax(amax, std::fabs(xb[c]));
      const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
      scale[i * blocks + g] = amax / 32767.0f;
      for (int c = 0; c < 32; ++c) q[i * k + g * 32 + c] = static_cast<int16_t>(std::nearbyint(xb[c] * inv));
    }
  }
}

void q8_0_tiles_cols(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias,
                     float* y, int64_t n0, int64_t n1) {
  const Q80Tiles layout{n, k};
  const int64_t blocks = k / 32;
  for (int64_t j = n0; j < n1; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t g = 0; g < blocks; ++g) {
        int32_t sum = 0;
        for (int64_t c = g * 32; c < g * 32 + 32; ++c)
          sum += int32_t{x.q[i * k + c]} * static_cast<int8_t>(tiles[layout.weight_offset(j, c)]);
        uint16_t d;
        std::memcpy(&d, tiles + layout.scale_offset(j, g), 2);
        acc = std::fma(static_cast<float>(sum), f16_to_f32(d) * x.scale[i * blocks + g], acc);
      }
      y[i * n + j] = bias ? acc + bias[j] : acc;
    }
  }
}

}  // namespace minfer::kernels::ref

namespace minfer::kernels {

const QuantLeaves kRefQuantLeaves = {
    .name = "scalar",
    .w8a16_cols = ref::w8a16_cols,
    .w8a16_scratch_min_rows = INT64_MAX,
    .quantize_rows = ref::quantize_rows,
    .w8a8_cols = ref::w8a8_cols,
    .quantize_int16 = ref::quantize_int16,
    .q8_0_tiles_cols = ref::q8_0_tiles_cols,
    .quantize_q8 = ref::quantize_q8,
    .gguf_cols = ref::gguf_cols,
    .gguf_tiles_cols = ref::gguf_tiles_cols,
};

}  // namespace minfer::kernels
