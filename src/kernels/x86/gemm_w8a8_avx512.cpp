// AVX-512 VNNI W8A8 GEMM over weights packed in 16-row panels (tensor/quant_params.h, kVnniPanels): per step
// of 4 k, one 64-byte load holds the 4 weights of 16 output rows, the 4 activation bytes of a row of X are
// broadcast, and vpdpbusd adds the 16 dot products into 16 int32 lanes (64 multiply-adds, no horizontal sums).
// vpdpbusd multiplies unsigned by signed bytes, so activations are stored as q + 128 (quantize_rows below) and
// 128 * (sum of the group's weights) is subtracted at the end of each group. Each group's exact int32 sum is
// converted and accumulated with a fused multiply-add by its scale, in group order; the row's activation scale
// and the bias come last, also fused: the same arithmetic as the scalar reference.
#include "kernels/quant_leaf.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int64_t kRowBlock = 48;  // rows of X kept hot while a pair of panels sweeps them

// y[i, panels p0..p0+NP) for i < MR rows of activations.
template <int MR, int NP>
void panel_tile(const QuantizedRows& a, int64_t i0, const W8A8View& w, int64_t p0, int64_t n, const float* bias,
                float* y, int64_t n1) {
  const int64_t quads = w.k4 / 4;
  const int8_t* wp[NP];
  for (int p = 0; p < NP; ++p) wp[p] = w.panels + (p0 + p) * quads * 64;
  const uint8_t* xr[MR];
  for (int i = 0; i < MR; ++i) xr[i] = a.q + (i0 + i) * w.k4;
  __m512 facc[MR][NP];
  for (int i = 0; i < MR; ++i) {
    for (int p = 0; p < NP; ++p) facc[i][p] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t q0 = g * w.group_size / 4, q1 = g + 1 == w.groups ? quads : (g + 1) * w.group_size / 4;
    __m512i acc[MR][NP];
    for (int i = 0; i < MR; ++i) {
      for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_si512();
    }
    for (int64_t q = q0; q < q1; ++q) {
      __m512i wv[NP];
      for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(wp[p] + q * 64);
      for (int i = 0; i < MR; ++i) {
        int32_t bytes;
        __builtin_memcpy(&bytes, xr[i] + q * 4, 4);
        const __m512i xb = _mm512_set1_epi32(bytes);
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_dpbusd_epi32(acc[i][p], xb, wv[p]);
      }
    }
    for (int p = 0; p < NP; ++p) {
      const int64_t at = ((p0 + p) * w.groups + g) * 16;
      const __m512 sc = _mm512_loadu_ps(w.scales + at);
      const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(w.qsum + at), 7);
      const __m512i zero = w.zeros ? _mm512_loadu_si512(w.zeros + at) : _mm512_setzero_si512();
      for (int i = 0; i < MR; ++i) {
        __m512i d = _mm512_sub_epi32(acc[i][p], offset);
        if (w.zeros)
          d = _mm512_sub_epi32(d, _mm512_mullo_epi32(zero, _mm512_set1_epi32(a.sums[(i0 + i) * w.groups + g])));
        facc[i][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[i][p]);
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t col = (p0 + p) * 16;
    const __mmask16 mask = tail_mask(n1 - col);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      const __m512 v = _mm512_fmadd_ps(facc[i][p], _mm512_set1_ps(a.scale[i0 + i]), b);
      _mm512_mask_storeu_ps(y + (i0 + i) * n + col, mask, v);
    }
  }
}

template <int NP>
void rows_of_tiles(const QuantizedRows& a, int64_t i0, int64_t rows, const W8A8View& w, int64_t p0, int64_t n,
                   const float* bias, float* y, int64_t n1) {
  int64_t i = i0;
  const int64_t end = i0 + rows;
  for (; i + 6 <= end; i += 6) panel_tile<6, NP>(a, i, w, p0, n, bias, y, n1);
  switch (end - i) {
    case 5: return panel_tile<5, NP>(a, i, w, p0, n, bias, y, n1);
    case 4: return panel_tile<4, NP>(a, i, w, p0, n, bias, y, n1);
    case 3: return panel_tile<3, NP>(a, i, w, p0, n, bias, y, n1);
    case 2: return panel_tile<2, NP>(a, i, w, p0, n, bias, y, n1);
    case 1: return panel_tile<1, NP>(a, i, w, p0, n, bias, y, n1);
    default: return;
  }
}

}  // namespace

void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t k4, int64_t group_size, int64_t groups, uint8_t* q,
                   float* scale, int32_t* sums) {
  const __m512 sign_off = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * k;
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; c += 16)
      vmax = _mm512_max_ps(vmax, _mm512_andnot_ps(sign_off, _mm512_maskz_loadu_ps(tail_mask(k - c), xr + c)));
    const float amax = _mm512_reduce_max_ps(vmax);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    scale[i] = amax / 127.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    uint8_t* qr = q + i * k4;
    for (int64_t c = 0; c < k; c += 16) {
      const __mmask16 mask = tail_mask(k - c);
      const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, xr + c), vinv));
      const __m128i b = _mm_xor_si128(_mm512_cvtsepi32_epi8(v), _mm_set1_epi8(static_cast<char>(0x80)));
      _mm_mask_storeu_epi8(qr + c, mask, b);
    }
    for (int64_t c = k; c < k4; ++c) qr[c] = 0x80;
    if (sums) {
      for (int64_t g = 0; g < groups; ++g) {
        int32_t s = 0;
        const int64_t c1 = (g + 1) * group_size < k ? (g + 1) * group_size : k;
        for (int64_t c = g * group_size; c < c1; ++c) s += static_cast<int32_t>(qr[c]) - 128;
        sums[i * groups + g] = s;
      }
    }
  }
}

void w8a8_cols(const QuantizedRows& a, int64_t m, const W8A8View& w, int64_t n, const float* bias, float* y, int64_t n0,
               int64_t n1) {
  const int64_t p_begin = n0 / 16, p_end = (n1 + 15) / 16;
  if (m <= 2) {  // decode: four panels per pass keep four independent chains of vpdpbusd in flight
    int64_t p = p_begin;
    for (; p + 4 <= p_end; p += 4) {
      if (m == 1)
        panel_tile<1, 4>(a, 0, w, p, n, bias, y, n1);
      else
        panel_tile<2, 4>(a, 0, w, p, n, bias, y, n1);
    }
    for (; p < p_end; ++p) {
      if (m == 1)
        panel_tile<1, 1>(a, 0, w, p, n, bias, y, n1);
      else
        panel_tile<2, 1>(a, 0, w, p, n, bias, y, n1);
    }
    return;
  }
  for (int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const int64_t rows = m - r0 < kRowBlock ? m - r0 : kRowBlock;
    int64_t p = p_begin;
    for (; p + 2 <= p_end; p += 2) rows_of_tiles<2>(a, r0, rows, w, p, n, bias, y, n1);
    for (; p < p_end; ++p) rows_of_tiles<1>(a, r0, rows, w, p, n, bias, y, n1);
  }
}

}  // namespace minfer::kernels::avx512

namespace minfer::kernels {

const QuantLeaves kAvx512QuantLeaves = {
    .name = "avx512-vnni",
    .w8a16_cols = avx512::w8a16_cols,
    .w8a16_scratch_min_rows = 32,
    .quantize_rows = avx512::quantize_rows,
    .w8a8_cols = avx512::w8a8_cols,
    .quantize_int16 = avx512::quantize_int16,
    .q8_0_tiles_cols = avx512::q8_0_tiles_cols,
    .quantize_q8 = avx512::quantize_q8,
    .gguf_cols = avx512::gguf_cols,
    .gguf_tiles_cols = avx512::gguf_tiles_cols,
};

}  // namespace minfer::kernels
