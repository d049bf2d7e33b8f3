// The loops of the GGUF block-type GEMM leaves of both x86 ISAs (gemm_gguf_avx2.cpp, gemm_gguf_avx512.cpp):
// kGgufRows weight rows at a time are decoded into a per-thread L1 scratch (gguf_decode_avx2.h) as the bytes u,
// per-16 scales d and offsets m of kernels/gguf_blocks.h, then every row of x is multiplied by them through the
// ISA's Dot::rows<R>, where the instructions differ (vpdpbusd against vpmaddubsw + vpmaddwd); and the activations'
// quantization to int8 blocks, around the ISA's Quantize::block. Internal linkage:
// each ISA's file compiles its own copy with its own flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/gguf_blocks.h"
#include "kernels/quant_leaf.h"
#include "kernels/x86/gguf_decode_avx2.h"

namespace minfer::kernels::x86 {
namespace {

constexpr int kGgufRows = 4;  // weight rows decoded together; each activation load serves all of them

// Weight rows decoded for the dot products: u, d and the offsets m per 16 (kernels/gguf_blocks.h). d and m have a
// vector's worth of padding, so a kernel may load whole vectors of them at the row's end.
struct GgufDecodedRows {
  std::vector<uint8_t> u;
  std::vector<float> d, off;
  int64_t k = 0;

  void reserve(int64_t width) {
    if (k == width) return;
    k = width;
    u.assign(static_cast<size_t>(kGgufRows * k), 0);
    d.assign(static_cast<size_t>(kGgufRows * k / 16 + 16), 0.0f);
    off.assign(static_cast<size_t>(kGgufRows * k / 16 + 16), 0.0f);
  }
  uint8_t* u_row(int r) { return u.data() + r * k; }
  float* d_row(int r) { return d.data() + r * (k / 16); }
  float* off_row(int r) { return off.data() + r * (k / 16); }
};

// One row of the quantized activations (Q8Blocks): k int8, and per 16 of them the scale and the scaled sum.
struct Q8Row {
  const int8_t* q;
  const float* d16;
  const float* s16;
};

// Columns [n0, n1) of y = x . w^T (+ bias) for GGUF block-type rows w; Dot::rows<R>(rows, xi, k, zero_point,
// offsets, out) writes the R dot products of the activation row xi with the first R decoded rows to out.
template <class Dot>
void gguf_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* w, int64_t n, const float* bias,
               float* y, int64_t n0, int64_t n1) {
  thread_local GgufDecodedRows rows;
  rows.reserve(k);
  const size_t row_bytes = dtype_bytes(type, static_cast<size_t>(k));
  const bool offsets = gguf::has_offsets(type);
  const int zero_point = gguf::zero_point(type);
  float out[kGgufRows];
  for (int64_t j0 = n0; j0 < n1; j0 += kGgufRows) {
    const int count = static_cast<int>(std::min<int64_t>(kGgufRows, n1 - j0));
    for (int r = 0; r < count; ++r)
      x86_gguf::decode_row(type, w + static_cast<size_t>(j0 + r) * row_bytes, k, rows.u_row(r), rows.d_row(r),
                           rows.off_row(r));
    for (int64_t i = 0; i < m; ++i) {
      const Q8Row xi{x.q + i * k, x.d16 + i * (k / 16), x.s16 + i * (k / 16)};
      switch (count) {
        case 4: Dot::template rows<4>(rows, xi, k, zero_point, offsets, out); break;
        case 3: Dot::template rows<3>(rows, xi, k, zero_point, offsets, out); break;
        case 2: Dot::template rows<2>(rows, xi, k, zero_point, offsets, out); break;
        default: Dot::template rows<1>(rows, xi, k, zero_point, offsets, out); break;
      }
      for (int r = 0; r < count; ++r) y[i * n + j0 + r] = bias ? out[r] + bias[j0 + r] : out[r];
    }
  }
}

// One block of 32 activations quantized to int8: its scale and the sums of its two halves' int8 values.
struct Q8BlockSums {
  float d;
  int32_t lo, hi;
};

// x [rows, k] quantized per block of 32 into Q8Blocks' arrays (quant_leaf.h's QuantizeQ8Fn): Quantize::block(xb, qb)
// writes a block's int8 and returns its scale and half sums, which land per 16 elements.
template <class Quantize>
void quantize_q8(const float* x, int64_t rows, int64_t k, int8_t* q, float* d16, float* s16, int32_t* sum16) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const Q8BlockSums block = Quantize::block(x + i * k + b * 32, q + i * k + b * 32);
      const int64_t at = i * (k / 16) + 2 * b;
      d16[at] = d16[at + 1] = block.d;
      s16[at] = block.d * static_cast<float>(block.lo);
      s16[at + 1] = block.d * static_cast<float>(block.hi);
      sum16[at] = block.lo;
      sum16[at + 1] = block.hi;
    }
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
