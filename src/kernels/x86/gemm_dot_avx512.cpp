// AVX-512 GEMM for few rows of X (decode): each tile keeps MR x-rows and NR weight rows as MR*NR vector
// accumulators along k, so every weight row is streamed from memory once and used for all MR rows of X;
// horizontal sums happen once per tile. Weights are widened to f32 in registers (f16 via vcvtph2ps, bf16 by a
// shift); k tails use masked loads.
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// Rows of X processed together; past this many, W tiles are re-read from L1/L2 per group of kMaxMR rows.
constexpr int kMaxMR = 4;
// Rows of X kept hot in L2 while sweeping the weight slice.
constexpr int64_t kRowBlock = 64;

// y[i, j] for i < MR, j < NR: dot products of x rows (stride k) with w rows (stride k).
template <class W, int MR, int NR>
inline void dot_tile(const float* x, int64_t k, const typename W::Elem* w, float* y, int64_t ldy, const float* bias,
                     const typename W::Elem* next) {
  // Rows are short (896 bf16 = 28 cache lines), too short for the hardware prefetcher to ramp up on each:
  // fetch the same lines of the next tile's rows while this tile is computed (+40% at M = 1, reaching the
  // read bandwidth).
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(typename W::Elem));
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    if (p % kLine == 0) {
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * k + p), _MM_HINT_T0);
    }
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(x + i * k + p);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = W::load(w + j * k + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  if (p < k) {
    const __mmask16 mask = tail_mask(k - p);
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, x + i * k + p);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = W::load(w + j * k + p, mask);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) store_sums<NR>(acc[i], y + i * ldy, bias);
}

// Rows [0, MR) of X against weight rows [n0, n1): NR rows at a time, single rows for the tail.
template <class W, int MR, int NR>
void dot_rows(const float* x, int64_t k, const typename W::Elem* w, int64_t n, const float* bias, float* y, int64_t n0,
              int64_t n1) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const int64_t next = j + 2 * NR <= n1 ? j + NR : j;
    dot_tile<W, MR, NR>(x, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + next * k);
  }
  for (; j < n1; ++j) dot_tile<W, MR, 1>(x, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + j * k);
}

template <class W>
void dot_cols(const float* x, int64_t m, int64_t k, const typename W::Elem* w, int64_t n, const float* bias, float* y,
              int64_t n0, int64_t n1) {
  switch (m) {  // the decode shapes: one pass over W with the widest tile the registers allow
    case 1: return dot_rows<W, 1, 8>(x, k, w, n, bias, y, n0, n1);
    case 2: return dot_rows<W, 2, 8>(x, k, w, n, bias, y, n0, n1);
    case 3: return dot_rows<W, 3, 4>(x, k, w, n, bias, y, n0, n1);
    case 4: return dot_rows<W, 4, 4>(x, k, w, n, bias, y, n0, n1);
    default: break;
  }
  // More rows: for each block of rows of X (kept in L2), sweep NR weight rows at a time and apply them to all
  // rows of the block while they sit in L1.
  constexpr int NR = 4;
  for (int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const int64_t rows = m - r0 < kRowBlock ? m - r0 : kRowBlock;
    const float* xb = x + r0 * k;
    float* yb = y + r0 * n;
    for (int64_t j = n0; j < n1; j += NR) {
      const int64_t nr = n1 - j < NR ? n1 - j : NR;
      const float* bj = bias ? bias + j : nullptr;
      const typename W::Elem* next = w + (j + 2 * NR <= n1 ? j + NR : j) * k;
      int64_t i = 0;
      if (nr == NR) {
        for (; i + kMaxMR <= rows; i += kMaxMR)
          dot_tile<W, kMaxMR, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
        for (; i < rows; ++i) dot_tile<W, 1, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
      } else {
        for (int64_t jj = j; jj < j + nr; ++jj) {
          const float* bjj = bias ? bias + jj : nullptr;
          for (i = 0; i + kMaxMR <= rows; i += kMaxMR) {
            dot_tile<W, kMaxMR, 1>(xb + i * k, k, w + jj * k, yb + i * n + jj, n, bjj, w + jj * k);
          }
          for (; i < rows; ++i) dot_tile<W, 1, 1>(xb + i * k, k, w + jj * k, yb + i * n + jj, n, bjj, w + jj * k);
        }
      }
    }
  }
}

}  // namespace

void gemm_cols_dot(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                   float* y, int64_t n0, int64_t n1) {
  switch (wtype) {
    case DType::F16: return dot_cols<F16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    case DType::BF16: return dot_cols<Bf16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    default: return dot_cols<F32W>(x, m, k, static_cast<const float*>(w), n, bias, y, n0, n1);
  }
}

}  // namespace minfer::kernels::avx512
