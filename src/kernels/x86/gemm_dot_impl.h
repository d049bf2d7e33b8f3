// The dot-product GEMM of both x86 ISAs for few rows of X (decode), written once over a vector-traits type V
// (vec_avx2.h, vec_avx512.h): each tile keeps MR x-rows and NR weight rows as MR*NR vector accumulators along k,
// so every weight row is streamed from memory once and used for all MR rows of X; horizontal sums happen once
// per tile. Weights are widened to f32 in registers; the k tail is one masked load. The tile shapes follow the
// register file (V::kRegisters: 16 on AVX2, 32 on AVX-512). Instantiated in gemm_<isa>.cpp (internal linkage).
#pragma once

#include <xmmintrin.h>

#include <cstdint>

#include "kernels/x86/vec_common.h"
#include "tensor/dtype.h"

namespace minfer::kernels::x86 {
namespace {

template <class V>
struct DotShape {
  static constexpr int kMaxMR = kWide<V> ? 4 : 2;  // rows of X per tile in the general (many-row) path
  static constexpr int kNR2 = kWide<V> ? 8 : 4;    // weight rows per tile for two rows of X
  static constexpr int64_t kRowBlock = 64;         // rows of X kept hot in L2 while sweeping the weight slice
};

// y[i, j] for i < MR, j < NR: dot products of x rows (stride k) with w rows (stride k).
template <class V, class W, int MR, int NR>
inline void dot_tile(const float* x, int64_t k, const typename W::Elem* w, float* y, int64_t ldy, const float* bias,
                     const typename W::Elem* next) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kWidth;
  // Rows are short (896 bf16 = 28 cache lines), too short for the hardware prefetcher to ramp up on each:
  // fetch the same lines of the next tile's rows while this tile is computed (+40% at M = 1, reaching the
  // read bandwidth).
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(typename W::Elem));
  Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  int64_t p = 0;
  for (; p + L <= k; p += L) {
    if (p % kLine == 0)
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * k + p), _MM_HINT_T0);
    Reg xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = V::load(x + i * k + p);
    for (int j = 0; j < NR; ++j) {
      const Reg wv = V::template load_weights<W>(w + j * k + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = V::fmadd(xv[i], wv, acc[i][j]);
    }
  }
  if (p < k) {
    Reg xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = V::load_tail(x + i * k + p, k - p);
    for (int j = 0; j < NR; ++j) {
      const Reg wv = V::template load_weights_tail<W>(w + j * k + p, V::tail(k - p));
      for (int i = 0; i < MR; ++i) acc[i][j] = V::fmadd(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) store_sums<V, NR>(acc[i], y + i * ldy, bias);
}

// Rows [0, MR) of X against weight rows [n0, n1): NR rows at a time, single rows for the tail.
template <class V, class W, int MR, int NR>
void dot_rows(const float* x, int64_t k, const typename W::Elem* w, int64_t n, const float* bias, float* y, int64_t n0,
              int64_t n1) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const int64_t next = j + 2 * NR <= n1 ? j + NR : j;
    dot_tile<V, W, MR, NR>(x, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + next * k);
  }
  for (; j < n1; ++j) dot_tile<V, W, MR, 1>(x, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + j * k);
}

// More rows: for each block of rows of X (kept in L2), sweep NR weight rows at a time and apply them to all rows
// of the block while they sit in L1.
template <class V, class W>
void dot_many_rows(const float* x, int64_t m, int64_t k, const typename W::Elem* w, int64_t n, const float* bias,
                   float* y, int64_t n0, int64_t n1) {
  constexpr int NR = 4, MR = DotShape<V>::kMaxMR;
  for (int64_t r0 = 0; r0 < m; r0 += DotShape<V>::kRowBlock) {
    const int64_t rows = m - r0 < DotShape<V>::kRowBlock ? m - r0 : DotShape<V>::kRowBlock;
    const float* xb = x + r0 * k;
    float* yb = y + r0 * n;
    int64_t j = n0;
    for (; j + NR <= n1; j += NR) {
      const float* bj = bias ? bias + j : nullptr;
      const typename W::Elem* next = w + (j + 2 * NR <= n1 ? j + NR : j) * k;
      int64_t i = 0;
      for (; i + MR <= rows; i += MR) dot_tile<V, W, MR, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
      for (; i < rows; ++i) dot_tile<V, W, 1, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
    }
    for (; j < n1; ++j) {
      const float* bj = bias ? bias + j : nullptr;
      int64_t i = 0;
      for (; i + MR <= rows; i += MR) dot_tile<V, W, MR, 1>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, w + j * k);
      for (; i < rows; ++i) dot_tile<V, W, 1, 1>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, w + j * k);
    }
  }
}

template <class V, class W>
void dot_cols(const float* x, int64_t m, int64_t k, const typename W::Elem* w, int64_t n, const float* bias, float* y,
              int64_t n0, int64_t n1) {
  switch (m) {  // the decode shapes: one pass over W with the widest tile the registers allow
    case 1: return dot_rows<V, W, 1, 8>(x, k, w, n, bias, y, n0, n1);
    case 2: return dot_rows<V, W, 2, DotShape<V>::kNR2>(x, k, w, n, bias, y, n0, n1);
    case 3: return dot_rows<V, W, 3, 4>(x, k, w, n, bias, y, n0, n1);
    case 4:
      if constexpr (kWide<V>) return dot_rows<V, W, 4, 4>(x, k, w, n, bias, y, n0, n1);
      break;
    default: break;
  }
  dot_many_rows<V, W>(x, m, k, w, n, bias, y, n0, n1);
}

template <class V, class F32W, class F16W, class Bf16W>
void gemm_cols_dot(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                   float* y, int64_t n0, int64_t n1) {
  switch (wtype) {
    case DType::F16: return dot_cols<V, F16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    case DType::BF16: return dot_cols<V, Bf16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    default: return dot_cols<V, F32W>(x, m, k, static_cast<const float*>(w), n, bias, y, n0, n1);
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
