#include "kernels/fused/fused_weights.h"

#include <cstring>

#include "base/error.h"

namespace minfer::kernels::fused {
namespace {

int64_t row_elems(const Tensor& t) { return t.rank() == 1 ? 1 : t.dim(1); }

// Copies rows [r0, r0 + n) of src to row `dst_row` of dst.
void copy_rows(const Tensor& src, int64_t r0, int64_t n, Tensor& dst, int64_t dst_row) {
  const size_t row_bytes = dtype_bytes(src.dtype, static_cast<size_t>(row_elems(src)));
  std::memcpy(static_cast<char*>(const_cast<void*>(dst.data)) + static_cast<size_t>(dst_row) * row_bytes,
              static_cast<const char*>(src.data) + static_cast<size_t>(r0) * row_bytes,
              static_cast<size_t>(n) * row_bytes);
}

std::vector<int64_t> shape_with_rows(const Tensor& like, int64_t rows) {
  std::vector<int64_t> s = like.shape;
  s[0] = rows;
  return s;
}

}  // namespace

bool packable(const Tensor& a, const Tensor& b) {
  const bool float_type = a.dtype == DType::F32 || a.dtype == DType::F16 || a.dtype == DType::BF16;
  return float_type && a.dtype == b.dtype && a.rank() == b.rank() && a.rank() >= 1 && a.rank() <= 2 &&
         row_elems(a) == row_elems(b);
}

Tensor pack_qkv(const Tensor& wq, const Tensor& wk, const Tensor& wv, int64_t head_dim) {
  MINFER_CHECK(packable(wq, wk) && packable(wq, wv), "pack_qkv: q {} k {} v {} differ in type or width",
               wq.shape_string(), wk.shape_string(), wv.shape_string());
  MINFER_CHECK(wk.dim(0) == wv.dim(0) && wk.dim(0) % head_dim == 0 && wq.dim(0) % head_dim == 0,
               "pack_qkv: k {} / v {} are not whole heads of {}", wk.shape_string(), wv.shape_string(), head_dim);
  const int64_t kv_heads = wk.dim(0) / head_dim;
  Tensor out = Tensor::allocate(wq.dtype, shape_with_rows(wq, wq.dim(0) + 2 * wk.dim(0)));
  for (int64_t g = 0; g < kv_heads; ++g) {
    copy_rows(wk, g * head_dim, head_dim, out, 2 * g * head_dim);
    copy_rows(wv, g * head_dim, head_dim, out, (2 * g + 1) * head_dim);
  }
  copy_rows(wq, 0, wq.dim(0), out, 2 * wk.dim(0));
  return out;
}

Tensor interleave_gate_up(const Tensor& w_gate, const Tensor& w_up, int64_t block) {
  MINFER_CHECK(packable(w_gate, w_up) && w_gate.dim(0) == w_up.dim(0) && block > 0,
               "interleave_gate_up: gate {} and up {} differ", w_gate.shape_string(), w_up.shape_string());
  const int64_t f = w_gate.dim(0);
  Tensor out = Tensor::allocate(w_gate.dtype, shape_with_rows(w_gate, 2 * f));
  for (int64_t f0 = 0; f0 < f; f0 += block) {
    const int64_t len = f - f0 < block ? f - f0 : block;
    copy_rows(w_gate, f0, len, out, 2 * f0);
    copy_rows(w_up, f0, len, out, 2 * f0 + len);
  }
  return out;
}

}  // namespace minfer::kernels::fused
