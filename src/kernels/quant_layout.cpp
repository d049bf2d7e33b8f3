// Quantizing float matrices to int8, the row and VNNI-panel layouts, and dequantization (tensor/quant_params.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/gguf_blocks.h"
#include "kernels/gguf_tiles.h"
#include "kernels/quant.h"
#include "kernels/quant_leaf.h"
#include "tensor/q8_0_tiles.h"

namespace minfer::kernels {
namespace {

float element(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.as<float>()[i];
    case DType::F16: return f16_to_f32(t.as<uint16_t>()[i]);
    case DType::BF16: return bf16_to_f32(t.as<uint16_t>()[i]);
    case DType::I8: return static_cast<float>(t.as<int8_t>()[i]);
    default: fail("quantization: cannot read elements of type {}", dtype_name(t.dtype));
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Block g of row r of a Q8_0 matrix in either layout: its 32 int8 weights into q, its scale returned.
float q80_block(const Tensor& w, int64_t r, int64_t g, int8_t* q) {
  const uint8_t* data = w.as<uint8_t>();
  uint16_t d;
  if (w.layout == TensorLayout::kQ8_0Tiles16) {
    const Q80Tiles tiles{w.dim(0), w.dim(1)};
    const uint8_t* block = data + tiles.block_offset(r / Q80Tiles::kRows, g);
    const int64_t j = r % Q80Tiles::kRows;
    std::memcpy(&d, block + Q80Tiles::scale_in_block(j), 2);
    for (int64_t p = 0; p < 16; ++p) std::memcpy(q + 2 * p, block + Q80Tiles::pair_in_block(p, j), 2);
  } else {
    const uint8_t* block = data + (r * (w.dim(1) / 32) + g) * kQ80BlockBytes;
    std::memcpy(&d, block, 2);
    std::memcpy(q, block + 2, 32);
  }
  return f16_to_f32(d);
}

// Rows of a GGUF block-type matrix: each decoded (kernels/gguf_blocks.h) and expanded as d * (u - z) - m, which is the
// f32 gguf-py's dequantizers give.
void dequantize_gguf_rows(const Tensor& w, int64_t row0, int64_t rows, float* out) {
  const int64_t k = w.dim(1);
  if (k % dtype_block(w.dtype).elements != 0)
    fail("dequantize_rows: {} rows of {} elements are not whole blocks", dtype_name(w.dtype), k);
  const size_t row_bytes = dtype_bytes(w.dtype, static_cast<size_t>(k));
  const int z = gguf::zero_point(w.dtype);
  std::vector<uint8_t> u(static_cast<size_t>(k));
  std::vector<float> d(static_cast<size_t>(k / gguf::kSubBlock)), m(d.size());
  for (int64_t r = row0; r < row0 + rows; ++r) {
    gguf::decode_row(w.dtype, w.as<uint8_t>() + static_cast<size_t>(r) * row_bytes, k, u.data(), d.data(), m.data());
    float* o = out + (r - row0) * k;
    for (int64_t e = 0; e < k; ++e) {
      const size_t g = static_cast<size_t>(e / gguf::kSubBlock);
      o[e] = d[g] * static_cast<float>(u[static_cast<size_t>(e)] - z) - m[g];
    }
  }
}

// Fills the panel arrays of a kVnniPanels tensor from its row form.
Tensor pack_panels(const int8_t* q, int64_t n, int64_t k, const QuantParams& rows_params) {
  auto p = std::make_shared<QuantParams>(rows_params);
  p->layout = QuantParams::Layout::kVnniPanels;
  p->int8_activations = true;
  const int64_t panels = ceil_div(n, 16), k4 = ceil_div(k, 4) * 4, g_count = p->groups;
  // The panels are padded to 16 rows and 4 columns: the payload is a flat buffer of that size.
  Tensor payload = Tensor::allocate(DType::I8, {panels * 16 * k4});
  int8_t* out = payload.mutable_as<int8_t>();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t panel = r / 16, lane = r % 16;
    for (int64_t c = 0; c < k; ++c) out[((panel * (k4 / 4) + c / 4) * 16 + lane) * 4 + c % 4] = q[r * k + c];
  }
  p->panel_scales = Tensor::allocate(DType::F32, {panels, g_count, 16});
  p->panel_qsum = Tensor::allocate(DType::I32, {panels, g_count, 16});
  if (!p->symmetric) p->panel_zeros = Tensor::allocate(DType::I32, {panels, g_count, 16});
  const float* scales = p->scales.as<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < g_count; ++g) {
      const int64_t at = ((r / 16) * g_count + g) * 16 + r % 16;
      p->panel_scales.mutable_as<float>()[at] = scales[r * g_count + g];
      int32_t s = 0;
      for (int64_t c = g * p->group_size; c < std::min(k, (g + 1) * p->group_size); ++c) s += q[r * k + c];
      p->panel_qsum.mutable_as<int32_t>()[at] = s;
      if (!p->symmetric)
        p->panel_zeros.mutable_as<int32_t>()[at] = static_cast<int32_t>(p->zeros.as<float>()[r * g_count + g]);
    }
  }
  Tensor t;
  t.dtype = DType::I8;
  t.shape = {n, k};
  t.data = payload.data;
  t.owner = payload.owner;
  t.quant = std::move(p);
  return t;
}

// Row form of a quantized tensor's int8 values (a view for kRows, a copy for panels).
Tensor rows_payload(const Tensor& w) {
  const QuantParams& p = *w.quant;
  if (p.layout == QuantParams::Layout::kRows) return w;
  const int64_t n = w.dim(0), k = w.dim(1), k4 = ceil_div(k, 4) * 4;
  Tensor out = Tensor::allocate(DType::I8, {n, k});
  const int8_t* in = w.as<int8_t>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c)
      out.mutable_as<int8_t>()[r * k + c] = in[(((r / 16) * (k4 / 4) + c / 4) * 16 + r % 16) * 4 + c % 4];
  }
  return out;
}

}  // namespace

bool is_quantized(const Tensor& w) { return is_block_type(w.dtype) || (w.dtype == DType::I8 && w.quant); }

Tensor quantize_matrix(const Tensor& w, const QuantScheme& scheme, const float* column_factors,
                       const float* row_factors) {
  if (w.rank() != 2) fail("quantize: weight of shape {} is not a matrix", w.shape_string());
  if (w.dtype == DType::Q8_0) return relayout(q8_0_to_rows(w), scheme.int8_activations);
  const int64_t n = w.dim(0), k = w.dim(1);
  if (scheme.group_size < 0 || (scheme.group_size > 0 && scheme.group_size % 4 != 0))
    fail("quantize: group size {} must be 0 (per channel) or a positive multiple of 4", scheme.group_size);
  const int64_t gs = scheme.group_size == 0 || scheme.group_size >= k ? k : scheme.group_size;
  const int64_t groups = ceil_div(k, gs);
  auto p = std::make_shared<QuantParams>();
  p->group_size = gs;
  p->groups = groups;
  p->symmetric = scheme.symmetric;
  p->scales = Tensor::allocate(DType::F32, {n, groups});
  if (!scheme.symmetric) p->zeros = Tensor::allocate(DType::F32, {n, groups});
  Tensor q = Tensor::allocate(DType::I8, {n, k});
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    const float row_factor = row_factors ? row_factors[r] : 1.0f;
    for (int64_t c = 0; c < k; ++c)
      row[static_cast<size_t>(c)] = element(w, r * k + c) * (column_factors ? column_factors[c] : 1.0f) * row_factor;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * gs, c1 = std::min(k, c0 + gs);
      float lo = 0.0f, hi = 0.0f;  // the range always includes 0, so 0 is exact
      for (int64_t c = c0; c < c1; ++c) {
        lo = std::min(lo, row[static_cast<size_t>(c)]);
        hi = std::max(hi, row[static_cast<size_t>(c)]);
      }
      float scale, zero = 0.0f;
      if (scheme.symmetric) {
        scale = std::max(-lo, hi) / 127.0f;
      } else {
        scale = (hi - lo) / 255.0f;
        zero = scale > 0.0f ? std::nearbyint(-128.0f - lo / scale) : 0.0f;
        zero = std::clamp(zero, -128.0f, 127.0f);
      }
      if (!std::isfinite(scale)) fail("quantize: weight row {} has a non-finite value", r);
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      const float qmin = scheme.symmetric ? -127.0f : -128.0f;
      for (int64_t c = c0; c < c1; ++c) {
        const float v = std::nearbyint(row[static_cast<size_t>(c)] * inv) + zero;
        q.mutable_as<int8_t>()[r * k + c] = static_cast<int8_t>(std::clamp(v, qmin, 127.0f));
      }
      p->scales.mutable_as<float>()[r * groups + g] = scale;
      if (!scheme.symmetric) p->zeros.mutable_as<float>()[r * groups + g] = zero;
    }
  }
  q.quant = std::move(p);
  return scheme.int8_activations ? relayout(q, true) : q;
}

Tensor make_quantized(const Tensor& q, const Tensor& scales, const Tensor& zeros, int64_t group_size) {
  if (q.dtype != DType::I8 || q.rank() != 2)
    fail("quantized weight must be an i8 matrix, got {} {}", dtype_name(q.dtype), q.shape_string());
  const int64_t n = q.dim(0), k = q.dim(1);
  const int64_t gs = group_size <= 0 || group_size >= k ? k : group_size;
  if (gs != k && gs % 4 != 0) fail("quantized weight: group size {} is not a multiple of 4", gs);
  const int64_t groups = ceil_div(k, gs);
  if (scales.numel() != n * groups)
    fail("quantized weight {}: scales of shape {} (expected {} x {} for group size {})", q.shape_string(),
         scales.shape_string(), n, groups, gs);
  if (!zeros.empty() && zeros.numel() != n * groups)
    fail("quantized weight {}: zero points of shape {} (expected {} x {})", q.shape_string(), zeros.shape_string(), n,
         groups);
  auto p = std::make_shared<QuantParams>();
  p->group_size = gs;
  p->groups = groups;
  p->symmetric = zeros.empty();
  p->scales = Tensor::allocate(DType::F32, {n, groups});
  for (int64_t i = 0; i < n * groups; ++i) {
    const float s = element(scales, i);
    if (!std::isfinite(s) || s < 0.0f) fail("quantized weight {}: scale {} at {} is invalid", q.shape_string(), s, i);
    p->scales.mutable_as<float>()[i] = s;
  }
  if (!zeros.empty()) {
    p->zeros = Tensor::allocate(DType::F32, {n, groups});
    for (int64_t i = 0; i < n * groups; ++i) p->zeros.mutable_as<float>()[i] = element(zeros, i);
  }
  Tensor t = q;
  t.quant = std::move(p);
  return t;
}

Tensor q8_0_to_rows(const Tensor& w) {
  if (w.dtype != DType::Q8_0 || w.rank() != 2 || w.dim(1) % 32 != 0)
    fail("q8_0_to_rows: need a Q8_0 matrix with rows a multiple of 32, got {} {}", dtype_name(w.dtype),
         w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1), blocks = k / 32;
  auto p = std::make_shared<QuantParams>();
  p->group_size = 32;
  p->groups = blocks;
  p->scales = Tensor::allocate(DType::F32, {n, blocks});
  Tensor q = Tensor::allocate(DType::I8, {n, k});
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < blocks; ++g)
      p->scales.mutable_as<float>()[r * blocks + g] = q80_block(w, r, g, q.mutable_as<int8_t>() + r * k + g * 32);
  }
  if (blocks == 1) p->group_size = k;
  q.quant = std::move(p);
  return q;
}

Tensor to_q8_0_tiles(const Tensor& w, ThreadPool* pool) {
  if (w.dtype != DType::Q8_0 || w.rank() != 2 || w.layout != TensorLayout::kRowMajor || w.dim(1) % 32 != 0)
    fail("to_q8_0_tiles: needs a row-major Q8_0 matrix with rows a multiple of 32, got {} {}", dtype_name(w.dtype),
         w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1);
  const Q80Tiles tiles{n, k};
  Tensor t = Tensor::allocate(DType::Q8_0, {tiles.tiles() * Q80Tiles::kRows, k});  // zero-filled padding rows
  t.shape = {n, k};
  t.layout = TensorLayout::kQ8_0Tiles16;
  uint8_t* out = t.mutable_as<uint8_t>();
  const uint8_t* in = w.as<uint8_t>();
  // Tile by tile, block by block: each source block's scale and 16 column pairs go to their 2-byte slots, with no
  // offset computed per element (this runs over every weight of the model at load).
  parallel_for(pool, static_cast<size_t>(tiles.tiles()), 1, [=](size_t t0, size_t t1) {
    for (auto tile = static_cast<int64_t>(t0); tile < static_cast<int64_t>(t1); ++tile) {
      const int64_t rows = std::min(Q80Tiles::kRows, n - tile * Q80Tiles::kRows);
      for (int64_t g = 0; g < tiles.blocks(); ++g) {
        uint8_t* dst = out + tiles.block_offset(tile, g);
        for (int64_t j = 0; j < rows; ++j) {
          const uint8_t* block = in + ((tile * Q80Tiles::kRows + j) * tiles.blocks() + g) * kQ80BlockBytes;
          std::memcpy(dst + Q80Tiles::scale_in_block(j), block, 2);
          for (int64_t p = 0; p < 16; ++p) std::memcpy(dst + Q80Tiles::pair_in_block(p, j), block + 2 + 2 * p, 2);
        }
      }
    }
  });
  return t;
}

Tensor relayout(const Tensor& w, bool int8_activations) {
  if (w.dtype == DType::Q8_0) return int8_activations ? relayout(q8_0_to_rows(w), true) : w;
  // The other GGUF block types run as stored, with int8 activations in either mode (kernels/gguf_blocks.h).
  if (is_block_type(w.dtype)) return w;
  if (!is_quantized(w)) fail("relayout: the tensor is not quantized");
  const bool panels = w.quant->layout == QuantParams::Layout::kVnniPanels;
  if (panels == int8_activations) return w;
  Tensor rows = rows_payload(w);
  if (!int8_activations) {
    auto p = std::make_shared<QuantParams>(*w.quant);
    p->layout = QuantParams::Layout::kRows;
    p->int8_activations = false;
    p->panel_scales = p->panel_qsum = p->panel_zeros = Tensor{};
    rows.quant = std::move(p);
    return rows;
  }
  return pack_panels(rows.as<int8_t>(), w.dim(0), w.dim(1), *w.quant);
}

void dequantize_rows(const Tensor& w, int64_t row0, int64_t rows, float* out) {
  if (!is_quantized(w) || w.rank() != 2) fail("dequantize_rows: the tensor is not a quantized matrix");
  const int64_t n = w.dim(0), k = w.dim(1);
  if (row0 < 0 || rows < 0 || row0 + rows > n) fail("dequantize_rows: rows [{}, {}) outside {}", row0, row0 + rows, n);
  if (w.layout == TensorLayout::kGgufTiles16) {
    for (int64_t r = row0; r < row0 + rows; ++r) gguf_tiles_row(w, r, out + (r - row0) * k);
    return;
  }
  if (is_block_type(w.dtype) && w.dtype != DType::Q8_0) {
    dequantize_gguf_rows(w, row0, rows, out);
    return;
  }
  const int64_t k4 = ceil_div(k, 4) * 4;
  for (int64_t r = row0; r < row0 + rows; ++r) {
    float* o = out + (r - row0) * k;
    if (w.dtype == DType::Q8_0) {
      for (int64_t g = 0; g < k / 32; ++g) {
        int8_t q[32];
        const float s = q80_block(w, r, g, q);
        for (int64_t c = 0; c < 32; ++c) o[g * 32 + c] = s * static_cast<float>(q[c]);
      }
      continue;
    }
    const QuantParams& p = *w.quant;
    const bool panels = p.layout == QuantParams::Layout::kVnniPanels;
    for (int64_t c = 0; c < k; ++c) {
      const int8_t q = panels ? w.as<int8_t>()[(((r / 16) * (k4 / 4) + c / 4) * 16 + r % 16) * 4 + c % 4]
                              : w.as<int8_t>()[r * k + c];
      const int64_t g = c / p.group_size;
      const float z = p.symmetric ? 0.0f : p.zeros.as<float>()[r * p.groups + g];
      o[c] = p.scales.as<float>()[r * p.groups + g] * (static_cast<float>(q) - z);
    }
  }
}

size_t resident_bytes(const Tensor& w) {
  if (w.dtype != DType::I8 || !w.quant) return w.nbytes();
  const QuantParams& p = *w.quant;
  const int64_t n = w.dim(0), k = w.dim(1);
  size_t bytes = p.scales.nbytes() + p.zeros.nbytes();
  if (p.layout == QuantParams::Layout::kVnniPanels) {
    bytes += static_cast<size_t>(ceil_div(n, 16) * 16 * ceil_div(k, 4) * 4);
    bytes += p.panel_scales.nbytes() + p.panel_qsum.nbytes() + p.panel_zeros.nbytes();
  } else {
    bytes += static_cast<size_t>(n * k);
  }
  return bytes;
}

}  // namespace minfer::kernels
