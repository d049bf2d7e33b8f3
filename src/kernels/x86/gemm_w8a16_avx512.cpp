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

constexpr int64_t kQ80Block = 34;  // bytes of a Q8_0 block: f16 scale, 32 int8

inline float q80_scale(const uint8_t* block) {
  uint16_t d;
  __builtin_memcpy(&d, block, 2);
  return _cvtsh_ss(d);
}

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

// Q8_0 blocks: per row k / 32 blocks of {f16 scale, 32 int8} (the slab path's source; decode has q80_tile).
struct Q80Src {
  const uint8_t* blocks;
  int64_t k;
  static constexpr int64_t group_size = 32;
  int64_t groups;
  const int8_t* at(int64_t row, int64_t col) const {
    return reinterpret_cast<const int8_t*>(blocks + (row * groups + col / 32) * kQ80Block + 2 + col % 32);
  }
  float scale(int64_t row, int64_t g) const { return q80_scale(blocks + (row * groups + g) * kQ80Block); }
  float zero(int64_t, int64_t) const { return 0.0f; }
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

// Q8_0 at decode: y[i, j] for i < MR, j < NR over the NR weight rows starting at `w` (rows `rb` bytes apart),
// block by block: the two 16-wide halves of a block are widened and multiplied by x into one partial sum per
// (i, j), which the block's scale then adds into the accumulator (one scale multiply per block, not per
// weight). Every address is a row pointer plus the block offset: computing them from (row, col) each time
// spilled registers and ran at half this speed. `next` (the first row of the tile after the next, or null) has
// its blocks requested as these are read, so a row's start never waits on the hardware prefetcher. Q8_0 rows
// are 34-byte blocks read row by row, so a decode GEMV is bound by how many misses are in flight: one X row
// takes 16 weight rows per tile (16 streams; 8 measured 15% slower) and requests two tiles ahead (one tile
// ahead measured 8% slower, three 3%).
template <int MR, int NR>
inline void q80_tile(const float* x, int64_t k, const uint8_t* w, int64_t rb, float* y, int64_t ldy, const float* bias,
                     const uint8_t* next) {
  const int64_t groups = k / 32;
  const uint8_t* row[NR];
  for (int j = 0; j < NR; ++j) row[j] = w + j * rb;
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t off = g * kQ80Block;
    if (next && (g & 1) == 0) {
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * rb + off), _MM_HINT_T0);
    }
    __m512 x0[MR], x1[MR];
    for (int i = 0; i < MR; ++i) {
      x0[i] = _mm512_loadu_ps(x + i * k + g * 32);
      x1[i] = _mm512_loadu_ps(x + i * k + g * 32 + 16);
    }
    for (int j = 0; j < NR; ++j) {
      const uint8_t* b = row[j] + off;
      const __m512 s = _mm512_set1_ps(q80_scale(b));
      const __m512 w0 = load_i8(reinterpret_cast<const int8_t*>(b + 2));
      const __m512 w1 = load_i8(reinterpret_cast<const int8_t*>(b + 18));
      for (int i = 0; i < MR; ++i) {
        const __m512 t = _mm512_fmadd_ps(x1[i], w1, _mm512_mul_ps(x0[i], w0));
        acc[i][j] = _mm512_fmadd_ps(t, s, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const float v = hsum(acc[i][j]);
      y[i * ldy + j] = bias ? v + bias[j] : v;
    }
  }
}

template <int MR, int NR>
void q80_rows(const float* x, int64_t k, const uint8_t* w, int64_t n, const float* bias, float* y, int64_t n0,
              int64_t n1) {
  const int64_t rb = k / 32 * kQ80Block;
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const uint8_t* next = j + 3 * NR <= n1 ? w + (j + 2 * NR) * rb : nullptr;
    q80_tile<MR, NR>(x, k, w + j * rb, rb, y + j, n, bias ? bias + j : nullptr, next);
  }
  for (; j < n1; ++j) q80_tile<MR, 1>(x, k, w + j * rb, rb, y + j, n, bias ? bias + j : nullptr, nullptr);
}

void q80_cols(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, const float* bias, float* y,
              int64_t n0, int64_t n1) {
  if (m == 1) return q80_rows<1, 16>(x, k, w, n, bias, y, n0, n1);  // 16 accumulators
  if (m == 2) return q80_rows<2, 8>(x, k, w, n, bias, y, n0, n1);
  int64_t i = 0;
  for (; i + kMaxMR <= m; i += kMaxMR) q80_rows<kMaxMR, 4>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
  for (; i < m; ++i) q80_rows<1, 8>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
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
    return q80_cols(x, m, k, src.blocks, n, bias, y, n0, n1);
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
