// AVX2 leaves of the GGUF block-type GEMM (contract in kernels/quant_leaf.h). The weight rows are decoded four at a
// time as the bytes u of kernels/gguf_blocks.h (the row loop, gguf_rows_impl.h, is shared with AVX-512); 32 products
// at a time come from vpmaddubsw on u and x (u <= 63 and |x| <= 127 keep its int16 pair sums exact), widened to int32
// by vpmaddwd, less z x sum(x) (the zero point, computed once per activation vector for the four rows). The IQ4 types
// (u up to 241, z = 128) take the signed values u - z and vpmaddubsw on |q| and sign(q) x instead. Per 16 elements the
// exact int32 sums are scaled by d_w x d_x in f32.
#include <cmath>

#include "kernels/gguf_blocks.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/gguf_rows_impl.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 8 lanes holding v[0] x4, v[1] x4: the scale of each int32 lane of a 32-byte product.
inline __m256 spread2(const float* v) {
  const __m256i idx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  return _mm256_permutevar8x32_ps(
      _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(v)))), idx);
}

// The dot products of an activation row with the first R decoded weight rows, into out (for x86::gguf_cols).
struct Dot {
  template <int R>
  static void rows(x86::GgufDecodedRows& w, const x86::Q8Row& x, int64_t k, int zero_point, bool offsets, float* out) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < k; c += 32) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + c));
      const __m256 xs = spread2(x.d16 + c / 16);
      const bool sign_trick = zero_point == 128;
      const __m256i unbias =
          zero_point && !sign_trick
              ? _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(zero_point)), xv), ones)
              : _mm256_setzero_si256();
      for (int r = 0; r < R; ++r) {
        const __m256i uv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.u_row(r) + c));
        __m256i p32;
        if (sign_trick) {
          const __m256i qv = _mm256_xor_si256(uv, _mm256_set1_epi8(static_cast<char>(0x80)));  // u - 128 as int8
          p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(qv, qv), _mm256_sign_epi8(xv, qv)), ones);
        } else {
          p32 = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(uv, xv), ones), unbias);
        }
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_mul_ps(spread2(w.d_row(r) + c / 16), xs), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float sum = hsum(acc[r]);
      if (offsets) {
        const float* off = w.off_row(r);
        __m256 o = _mm256_setzero_ps();
        int64_t g = 0;
        for (; g + 8 <= k / 16; g += 8) o = _mm256_fmadd_ps(_mm256_loadu_ps(off + g), _mm256_loadu_ps(x.s16 + g), o);
        float tail = 0.0f;
        for (; g < k / 16; ++g) tail += off[g] * x.s16[g];
        sum -= hsum(o) + tail;
      }
      out[r] = sum;
    }
  }
};

// One block of 32 activations to int8 (round to nearest even, as the reference), with its scale and half sums.
struct Quantize {
  static x86::Q8BlockSums block(const float* xb, int8_t* qb) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], amax = _mm256_setzero_ps();
    for (int h = 0; h < 4; ++h) {
      v[h] = _mm256_loadu_ps(xb + 8 * h);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[h]));
    }
    const float d = hmax(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i qi[4];
    for (int h = 0; h < 4; ++h) qi[h] = _mm256_cvtps_epi32(_mm256_mul_ps(v[h], id));  // nearest even
    const __m256i q16a = _mm256_packs_epi32(qi[0], qi[1]), q16b = _mm256_packs_epi32(qi[2], qi[3]);
    __m256i q8 = _mm256_packs_epi16(q16a, q16b);  // lanes interleaved by the packs: put them back in order
    q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), q8);
    return {d, hsum_epi32(_mm256_add_epi32(qi[0], qi[1])), hsum_epi32(_mm256_add_epi32(qi[2], qi[3]))};
  }
};

}  // namespace

#include "kernels/x86/gguf_isa.inc"

}  // namespace minfer::kernels::avx2
