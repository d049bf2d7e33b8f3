// Reference RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, as in HF LlamaRMSNorm (f32 throughout).
#include <cmath>

#include "kernels/ref/ref_kernels.h"
#include "kernels/ref/weight_load.h"

namespace minfer::kernels::ref {

void rmsnorm_leaf(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim) {
  with_weights(weight, wtype, [&](auto wt) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      float ss = 0.0f;
      for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * wt[i];
    }
  });
}

void rmsnorm(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim) {
  MINFER_CHECK(weight.numel() == dim, "ref::rmsnorm: weight {} for dim {}", weight.shape_string(), dim);
  rmsnorm_leaf(x, weight.data, weight.dtype, eps, y, rows, dim);
}

}  // namespace minfer::kernels::ref
