// Re-laying bf16 weights for the GEMM that reads them fastest (TensorLayout, tensor/tensor.h).
#include "base/error.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/leaf.h"

namespace minfer::kernels {

bool gemm_prefers_bf16_blocked() { return active_kernels().leaves->gemm_bf16_blocked_cols != nullptr; }

Tensor to_bf16_blocked(const Tensor& w) {
  if (w.dtype != DType::BF16 || w.rank() != 2 || w.layout != TensorLayout::kRowMajor || w.quant)
    fail("to_bf16_blocked: needs a row-major bf16 matrix, got {} {}", dtype_name(w.dtype), w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t kp = (k + 31) / 32 * 32;
  Tensor t = Tensor::allocate(DType::BF16, {(n + 63) / 64 * 64, kp});  // zero-filled: the padding stays 0
  const auto* src = w.as<uint16_t>();
  auto* dst = t.mutable_as<uint16_t>();
  // oneDNN's BA16a64b2a for W^T [kp, n]: element (row r of W, column c) sits in the block of rows r / 64, the
  // sub-block of columns c / 16, at pair (c % 16) / 2, row r % 64, half c % 2.
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* block = dst + (r / 64) * 64 * kp + (r % 64) * 2;
    for (int64_t c = 0; c < k; ++c) block[(c / 16) * 1024 + (c % 16) / 2 * 128 + c % 2] = src[r * k + c];
  }
  t.shape = {n, k};
  t.layout = TensorLayout::kBf16Blocked64;
  return t;
}

}  // namespace minfer::kernels
