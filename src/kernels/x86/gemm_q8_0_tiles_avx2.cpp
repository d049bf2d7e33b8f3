// AVX2 GEMM over GGUF Q8_0 weights in TensorLayout::kQ8_0Tiles16, as gemm_q8_0_tiles_avx512.cpp with 8 lanes: a
// tile's column pair is two 16-byte halves (rows 0-7 and 8-15), each widened to int16 and multiplied by the
// broadcast int16 pair of X with vpmaddwd, added into exact int32 row sums; per block the same fused
// multiply-add by (weight scale x activation scale) as the reference.
#include <algorithm>
#include <cmath>

#include "kernels/quant_leaf.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/q8_0_tiles_impl.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

inline __m256i widen(const uint8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// One tile for groups of rows of X (x86::q8_0_tiles_cols).
struct Tile {
  // The int16 pair of X at p in every 32-bit lane.
  static __m256i pair(const int16_t* p) { return _mm256_set1_epi32(x86::pair_bits(p)); }
  // The first c (at most 16) of a tile's outputs are stored.
  static int64_t columns(int64_t c) { return std::min<int64_t>(Q80Tiles::kRows, c); }
  // y[i0 + i, 0..16) for i < MR over one tile (the first `cols` outputs stored).
  template <int MR>
  static void rows(const Int16Blocks& x, int64_t i0, int64_t k, const uint8_t* tile, const float* bias, float* y,
                   int64_t ldy, int64_t cols) {
    const int64_t blocks = k / 32;
    __m256 lo[MR], hi[MR];
    for (int i = 0; i < MR; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < blocks; ++g) {
      const uint8_t* b = tile + g * Q80Tiles::kBlockBytes;
      __m256i slo[MR], shi[MR];
      for (int i = 0; i < MR; ++i) slo[i] = shi[i] = _mm256_setzero_si256();
      const int16_t* xq = x.q + i0 * k + g * 32;
      for (int p = 0; p < 16; ++p) {
        const __m256i w0 = widen(b + 32 + p * 32), w1 = widen(b + 48 + p * 32);
        for (int i = 0; i < MR; ++i) {
          const __m256i xp = pair(xq + i * k + 2 * p);
          slo[i] = _mm256_add_epi32(slo[i], _mm256_madd_epi16(w0, xp));
          shi[i] = _mm256_add_epi32(shi[i], _mm256_madd_epi16(w1, xp));
        }
      }
      const __m256 ws0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
      const __m256 ws1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
      for (int i = 0; i < MR; ++i) {
        const __m256 xs = _mm256_set1_ps(x.scale[(i0 + i) * blocks + g]);
        lo[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(slo[i]), _mm256_mul_ps(ws0, xs), lo[i]);
        hi[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(shi[i]), _mm256_mul_ps(ws1, xs), hi[i]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      float* yr = y + (i0 + i) * ldy;
      const int64_t c0 = std::min<int64_t>(cols, 8), c1 = cols - c0;
      const __m256 v0 = bias ? _mm256_add_ps(lo[i], load_partial(bias, c0)) : lo[i];
      store_partial(yr, c0, v0);
      if (c1 > 0) {
        const __m256 v1 = bias ? _mm256_add_ps(hi[i], load_partial(bias + 8, c1)) : hi[i];
        store_partial(yr + 8, c1, v1);
      }
    }
  }
};

}  // namespace

void quantize_int16(const float* x, int64_t rows, int64_t k, int16_t* q, float* scale) {
  const int64_t blocks = k / 32;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t g = 0; g < blocks; ++g) {
      const float* xb = x + i * k + g * 32;
      __m256 v[4];
      __m256 vmax = _mm256_setzero_ps();
      for (int h = 0; h < 4; ++h) {
        v[h] = _mm256_loadu_ps(xb + 8 * h);
        vmax = _mm256_max_ps(vmax, _mm256_and_ps(v[h], abs_mask));
      }
      const float amax = hmax(vmax);
      const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
      scale[i * blocks + g] = amax / 32767.0f;
      int16_t* qb = q + i * k + g * 32;
      for (int h = 0; h < 4; h += 2) {
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(v[h], inv));
        const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(v[h + 1], inv));
        // packs works per 128-bit lane: (a0-3 c0-3 a4-7 c4-7) -> reorder the 64-bit quarters to a0-7 c0-7.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, c), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 8 * h), packed);
      }
    }
  }
}

void q8_0_tiles_cols(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias,
                     float* y, int64_t n0, int64_t n1) {
  x86::q8_0_tiles_cols<Tile, 2, 1>(x, m, k, tiles, n, bias, y, n0, n1);
}

}  // namespace minfer::kernels::avx2
