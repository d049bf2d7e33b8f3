// AVX-512 (VNNI) leaves of the GGUF block-type GEMM (contract in kernels/quant_leaf.h). The weight rows are decoded
// four at a time as the unsigned bytes u of kernels/gguf_blocks.h (the row loop, gguf_rows_impl.h, is shared with
// AVX2), so one vpdpbusd multiplies 64 of them by 64 int8 activations with no sign fix-up. Its
// accumulator starts at -z x sum(x) of each lane (one more vpdpbusd per activation vector, shared by the four rows;
// none when the type's zero point z is 0), so the int32 sums are exactly sum((u - z) x), as in the reference. Per 16
// elements they are scaled by d_w x d_x in f32.
#include <cmath>

#include "kernels/gguf_blocks.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/gguf_rows_impl.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// 16 lanes holding v[0] x4, v[1] x4, v[2] x4, v[3] x4: the scale of each int32 lane of a vpdpbusd over 64 bytes.
inline __m512 spread4(__m128 v) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

// The dot products of an activation row with the first R decoded weight rows, into out (for x86::gguf_cols).
struct Dot {
  template <int R>
  static void rows(x86::GgufDecodedRows& w, const x86::Q8Row& x, int64_t k, int zero_point, bool offsets, float* out) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; c += 64) {
      const bool tail = k - c < 64;  // k is a multiple of 32: a last half vector
      const __mmask64 bytes = tail ? 0xFFFFFFFFull : ~0ull;
      const __mmask8 subs = tail ? 0x3 : 0xF;
      const __m512i xv = _mm512_maskz_loadu_epi8(bytes, x.q + c);
      const __m128 xs = _mm_maskz_loadu_ps(subs, x.d16 + c / 16);
      const __m512i zero = _mm512_setzero_si512();
      const __m512i unbias =
          zero_point
              ? _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(static_cast<char>(zero_point)), xv))
              : zero;
      for (int r = 0; r < R; ++r) {
        const __m512i uv = _mm512_maskz_loadu_epi8(bytes, w.u_row(r) + c);
        const __m512i p = _mm512_dpbusd_epi32(unbias, uv, xv);  // sum of (u - z) x per 4 elements, exact
        const __m128 s = _mm_mul_ps(_mm_maskz_loadu_ps(subs, w.d_row(r) + c / 16), xs);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), spread4(s), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      if (!offsets) {
        out[r] = _mm512_reduce_add_ps(acc[r]);
        continue;
      }
      __m512 o = _mm512_setzero_ps();
      const float* off = w.off_row(r);
      for (int64_t g = 0; g < k / 16; g += 16) {
        const __mmask16 mask = tail_mask(k / 16 - g);
        o = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, off + g), _mm512_maskz_loadu_ps(mask, x.s16 + g), o);
      }
      out[r] = _mm512_reduce_add_ps(acc[r]) - _mm512_reduce_add_ps(o);
    }
  }
};

// One block of 32 activations to int8, with its scale and half sums.
struct Quantize {
  static x86::Q8BlockSums block(const float* xb, int8_t* qb) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 a = _mm512_loadu_ps(xb), c = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, c)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    // Round to nearest even, as std::nearbyint in the reference.
    const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, id)), qc = _mm512_cvtps_epi32(_mm512_mul_ps(c, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtsepi32_epi8(qa));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtsepi32_epi8(qc));
    return {d, _mm512_reduce_add_epi32(qa), _mm512_reduce_add_epi32(qc)};
  }
};

}  // namespace

#include "kernels/x86/gguf_isa.inc"

}  // namespace minfer::kernels::avx512
