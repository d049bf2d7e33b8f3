// Reference embedding lookup: rows of the table converted to f32.
#include "kernels/ref/ref_kernels.h"
#include "kernels/ref/weight_load.h"

namespace minfer::kernels::ref {

void embedding_leaf(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out) {
  with_weights(table, dtype, [&](auto wt) {
    for (int64_t t = 0; t < n; ++t) {
      const int64_t row = static_cast<int64_t>(ids[t]) * dim;
      for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = wt[row + i];
    }
  });
}

void embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out) {
  MINFER_CHECK(table.rank() == 2, "ref::embedding: table {}", table.shape_string());
  for (int64_t t = 0; t < n; ++t) {
    MINFER_CHECK(ids[t] >= 0 && ids[t] < table.dim(0), "token id {} outside vocab {}", ids[t], table.dim(0));
  }
  embedding_leaf(ids, n, table.data, table.dtype, table.dim(1), out);
}

}  // namespace minfer::kernels::ref
