// Re-laying bf16 weights for the GEMM that reads them fastest (TensorLayout, tensor/tensor.h).
#include <algorithm>

#include "base/error.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/leaf.h"

namespace minfer::kernels {

bool gemm_prefers_bf16_blocked() { return active_kernels().leaves->gemm_bf16_blocked_cols != nullptr; }

Tensor to_bf16_blocked(const Tensor& w, ThreadPool* pool) {
  if (w.dtype != DType::BF16 || w.rank() != 2 || w.layout != TensorLayout::kRowMajor || w.quant)
    fail("to_bf16_blocked: needs a row-major bf16 matrix, got {} {}", dtype_name(w.dtype), w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t kp = bf16_row_stride(k);
  Tensor t = Tensor::allocate(DType::BF16, {(n + 63) / 64 * 64, kp});  // zero-filled: the padding stays 0
  const auto* src = w.as<uint16_t>();
  auto* dst = reinterpret_cast<uint32_t*>(t.mutable_as<uint16_t>());
  // oneDNN's BA16a64b2a for W^T [kp, n]: the pair (W[r, 2q], W[r, 2q + 1]) of row r sits in the block of rows
  // r / 64, at pair q, row r % 64; the output is written front to back, pair by pair (the block's 64 source
  // rows, 64 x k bf16, stay in cache meanwhile).
  const int64_t pairs = k / 2;  // whole pairs; an odd k leaves a last column whose partner is padding
  parallel_for(pool, static_cast<size_t>((n + 63) / 64), 1, [=](size_t b0, size_t b1) {
    for (auto b = static_cast<int64_t>(b0); b < static_cast<int64_t>(b1); ++b) {
      const int64_t rows = std::min<int64_t>(64, n - b * 64);
      uint32_t* out = dst + b * 64 * (kp / 2);
      for (int64_t q = 0; q < kp / 2; ++q, out += 64) {
        for (int64_t r = 0; r < rows; ++r) {
          const uint16_t* row = src + (b * 64 + r) * k;
          if (q < pairs) {
            out[r] = uint32_t{row[2 * q]} | (uint32_t{row[2 * q + 1]} << 16);
          } else if (2 * q < k) {
            out[r] = row[2 * q];  // odd k: the last column beside a zero
          }
        }
      }
    }
  });
  t.shape = {n, k};
  t.layout = TensorLayout::kBf16Blocked64;
  return t;
}

}  // namespace minfer::kernels
