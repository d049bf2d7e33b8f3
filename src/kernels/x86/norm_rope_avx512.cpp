// AVX-512 RMSNorm and rotary embedding. Both do the element-wise arithmetic in the reference's order (no FMA
// contraction), so only the RMSNorm sum of squares differs from the reference, by summation order.
#include <cmath>

#include "kernels/ref/ref_kernels.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/rope_tables.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

template <class W>
void rmsnorm_rows(const float* x, const typename W::Elem* w, float eps, float* y, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    __m512 s0 = _mm512_setzero_ps();
    __m512 s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= dim; i += 32) {
      const __m512 a = _mm512_loadu_ps(xr + i);
      const __m512 b = _mm512_loadu_ps(xr + i + 16);
      s0 = _mm512_fmadd_ps(a, a, s0);
      s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < dim; i += 16) {
      const __m512 a = _mm512_maskz_loadu_ps(tail_mask(dim - i), xr + i);
      s0 = _mm512_fmadd_ps(a, a, s0);
    }
    const float ss = hsum(_mm512_add_ps(s0, s1));
    const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
    for (i = 0; i < dim; i += 16) {
      const __mmask16 m = tail_mask(dim - i);
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv), W::load(w + i, m));
      _mm512_mask_storeu_ps(yr + i, m, v);
    }
  }
}

using x86::kMaxRopeHalfRot;

}  // namespace

void rmsnorm(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim) {
  switch (wtype) {
    case DType::F16: return rmsnorm_rows<F16W>(x, static_cast<const uint16_t*>(weight), eps, y, rows, dim);
    case DType::BF16: return rmsnorm_rows<Bf16W>(x, static_cast<const uint16_t*>(weight), eps, y, rows, dim);
    default: return rmsnorm_rows<F32W>(x, static_cast<const float*>(weight), eps, y, rows, dim);
  }
}

void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style) {
  if (half_rot > kMaxRopeHalfRot) return ref::rope(x, cos, sin, tokens, heads, head_dim, half_rot, style);
  // Neox rotates pair (i, i + half_rot) by the table's row as is; interleaved by cs/sn (x86::interleaved_rope_row).
  alignas(64) float cs[2 * kMaxRopeHalfRot];
  alignas(64) float sn[2 * kMaxRopeHalfRot];
  const bool neox = style == RopeStyle::kNeox;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half_rot;
    const float* st = sin + t * half_rot;
    if (!neox) x86::interleaved_rope_row(ct, st, half_rot, cs, sn);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      if (neox) {
        for (int64_t i = 0; i < half_rot; i += 16) {
          const __mmask16 m = tail_mask(half_rot - i);
          const __m512 c = _mm512_maskz_loadu_ps(m, ct + i);
          const __m512 s = _mm512_maskz_loadu_ps(m, st + i);
          const __m512 x0 = _mm512_maskz_loadu_ps(m, v + i);
          const __m512 x1 = _mm512_maskz_loadu_ps(m, v + half_rot + i);
          _mm512_mask_storeu_ps(v + i, m, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
          _mm512_mask_storeu_ps(v + half_rot + i, m, _mm512_add_ps(_mm512_mul_ps(x1, c), _mm512_mul_ps(x0, s)));
        }
      } else {
        for (int64_t i = 0; i < 2 * half_rot; i += 16) {
          const __mmask16 m = tail_mask(2 * half_rot - i);
          const __m512 xv = _mm512_maskz_loadu_ps(m, v + i);
          const __m512 swapped = _mm512_permute_ps(xv, 0xb1);
          const __m512 r = _mm512_add_ps(_mm512_mul_ps(xv, _mm512_maskz_loadu_ps(m, cs + i)),
                                         _mm512_mul_ps(swapped, _mm512_maskz_loadu_ps(m, sn + i)));
          _mm512_mask_storeu_ps(v + i, m, r);
        }
      }
    }
  }
}

}  // namespace minfer::kernels::avx512
