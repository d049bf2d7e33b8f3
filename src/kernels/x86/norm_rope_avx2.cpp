// AVX2 RMSNorm and rotary embedding; element-wise arithmetic in the reference's order (see the AVX-512 file).
#include <cmath>

#include "kernels/ref/ref_kernels.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/rope_tables.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

template <class W>
void rmsnorm_rows(const float* x, const typename W::Elem* w, float eps, float* y, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    __m256 s0 = _mm256_setzero_ps();
    __m256 s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) {
      const __m256 a = _mm256_loadu_ps(xr + i);
      const __m256 b = _mm256_loadu_ps(xr + i + 8);
      s0 = _mm256_fmadd_ps(a, a, s0);
      s1 = _mm256_fmadd_ps(b, b, s1);
    }
    for (; i < dim; i += 8) {
      const __m256 a = load_partial(xr + i, dim - i);
      s0 = _mm256_fmadd_ps(a, a, s0);
    }
    const float ss = hsum(_mm256_add_ps(s0, s1));
    const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
    for (i = 0; i + 8 <= dim; i += 8) {
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), inv), W::load(w + i)));
    }
    if (i < dim) {
      const __m256 v = _mm256_mul_ps(_mm256_mul_ps(load_partial(xr + i, dim - i), inv), W::load(w + i, dim - i));
      store_partial(yr + i, dim - i, v);
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
        for (int64_t i = 0; i < half_rot; i += 8) {
          const int64_t n = half_rot - i;
          const __m256 c = load_partial(ct + i, n);
          const __m256 s = load_partial(st + i, n);
          const __m256 x0 = load_partial(v + i, n);
          const __m256 x1 = load_partial(v + half_rot + i, n);
          store_partial(v + i, n, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
          store_partial(v + half_rot + i, n, _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s)));
        }
      } else {
        for (int64_t i = 0; i < 2 * half_rot; i += 8) {
          const int64_t n = 2 * half_rot - i;
          const __m256 xv = load_partial(v + i, n);
          const __m256 swapped = _mm256_permute_ps(xv, 0xb1);
          const __m256 r = _mm256_add_ps(_mm256_mul_ps(xv, load_partial(cs + i, n)),
                                         _mm256_mul_ps(swapped, load_partial(sn + i, n)));
          store_partial(v + i, n, r);
        }
      }
    }
  }
}

}  // namespace minfer::kernels::avx2
