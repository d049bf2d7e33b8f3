// AVX-512 W8A16 GEMM: int8 weight rows (per-channel or per-group f32 scales, optional zero points) or GGUF Q8_0
// blocks, f32 activations. Few rows of X (decode): dot-product tiles as in gemm_dot_avx512.cpp, the int8 widened
// to f32 in registers (vpmovsxbd + vcvtdq2ps), so each weight byte is read from memory once and nothing is
// materialised; with one scale per row the scale is applied once to the finished sum. Many rows (prefill): a slab
// of 32 weight rows is dequantized into the caller's scratch (128 KiB at K = 1024, kept in L2) and handed to the
// packed f32 GEMM of gemm_avx512.cpp, which is compute-bound there, so the int8 source costs nothing extra.
#include "kernels/quant_leaf.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int kMaxMR = 4;

inline __m512 widen_i8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }
inline __m512 load_i8(const int8_t* p) { return widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m512 load_i8(const int8_t* p, __mmask16 m) { return widen_i8(_mm_maskz_loadu_epi8(m, p)); }

// Int8 rows [n, k] with scales [n, groups] (and zeros).
struct RowsSrc {
  const int8_t* q;
  const float* scales;
  const float* zeros;
  int64_t k, group_size, groups;
  const int8_t* at(int64_t row, int64_t col) const { return q + row * k + col; }
  float scale(int64_t row, int64_t g) const { return scales[row * groups + g]; }
  float zero(int64_t row, int64_t g) const { return zeros[row * groups + g]; }
  int64_t row_bytes() const { return k; }
};

// Q8_0 blocks: per row k / 32 blocks of {f16 scale, 32 int8}.
struct Q80Src {
  const uint8_t* blocks;
  int64_t k;
  static constexpr int64_t group_size = 32;
  int64_t groups;
  const int8_t* at(int64_t row, int64_t col) const {
    return reinterpret_cast<const int8_t*>(blocks + (row * groups + col / 32) * 34 + 2 + col % 32);
  }
  float scale(int64_t row, int64_t g) const {
    const uint8_t* b = blocks + (row * groups + g) * 34;
    return _cvtsh_ss(static_cast<unsigned short>(b[0] | (b[1] << 8)));
  }
  float zero(int64_t, int64_t) const { return 0.0f; }
  int64_t row_bytes() const { return groups * 34; }
};

// y[i, j] for i < MR, j < NR over weight rows row0.. (kScaled: scales applied per group inside the loop;
// otherwise the one scale per row multiplies the finished sum). kAsym: zero points subtracted from q.
template <class Src, int MR, int NR, bool kScaled, bool kAsym>
inline void dot_tile(const float* x, const Src& w, int64_t row0, float* y, int64_t ldy, const float* bias,
                     bool prefetch_next) {
  const int64_t k = w.k;
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t c0 = g * w.group_size, c1 = c0 + w.group_size < k ? c0 + w.group_size : k;
    __m512 sv[NR], zv[NR];
    for (int j = 0; j < NR; ++j) {
      if constexpr (kScaled) sv[j] = _mm512_set1_ps(w.scale(row0 + j, g));
      if constexpr (kAsym) zv[j] = _mm512_set1_ps(w.zero(row0 + j, g));
    }
    for (int64_t c = c0; c < c1; c += 16) {
      const __mmask16 mask = tail_mask(c1 - c);
      if (prefetch_next && (c & 63) == 0) {
        for (int j = 0; j < NR; ++j)
          _mm_prefetch(reinterpret_cast<const char*>(w.at(row0 + j, c) + NR * w.row_bytes()), _MM_HINT_T0);
      }
      __m512 xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, x + i * k + c);
      for (int j = 0; j < NR; ++j) {
        __m512 wv = mask == 0xffff ? load_i8(w.at(row0 + j, c)) : load_i8(w.at(row0 + j, c), mask);
        if constexpr (kAsym) wv = _mm512_sub_ps(wv, zv[j]);
        if constexpr (kScaled) wv = _mm512_mul_ps(wv, sv[j]);
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      if constexpr (!kScaled) s *= w.scale(row0 + j, 0);
      y[i * ldy + j] = bias ? s + bias[j] : s;
    }
  }
}

template <class Src, int MR, int NR, bool kScaled, bool kAsym>
void dot_rows(const float* x, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR)
    dot_tile<Src, MR, NR, kScaled, kAsym>(x, w, j, y + j, n, bias ? bias + j : nullptr, j + 2 * NR <= n1);
  for (; j < n1; ++j) dot_tile<Src, MR, 1, kScaled, kAsym>(x, w, j, y + j, n, bias ? bias + j : nullptr, false);
}

template <class Src, bool kScaled, bool kAsym>
void dot_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t k = w.k;
  int64_t i = 0;
  if (m == 1) return dot_rows<Src, 1, 8, kScaled, kAsym>(x, w, n, bias, y, n0, n1);
  if (m == 2) return dot_rows<Src, 2, 8, kScaled, kAsym>(x, w, n, bias, y, n0, n1);
  for (; i + kMaxMR <= m; i += kMaxMR)
    dot_rows<Src, kMaxMR, 4, kScaled, kAsym>(x + i * k, w, n, bias, y + i * n, n0, n1);
  for (; i < m; ++i) dot_rows<Src, 1, 8, kScaled, kAsym>(x + i * k, w, n, bias, y + i * n, n0, n1);
}

// Rows [row0, row0 + rows) dequantized to f32 into out [rows, k].
template <class Src>
void dequantize_slab(const Src& w, int64_t row0, int64_t rows, float* out, bool asym) {
  const int64_t k = w.k;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < w.groups; ++g) {
      const int64_t c0 = g * w.group_size, c1 = c0 + w.group_size < k ? c0 + w.group_size : k;
      const __m512 s = _mm512_set1_ps(w.scale(row0 + r, g));
      const __m512 z = _mm512_set1_ps(asym ? w.zero(row0 + r, g) : 0.0f);
      for (int64_t c = c0; c < c1; c += 16) {
        const __mmask16 mask = tail_mask(c1 - c);
        const __m512 v = _mm512_mul_ps(_mm512_sub_ps(load_i8(w.at(row0 + r, c), mask), z), s);
        _mm512_mask_storeu_ps(out + r * k + c, mask, v);
      }
    }
  }
}

template <class Src>
void slab_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1,
               float* scratch, bool asym) {
  for (int64_t j = n0; j < n1; j += kW8A16SlabRows) {
    const int64_t rows = n1 - j < kW8A16SlabRows ? n1 - j : kW8A16SlabRows;
    dequantize_slab(w, j, rows, scratch, asym);
    gemm_cols_packed(x, m, w.k, scratch, DType::F32, n, bias ? bias + j : nullptr, y + j, 0, rows);
  }
}

}  // namespace

void w8a16_cols(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias, float* y,
                int64_t n0, int64_t n1, float* scratch) {
  if (w.q8_0) {
    const Q80Src src{static_cast<const uint8_t*>(w.data), k, w.groups};
    if (scratch) return slab_cols(x, m, src, n, bias, y, n0, n1, scratch, false);
    return dot_cols<Q80Src, true, false>(x, m, src, n, bias, y, n0, n1);
  }
  const RowsSrc src{static_cast<const int8_t*>(w.data), w.scales, w.zeros, k, w.group_size, w.groups};
  const bool asym = w.zeros != nullptr;
  if (scratch) return slab_cols(x, m, src, n, bias, y, n0, n1, scratch, asym);
  if (w.groups == 1) {
    return asym ? dot_cols<RowsSrc, false, true>(x, m, src, n, bias, y, n0, n1)
                : dot_cols<RowsSrc, false, false>(x, m, src, n, bias, y, n0, n1);
  }
  return asym ? dot_cols<RowsSrc, true, true>(x, m, src, n, bias, y, n0, n1)
              : dot_cols<RowsSrc, true, false>(x, m, src, n, bias, y, n0, n1);
}

}  // namespace minfer::kernels::avx512
