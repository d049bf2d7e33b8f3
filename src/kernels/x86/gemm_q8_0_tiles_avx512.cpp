// AVX-512 VNNI GEMM over GGUF Q8_0 weights in TensorLayout::kQ8_0Tiles16 (tensor/q8_0_tiles.h), every batch size.
// X is quantized to int16 per block of 32; one 32-byte load is a column pair of a tile's 16 rows, widened to int16
// and multiplied by a broadcast int16 pair of X with vpdpwssd: 32 multiply-adds per instruction into 16 exact int32
// row sums, where widening int8 to f32 (the row-major Q8_0 kernel) costs three instructions per 16. Each block's
// sum becomes f32 and is scaled by (weight scale x activation scale) in one fused multiply-add, as the reference.
// The tiles follow each other in memory, so a thread streams its columns front to back; the hardware prefetcher
// keeps up (requesting the next tile in software measured no faster).
#include <algorithm>

#include "kernels/quant_leaf.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/q8_0_tiles_impl.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// One tile for groups of rows of X (x86::q8_0_tiles_cols).
struct Tile {
  // The int16 pair of X at p in every 32-bit lane.
  static __m512i pair(const int16_t* p) { return _mm512_set1_epi32(x86::pair_bits(p)); }
  // The first c (at most 16) of a tile's outputs are stored.
  static __mmask16 columns(int64_t c) { return tail_mask(c); }
  // y[i0 + i, 0..16) for i < MR over one tile (`cols` of its 16 outputs stored). Up to two X rows keep two int32
  // chains per row (even and odd column pairs: the block's 8 dependent vpdpwssd each, not 16); more rows are
  // independent chains already.
  template <int MR>
  static void rows(const Int16Blocks& x, int64_t i0, int64_t k, const uint8_t* tile, const float* bias, float* y,
                   int64_t ldy, __mmask16 cols) {
    constexpr bool kTwoChains = MR <= 2;
    const int64_t blocks = k / 32;
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < blocks; ++g) {
      const uint8_t* b = tile + g * Q80Tiles::kBlockBytes;
      __m512i even[MR], odd[MR];
      for (int i = 0; i < MR; ++i) even[i] = odd[i] = _mm512_setzero_si512();
      const int16_t* xq = x.q + i0 * k + g * 32;
      for (int p = 0; p < 16; p += 2) {
        const __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 + p * 32)));
        const __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 + p * 32)));
        for (int i = 0; i < MR; ++i) {
          even[i] = _mm512_dpwssd_epi32(even[i], w0, pair(xq + i * k + 2 * p));
          if constexpr (kTwoChains) {
            odd[i] = _mm512_dpwssd_epi32(odd[i], w1, pair(xq + i * k + 2 * p + 2));
          } else {
            even[i] = _mm512_dpwssd_epi32(even[i], w1, pair(xq + i * k + 2 * p + 2));
          }
        }
      }
      const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
      for (int i = 0; i < MR; ++i) {
        const __m512i sum = kTwoChains ? _mm512_add_epi32(even[i], odd[i]) : even[i];
        const __m512 s = _mm512_mul_ps(ws, _mm512_set1_ps(x.scale[(i0 + i) * blocks + g]));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), s, acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      const __m512 v = bias ? _mm512_add_ps(acc[i], _mm512_maskz_loadu_ps(cols, bias)) : acc[i];
      _mm512_mask_storeu_ps(y + (i0 + i) * ldy, cols, v);
    }
  }
};

}  // namespace

void quantize_int16(const float* x, int64_t rows, int64_t k, int16_t* q, float* scale) {
  const int64_t blocks = k / 32;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t g = 0; g < blocks; ++g) {
      const float* xb = x + i * k + g * 32;
      const __m512 a = _mm512_loadu_ps(xb), b = _mm512_loadu_ps(xb + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
      const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
      scale[i * blocks + g] = amax / 32767.0f;
      int16_t* qb = q + i * k + g * 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb),
                          _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(a, inv))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 16),
                          _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(b, inv))));
    }
  }
}

void q8_0_tiles_cols(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias,
                     float* y, int64_t n0, int64_t n1) {
  x86::q8_0_tiles_cols<Tile, 8, 4, 2, 1>(x, m, k, tiles, n, bias, y, n0, n1);
}

}  // namespace minfer::kernels::avx512
