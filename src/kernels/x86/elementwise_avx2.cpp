// AVX2 element-wise kernels: SiLU-gated product, addition, row softmax, embedding rows.
#include <cmath>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

template <class W>
void embedding_rows(const int32_t* ids, int64_t n, const typename W::Elem* table, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const typename W::Elem* row = table + static_cast<int64_t>(ids[t]) * dim;
    float* o = out + t * dim;
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) _mm256_storeu_ps(o + i, W::load(row + i));
    if (i < dim) store_partial(o + i, dim - i, W::load(row + i, dim - i));
  }
}

}  // namespace

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t c = n - i;
    const __m256 g = load_partial(gate + i, c);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    store_partial(out + i, c, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), load_partial(up + i, c)));
  }
}

// g / (1 + exp(-z)) * up with z = 2 sqrt(2/pi) (g + 0.044715 g^3): GELU(tanh) as ref::gelu_tanh_mul writes it.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c1 = _mm256_set1_ps(-1.5957691216057308f);
  const __m256 c3 = _mm256_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t c = n - i;
    const __m256 g = load_partial(gate + i, c);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c3, g), _mm256_mul_ps(g, g), g);
    const __m256 e = exp_ps(_mm256_mul_ps(c1, inner));
    store_partial(out + i, c, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), load_partial(up + i, c)));
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) store_partial(out + i, n - i, _mm256_add_ps(load_partial(a + i, n - i), load_partial(b + i, n - i)));
}

void softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= cols; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(v + i));
    float vmax = hmax(mx);
    for (; i < cols; ++i) vmax = v[i] > vmax ? v[i] : vmax;
    const __m256 bmax = _mm256_set1_ps(vmax);
    __m256 sum = _mm256_setzero_ps();
    for (i = 0; i < cols; i += 8) {
      const int64_t c = cols - i;
      // Lanes past the row end are exp(0 - max) of zero-filled loads: mask them out of the sum.
      const __m256 e =
          _mm256_and_ps(exp_ps(_mm256_sub_ps(load_partial(v + i, c), bmax)), _mm256_castsi256_ps(lane_mask(c)));
      sum = _mm256_add_ps(sum, e);
      store_partial(v + i, c, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
    for (i = 0; i + 8 <= cols; i += 8) _mm256_storeu_ps(v + i, _mm256_mul_ps(_mm256_loadu_ps(v + i), inv));
    if (i < cols) store_partial(v + i, cols - i, _mm256_mul_ps(load_partial(v + i, cols - i), inv));
  }
}

void embedding(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out) {
  switch (dtype) {
    case DType::F16: return embedding_rows<F16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
    case DType::BF16: return embedding_rows<Bf16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
    default: return embedding_rows<F32W>(ids, n, static_cast<const float*>(table), dim, out);
  }
}

}  // namespace minfer::kernels::avx2
