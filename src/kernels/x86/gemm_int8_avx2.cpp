// AVX2 quantized GEMM leaves. W8A16: as gemm_w8a16_avx512.cpp with 8 lanes (int8 rows or Q8_0 blocks widened
// in registers; slabs dequantized for the packed f32 GEMM when X has many rows). W8A8: the same 16-row panels as
// the VNNI kernel; without vpdpbusd, each 4-byte step is vpmaddubsw on |w| and sign(w) * x (no saturation:
// |w| <= 128 and activations are within [-127, 127], so a pair of products stays below 2^15) then vpmaddwd by
// ones, which yields the same exact int32 dot products; the epilogue is the reference's.
#include <cmath>
#include <cstring>

#include "kernels/quant_leaf.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_kernels.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

inline __m256 load_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 load_i8(const int8_t* p, int64_t count) {
  alignas(16) int8_t tmp[16] = {};
  std::memcpy(tmp, p, static_cast<size_t>(count));
  return load_i8(tmp);
}

struct RowsSrc {
  const int8_t* q;
  const float* scales;
  const float* zeros;
  int64_t k, group_size, groups;
  const int8_t* at(int64_t row, int64_t col) const { return q + row * k + col; }
  float scale(int64_t row, int64_t g) const { return scales[row * groups + g]; }
  float zero(int64_t row, int64_t g) const { return zeros ? zeros[row * groups + g] : 0.0f; }
};

constexpr int64_t kQ80Block = 34;  // bytes of a Q8_0 block: f16 scale, 32 int8

struct Q80Src {
  const uint8_t* blocks;
  int64_t k;
  static constexpr int64_t group_size = 32;
  int64_t groups;
  const int8_t* at(int64_t row, int64_t col) const {
    return reinterpret_cast<const int8_t*>(blocks + (row * groups + col / 32) * kQ80Block + 2 + col % 32);
  }
  float scale(int64_t row, int64_t g) const {
    const uint8_t* b = blocks + (row * groups + g) * kQ80Block;
    return _cvtsh_ss(static_cast<unsigned short>(b[0] | (b[1] << 8)));
  }
  float zero(int64_t, int64_t) const { return 0.0f; }
};

// y[i, j] for i < MR, j < NR; scales and zero points applied to the weights per group.
template <class Src, int MR, int NR>
inline void dot_tile(const float* x, const Src& w, int64_t row0, float* y, int64_t ldy, const float* bias) {
  const int64_t k = w.k;
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t c0 = g * w.group_size, c1 = c0 + w.group_size < k ? c0 + w.group_size : k;
    __m256 sv[NR], zv[NR];
    for (int j = 0; j < NR; ++j) {
      sv[j] = _mm256_set1_ps(w.scale(row0 + j, g));
      zv[j] = _mm256_set1_ps(w.zero(row0 + j, g));
    }
    for (int64_t c = c0; c < c1; c += 8) {
      const int64_t count = c1 - c < 8 ? c1 - c : 8;
      __m256 xv[MR];
      for (int i = 0; i < MR; ++i)
        xv[i] = count == 8 ? _mm256_loadu_ps(x + i * k + c) : load_partial(x + i * k + c, count);
      for (int j = 0; j < NR; ++j) {
        const __m256 q = count == 8 ? load_i8(w.at(row0 + j, c)) : load_i8(w.at(row0 + j, c), count);
        const __m256 wv = _mm256_mul_ps(_mm256_sub_ps(q, zv[j]), sv[j]);
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = hsum(acc[i][j]) + (bias ? bias[j] : 0.0f);
  }
}

template <class Src, int MR>
void dot_rows(const float* x, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t j = n0;
  for (; j + 4 <= n1; j += 4) dot_tile<Src, MR, 4>(x, w, j, y + j, n, bias ? bias + j : nullptr);
  for (; j < n1; ++j) dot_tile<Src, MR, 1>(x, w, j, y + j, n, bias ? bias + j : nullptr);
}

template <class Src>
void dot_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t i = 0;
  for (; i + 2 <= m; i += 2) dot_rows<Src, 2>(x + i * w.k, w, n, bias, y + i * n, n0, n1);
  for (; i < m; ++i) dot_rows<Src, 1>(x + i * w.k, w, n, bias, y + i * n, n0, n1);
}

// Q8_0 at decode, as q80_tile in gemm_w8a16_avx512.cpp: row pointers plus block offsets, each half block's
// partial sum scaled once. Halves of 16 keep the registers within AVX2's 16 (two X vectors per row at a time), so
// each row's scale is read once per half rather than held for the block.
template <int MR, int NR>
inline void q80_tile(const float* x, int64_t k, const uint8_t* w, int64_t rb, float* y, int64_t ldy, const float* bias,
                     const uint8_t* next) {
  const int64_t groups = k / 32;
  const uint8_t* row[NR];
  for (int j = 0; j < NR; ++j) row[j] = w + j * rb;
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t off = g * kQ80Block;
    if (next && (g & 1) == 0) {
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * rb + off), _MM_HINT_T0);
    }
    for (int h = 0; h < 32; h += 16) {
      __m256 x0[MR], x1[MR];
      for (int i = 0; i < MR; ++i) {
        x0[i] = _mm256_loadu_ps(x + i * k + g * 32 + h);
        x1[i] = _mm256_loadu_ps(x + i * k + g * 32 + h + 8);
      }
      for (int j = 0; j < NR; ++j) {
        const uint8_t* b = row[j] + off;
        uint16_t d;
        std::memcpy(&d, b, 2);
        const __m256 s = _mm256_set1_ps(_cvtsh_ss(d));
        const __m256 w0 = load_i8(reinterpret_cast<const int8_t*>(b + 2 + h));
        const __m256 w1 = load_i8(reinterpret_cast<const int8_t*>(b + 2 + h + 8));
        for (int i = 0; i < MR; ++i) {
          const __m256 t = _mm256_fmadd_ps(x1[i], w1, _mm256_mul_ps(x0[i], w0));
          acc[i][j] = _mm256_fmadd_ps(t, s, acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = hsum(acc[i][j]) + (bias ? bias[j] : 0.0f);
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
  int64_t i = 0;
  for (; i + 2 <= m; i += 2) q80_rows<2, 4>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
  if (i < m) q80_rows<1, 8>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
}

template <class Src>
void slab_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1,
               float* scratch) {
  const int64_t k = w.k;
  for (int64_t j = n0; j < n1; j += kW8A16SlabRows) {
    const int64_t rows = n1 - j < kW8A16SlabRows ? n1 - j : kW8A16SlabRows;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < w.groups; ++g) {
        const int64_t c1 = (g + 1) * w.group_size < k ? (g + 1) * w.group_size : k;
        const float s = w.scale(j + r, g), z = w.zero(j + r, g);
        for (int64_t c = g * w.group_size; c < c1; ++c)
          scratch[r * k + c] = s * (static_cast<float>(*w.at(j + r, c)) - z);
      }
    }
    gemm_cols_packed(x, m, k, scratch, DType::F32, n, bias ? bias + j : nullptr, y + j, 0, rows);
  }
}

// W8A8: y for MR rows of activations and one 16-row panel (two 8-lane halves).
template <int MR>
void panel_tile(const QuantizedRows& a, int64_t i0, const W8A8View& w, int64_t p, int64_t n, const float* bias,
                float* y, int64_t n1) {
  const int64_t quads = w.k4 / 4;
  const int8_t* wp = w.panels + p * quads * 64;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 facc[MR][2];
  for (int i = 0; i < MR; ++i) facc[i][0] = facc[i][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t q0 = g * w.group_size / 4, q1 = g + 1 == w.groups ? quads : (g + 1) * w.group_size / 4;
    __m256i acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int64_t q = q0; q < q1; ++q) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + q * 64));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + q * 64 + 32));
      // |w| as unsigned bytes (|-128| = 128 fits) times x with w's sign (x is never -128, so negating is exact).
      const __m256i aw0 = _mm256_abs_epi8(w0), aw1 = _mm256_abs_epi8(w1);
      for (int i = 0; i < MR; ++i) {
        int32_t bytes;
        std::memcpy(&bytes, a.q + (i0 + i) * w.k4 + q * 4, 4);
        const __m256i xb = _mm256_set1_epi32(bytes);
        const __m256i p0 = _mm256_maddubs_epi16(aw0, _mm256_sign_epi8(xb, w0));
        const __m256i p1 = _mm256_maddubs_epi16(aw1, _mm256_sign_epi8(xb, w1));
        acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0, ones));
        acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1, ones));
      }
    }
    const int64_t at = (p * w.groups + g) * 16;
    for (int h = 0; h < 2; ++h) {
      const __m256 sc = _mm256_loadu_ps(w.scales + at + 8 * h);
      const __m256i zero =
          w.zeros ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.zeros + at + 8 * h)) : _mm256_setzero_si256();
      for (int i = 0; i < MR; ++i) {
        __m256i d = acc[i][h];
        if (w.zeros)
          d = _mm256_sub_epi32(d, _mm256_mullo_epi32(zero, _mm256_set1_epi32(a.sums[(i0 + i) * w.groups + g])));
        facc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[i][h]);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int64_t col = p * 16 + 8 * h;
    if (col >= n1) break;
    const int64_t count = n1 - col < 8 ? n1 - col : 8;
    const __m256 b = bias ? load_partial(bias + col, count) : _mm256_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      const __m256 v = _mm256_fmadd_ps(facc[i][h], _mm256_set1_ps(a.scale[i0 + i]), b);
      store_partial(y + (i0 + i) * n + col, count, v);
    }
  }
}

}  // namespace

void w8a16_cols(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias, float* y,
                int64_t n0, int64_t n1, float* scratch) {
  if (w.q8_0) {
    const Q80Src src{static_cast<const uint8_t*>(w.data), k, w.groups};
    return scratch ? slab_cols(x, m, src, n, bias, y, n0, n1, scratch)
                   : q80_cols(x, m, k, src.blocks, n, bias, y, n0, n1);
  }
  const RowsSrc src{static_cast<const int8_t*>(w.data), w.scales, w.zeros, k, w.group_size, w.groups};
  return scratch ? slab_cols(x, m, src, n, bias, y, n0, n1, scratch) : dot_cols(x, m, src, n, bias, y, n0, n1);
}

void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t k4, int64_t group_size, int64_t groups, uint8_t* q,
                   float* scale, int32_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * k;
    __m256 vmax = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= k; c += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(abs_mask, _mm256_loadu_ps(xr + c)));
    float amax = hmax(vmax);
    for (; c < k; ++c) amax = amax > std::fabs(xr[c]) ? amax : std::fabs(xr[c]);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    scale[i] = amax / 127.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    int8_t* qr = reinterpret_cast<int8_t*>(q + i * k4);
    for (c = 0; c + 8 <= k; c += 8) {
      const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + c), vinv));
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(qr + c), _mm_packs_epi16(w16, w16));
    }
    for (; c < k; ++c) qr[c] = static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(xr[c] * inv)));
    for (c = k; c < k4; ++c) qr[c] = 0;
    if (sums) {
      for (int64_t g = 0; g < groups; ++g) {
        int32_t s = 0;
        const int64_t c1 = (g + 1) * group_size < k ? (g + 1) * group_size : k;
        for (int64_t cc = g * group_size; cc < c1; ++cc) s += qr[cc];
        sums[i * groups + g] = s;
      }
    }
  }
}

void w8a8_cols(const QuantizedRows& a, int64_t m, const W8A8View& w, int64_t n, const float* bias, float* y, int64_t n0,
               int64_t n1) {
  for (int64_t p = n0 / 16; p < (n1 + 15) / 16; ++p) {
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) panel_tile<2>(a, i, w, p, n, bias, y, n1);
    if (i < m) panel_tile<1>(a, i, w, p, n, bias, y, n1);
  }
}

}  // namespace minfer::kernels::avx2

namespace minfer::kernels {

const QuantLeaves kAvx2QuantLeaves = {
    .name = "avx2",
    .w8a16_cols = avx2::w8a16_cols,
    .w8a16_scratch_min_rows = 32,
    .quantize_rows = avx2::quantize_rows,
    .w8a8_cols = avx2::w8a8_cols,
    .quantize_int16 = avx2::quantize_int16,
    .q8_0_tiles_cols = avx2::q8_0_tiles_cols,
    .quantize_q8 = avx2::quantize_q8,
    .gguf_cols = avx2::gguf_cols,
};

}  // namespace minfer::kernels
