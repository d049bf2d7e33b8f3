// AVX-512 element-wise kernels: SiLU-gated product, addition, row softmax, embedding rows.
#include <cmath>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

template <class W>
void embedding_rows(const int32_t* ids, int64_t n, const typename W::Elem* table, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const typename W::Elem* row = table + static_cast<int64_t>(ids[t]) * dim;
    float* o = out + t * dim;
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) _mm512_storeu_ps(o + i, W::load(row + i));
    if (i < dim) _mm512_mask_storeu_ps(o + i, tail_mask(dim - i), W::load(row + i, tail_mask(dim - i)));
  }
}

}  // namespace

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 r = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

// g / (1 + exp(-z)) * up with z = 2 sqrt(2/pi) (g + 0.044715 g^3): GELU(tanh) as ref::gelu_tanh_mul writes it.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 c1 = _mm512_set1_ps(-1.5957691216057308f);
  const __m512 c3 = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(c3, g), _mm512_mul_ps(g, g), g);
    const __m512 e = exp_ps(_mm512_mul_ps(c1, inner));
    const __m512 r = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < cols; i += 16) {
      mx = _mm512_mask_max_ps(mx, tail_mask(cols - i), mx, _mm512_maskz_loadu_ps(tail_mask(cols - i), v + i));
    }
    const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < cols; i += 16) {
      const __mmask16 m = tail_mask(cols - i);
      const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + i), vmax));
      sum = _mm512_mask_add_ps(sum, m, sum, e);
      _mm512_mask_storeu_ps(v + i, m, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / hsum(sum));
    for (int64_t i = 0; i < cols; i += 16) {
      const __mmask16 m = tail_mask(cols - i);
      _mm512_mask_storeu_ps(v + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, v + i), inv));
    }
  }
}

void embedding(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out) {
  switch (dtype) {
    case DType::F16: return embedding_rows<F16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
    case DType::BF16: return embedding_rows<Bf16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
    default: return embedding_rows<F32W>(ids, n, static_cast<const float*>(table), dim, out);
  }
}

}  // namespace minfer::kernels::avx512
