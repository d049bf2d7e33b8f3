// AVX2 W8A8 GEMM leaves and the AVX2 quantized leaf table (W8A16 is w8a16_impl.h, built in gemm_avx2.cpp). W8A8:
// the same 16-row panels as the VNNI kernel (gemm_w8a8_avx512.cpp); without vpdpbusd, each 4-byte step is vpmaddubsw on
// |w| and sign(w) * x (no saturation: |w| <= 128 and activations are within [-127, 127], so a pair of products stays
// below 2^15) then vpmaddwd by ones, which yields the same exact int32 dot products; the epilogue is the reference's.
#include <cmath>
#include <cstring>

#include "kernels/quant_leaf.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

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
