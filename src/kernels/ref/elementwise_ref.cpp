// Reference element-wise ops: SiLU-gated product, addition, row softmax.
#include <cmath>

#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void softmax(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    float mx = -INFINITY;
    for (int64_t i = 0; i < cols; ++i) mx = v[i] > mx ? v[i] : mx;
    float sum = 0.0f;
    for (int64_t i = 0; i < cols; ++i) {
      v[i] = std::exp(v[i] - mx);
      sum += v[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < cols; ++i) v[i] *= inv;
  }
}

}  // namespace minfer::kernels::ref
