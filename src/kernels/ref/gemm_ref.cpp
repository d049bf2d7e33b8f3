// Reference GEMM: one dot product per output, summed in k order.
#include "kernels/ref/ref_kernels.h"
#include "kernels/ref/weight_load.h"

namespace minfer::kernels::ref {

void gemm_cols(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias, float* y,
               int64_t n0, int64_t n1) {
  with_weights(w, wtype, [&](auto wt) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = x + i * k;
      for (int64_t j = n0; j < n1; ++j) {
        float sum = 0.0f;
        for (int64_t p = 0; p < k; ++p) sum += xr[p] * wt[j * k + p];
        y[i * n + j] = bias ? sum + bias[j] : sum;
      }
    }
  });
}

void gemm(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y) {
  const int64_t n = w.dim(0);
  MINFER_CHECK(w.rank() == 2 && w.dim(1) == k, "ref::gemm: weight {} for k={}", w.shape_string(), k);
  gemm_cols(x, m, k, w.data, w.dtype, n, bias, y, 0, n);
}

}  // namespace minfer::kernels::ref
