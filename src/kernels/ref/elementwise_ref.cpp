// Reference element-wise ops: SiLU- and GELU(tanh)-gated products, addition, row softmax.
#include <algorithm>
#include <cmath>

#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void sigmoid_mul(const float* gate, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] / (1.0f + std::exp(-gate[i]));
}

// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) = g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))):
// the second form is the SiLU's with a cubic argument, which the vector leaves share.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float z = kTwoSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + std::exp(-z)) * up[i];
  }
}

void gelu_tanh(const float* x, float* out, int64_t n) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = x[i];
    out[i] = g / (1.0f + std::exp(-kTwoSqrt2OverPi * (g + 0.044715f * g * g * g)));
  }
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kSwigluOaiLimit);
    const float u = std::min(std::max(up[i], -kSwigluOaiLimit), kSwigluOaiLimit);
    out[i] = g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
  }
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
