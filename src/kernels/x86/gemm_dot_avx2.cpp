// AVX2 GEMM for few rows of X (decode): the dot-product form of gemm_dot_avx512.cpp with 8-wide vectors and
// 16 registers: MR x-rows by NR weight rows of accumulators along k, one horizontal sum per output, and the
// k tail through a zero-padded partial load.
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

constexpr int64_t kRowBlock = 64;  // rows of X kept hot in L2 while sweeping the weight slice

template <int NR>
inline void store_sums(const __m256* acc, float* y, const float* bias) {
  if constexpr (NR == 8) {
    __m256 s = hsum8(acc);
    if (bias) s = _mm256_add_ps(s, _mm256_loadu_ps(bias));
    _mm256_storeu_ps(y, s);
  } else if constexpr (NR == 4) {
    __m128 s = hsum4(acc[0], acc[1], acc[2], acc[3]);
    if (bias) s = _mm_add_ps(s, _mm_loadu_ps(bias));
    _mm_storeu_ps(y, s);
  } else {
    for (int j = 0; j < NR; ++j) y[j] = hsum(acc[j]) + (bias ? bias[j] : 0.0f);
  }
}

template <class W, int MR, int NR>
inline void dot_tile(const float* x, int64_t k, const typename W::Elem* w, float* y, int64_t ldy, const float* bias,
                     const typename W::Elem* next) {
  // Rows are short (896 bf16 = 28 cache lines), too short for the hardware prefetcher to ramp up on each:
  // fetch the same lines of the next tile's rows while this tile is computed (+40% at M = 1, reaching the
  // read bandwidth).
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(typename W::Elem));
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    if (p % kLine == 0) {
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * k + p), _MM_HINT_T0);
    }
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x + i * k + p);
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = W::load(w + j * k + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  if (p < k) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = load_partial(x + i * k + p, k - p);
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = W::load(w + j * k + p, k - p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) store_sums<NR>(acc[i], y + i * ldy, bias);
}

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
  switch (m) {
    case 1: return dot_rows<W, 1, 8>(x, k, w, n, bias, y, n0, n1);
    case 2: return dot_rows<W, 2, 4>(x, k, w, n, bias, y, n0, n1);
    case 3: return dot_rows<W, 3, 4>(x, k, w, n, bias, y, n0, n1);
    default: break;
  }
  // More rows: blocks of X kept in L2; 4 weight rows at a time applied to pairs of x rows from L1.
  constexpr int NR = 4;
  constexpr int MR = 2;
  for (int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const int64_t rows = m - r0 < kRowBlock ? m - r0 : kRowBlock;
    const float* xb = x + r0 * k;
    float* yb = y + r0 * n;
    int64_t j = n0;
    for (; j + NR <= n1; j += NR) {
      const float* bj = bias ? bias + j : nullptr;
      const typename W::Elem* next = w + (j + 2 * NR <= n1 ? j + NR : j) * k;
      int64_t i = 0;
      for (; i + MR <= rows; i += MR) dot_tile<W, MR, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
      for (; i < rows; ++i) dot_tile<W, 1, NR>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, next);
    }
    for (; j < n1; ++j) {
      const float* bj = bias ? bias + j : nullptr;
      int64_t i = 0;
      for (; i + MR <= rows; i += MR) dot_tile<W, MR, 1>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, w + j * k);
      for (; i < rows; ++i) dot_tile<W, 1, 1>(xb + i * k, k, w + j * k, yb + i * n + j, n, bj, w + j * k);
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

}  // namespace minfer::kernels::avx2
