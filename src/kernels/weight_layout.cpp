// Re-laying bf16 weights for the GEMM that reads them fastest (TensorLayout, tensor/tensor.h).
#include <cstring>

#include "base/error.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/leaf.h"

namespace minfer::kernels {

bool gemm_prefers_bf16_row_tiles() { return active_kernels().leaves->gemm_bf16_tiles_cols != nullptr; }

Tensor to_bf16_row_tiles(const Tensor& w) {
  if (w.dtype != DType::BF16 || w.rank() != 2 || w.layout != TensorLayout::kRowMajor || w.quant)
    fail("to_bf16_row_tiles: needs a row-major bf16 matrix, got {} {}", dtype_name(w.dtype), w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t kp = (k + 31) / 32 * 32;
  Tensor t = Tensor::allocate(DType::BF16, {(n + 7) / 8 * 8, kp});  // zero-filled: the padding stays 0
  const auto* src = w.as<uint16_t>();
  auto* dst = t.mutable_as<uint16_t>();
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* tile = dst + (r / 8) * 8 * kp + (r % 8) * 32;
    for (int64_t c = 0; c < k; c += 32) {
      const int64_t len = k - c < 32 ? k - c : 32;
      std::memcpy(tile + (c / 32) * 256, src + r * k + c, static_cast<size_t>(len) * sizeof(uint16_t));
    }
  }
  t.shape = {n, k};
  t.layout = TensorLayout::kBf16RowTiles;
  return t;
}

}  // namespace minfer::kernels
