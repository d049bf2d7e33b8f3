#include "kernels/fused/fused_weights.h"

#include <cstring>
#include <map>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "kernels/quant.h"
#include "tensor/quant_params.h"

namespace minfer::kernels::fused {
namespace {

int64_t row_elems(const Tensor& t) { return t.rank() == 1 ? 1 : t.dim(1); }

// Bytes of one row of t's data (float, GGUF blocks or int8).
size_t row_bytes(const Tensor& t) { return dtype_bytes(t.dtype, static_cast<size_t>(row_elems(t))); }

void copy_bytes_rows(const Tensor& src, int64_t r0, int64_t n, Tensor& dst, int64_t dst_row) {
  const size_t rb = row_bytes(src);
  std::memcpy(static_cast<char*>(const_cast<void*>(dst.data)) + static_cast<size_t>(dst_row) * rb,
              static_cast<const char*>(src.data) + static_cast<size_t>(r0) * rb, static_cast<size_t>(n) * rb);
}

std::vector<int64_t> shape_with_rows(const Tensor& like, int64_t rows) {
  std::vector<int64_t> s = like.shape;
  s[0] = rows;
  return s;
}

// Rows [r0, r0 + n) of src go to rows [dst_row, dst_row + n) of the packed tensor.
struct RowCopy {
  const Tensor* src;
  int64_t r0, n, dst_row;
};

// The packed tensor of `rows` rows from the copies. Int8 weights with scales move their scale (and zero-point)
// rows along with the int8 rows; a W8A8 weight (VNNI panels) is packed in row form and re-paneled.
Tensor gather_rows(const std::vector<RowCopy>& copies, int64_t rows) {
  const Tensor& first = *copies.front().src;
  if (first.dtype != DType::I8) {  // float, 1-D bias, or GGUF blocks: the rows are bytes
    Tensor out = Tensor::allocate(first.dtype, shape_with_rows(first, rows));
    for (const RowCopy& c : copies) copy_bytes_rows(*c.src, c.r0, c.n, out, c.dst_row);
    // Checkpoint weights read from the file map need not stay resident beside their packed copy.
    for (const RowCopy& c : copies) MappedFile::release_pages(c.src->data, c.src->nbytes());
    return out;
  }
  const QuantParams& p = *first.quant;
  const int64_t k = first.dim(1);
  Tensor q = Tensor::allocate(DType::I8, {rows, k});
  Tensor scales = Tensor::allocate(DType::F32, {rows, p.groups});
  Tensor zeros = p.symmetric ? Tensor{} : Tensor::allocate(DType::F32, {rows, p.groups});
  std::map<const Tensor*, Tensor> row_form;  // each source re-laid once (W8A8 panels -> rows), not per copy
  for (const RowCopy& c : copies) {
    auto it = row_form.find(c.src);
    if (it == row_form.end()) it = row_form.emplace(c.src, relayout(*c.src, /*int8_activations=*/false)).first;
    const Tensor& src_rows = it->second;
    copy_bytes_rows(src_rows, c.r0, c.n, q, c.dst_row);
    copy_bytes_rows(src_rows.quant->scales, c.r0, c.n, scales, c.dst_row);
    if (!p.symmetric) copy_bytes_rows(src_rows.quant->zeros, c.r0, c.n, zeros, c.dst_row);
  }
  return relayout(make_quantized(q, scales, zeros, p.group_size), p.int8_activations);
}

}  // namespace

bool packable(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype || a.rank() != b.rank() || a.rank() < 1 || a.rank() > 2 || row_elems(a) != row_elems(b) ||
      a.layout != TensorLayout::kRowMajor || b.layout != TensorLayout::kRowMajor)
    return false;
  switch (a.dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return true;
    case DType::I8: {  // int8 with scales: the same scheme on both sides
      if (!a.quant || !b.quant || a.rank() != 2) return false;
      const QuantParams &pa = *a.quant, &pb = *b.quant;
      return pa.group_size == pb.group_size && pa.symmetric == pb.symmetric &&
             pa.int8_activations == pb.int8_activations;
    }
    default: return is_block_type(a.dtype) && a.rank() == 2;  // GGUF blocks: whole rows of bytes
  }
}

Tensor pack_qkv(const Tensor& wq, const Tensor& wk, const Tensor& wv, int64_t head_dim) {
  MINFER_CHECK(packable(wq, wk) && packable(wq, wv), "pack_qkv: q {} k {} v {} differ in type or width",
               wq.shape_string(), wk.shape_string(), wv.shape_string());
  MINFER_CHECK(wk.dim(0) == wv.dim(0) && wk.dim(0) % head_dim == 0 && wq.dim(0) % head_dim == 0,
               "pack_qkv: k {} / v {} are not whole heads of {}", wk.shape_string(), wv.shape_string(), head_dim);
  const int64_t kv_heads = wk.dim(0) / head_dim;
  std::vector<RowCopy> copies;
  for (int64_t g = 0; g < kv_heads; ++g) {
    copies.push_back({&wk, g * head_dim, head_dim, 2 * g * head_dim});
    copies.push_back({&wv, g * head_dim, head_dim, (2 * g + 1) * head_dim});
  }
  copies.push_back({&wq, 0, wq.dim(0), 2 * wk.dim(0)});
  return gather_rows(copies, wq.dim(0) + 2 * wk.dim(0));
}

Tensor interleave_gate_up(const Tensor& w_gate, const Tensor& w_up, int64_t block) {
  MINFER_CHECK(packable(w_gate, w_up) && w_gate.dim(0) == w_up.dim(0) && block > 0,
               "interleave_gate_up: gate {} and up {} differ", w_gate.shape_string(), w_up.shape_string());
  const int64_t f = w_gate.dim(0);
  std::vector<RowCopy> copies;
  for (int64_t f0 = 0; f0 < f; f0 += block) {
    const int64_t len = f - f0 < block ? f - f0 : block;
    copies.push_back({&w_gate, f0, len, 2 * f0});
    copies.push_back({&w_up, f0, len, 2 * f0 + len});
  }
  return gather_rows(copies, 2 * f);
}

}  // namespace minfer::kernels::fused
