// Quantized GEMM driver: checks the operands, quantizes the activation rows for W8A8 (in parallel when there are
// many), and splits the output columns across the pool in chunks the leaves want (multiples of 16 for W8A8
// panels and 32 for W8A16 slabs), claimed from a counter as in run_gemm.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/quant.h"
#include "kernels/quant_leaf.h"
#include "kernels/x86/x86_kernels.h"
#include "tensor/gguf_tiles.h"

namespace minfer::kernels {
namespace {

constexpr int64_t kMinParallelMacs = 1 << 16;

// Runs body(n0, n1, thread) over [0, n) in chunks of multiples of `unit` (and of the epilogue's column
// alignment), on one thread or claimed in shrinking chunks (GuidedChunks), then the epilogue on each chunk by the
// same thread.
template <typename Body>
void split_columns(ThreadPool& pool, float* y, int64_t m, int64_t n, int64_t unit, bool parallel,
                   const GemmEpilogue* epilogue, const Body& body) {
  if (epilogue && epilogue->col_align > 1) unit = std::lcm(unit, epilogue->col_align);
  auto tile = [&](int64_t n0, int64_t n1, int thread) {
    body(n0, n1, thread);
    if (epilogue && epilogue->apply) epilogue->apply(epilogue->ctx, y, m, n, n0, n1);
  };
  if (!parallel || pool.size() == 1 || n <= unit) {
    tile(0, n, 0);
    return;
  }
  GuidedChunks chunks(static_cast<size_t>(n), static_cast<size_t>(unit), pool.size());
  pool.run([&](int thread, int) {
    for (auto [b, e] = chunks.claim(); b < e; std::tie(b, e) = chunks.claim()) {
      tile(static_cast<int64_t>(b), static_cast<int64_t>(e), thread);
    }
  });
}

// Runs quantize(r0, r1) over the m activation rows: split across the pool when there are many.
template <typename Quantize>
void quantize_activations(ThreadPool& pool, int64_t m, int64_t k, const Quantize& quantize) {
  if (m * k >= (1 << 15) && pool.size() > 1) {
    pool.parallel_for(static_cast<size_t>(m), 1, quantize);
  } else {
    quantize(0, static_cast<size_t>(m));
  }
}

// GGUF block types: x quantized to int8 blocks of 32 (in buffers the calling thread keeps), then the rows of w
// decoded and multiplied by the leaf, four rows at a time.
void run_gemm_gguf(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
                   float* y, ThreadPool& pool, bool parallel, const GemmEpilogue* epilogue) {
  if (k % dtype_block(w.dtype).elements != 0)
    fail("gemm: {} weight {} has rows that are not whole blocks", dtype_name(w.dtype), w.shape_string());
  thread_local std::vector<int8_t> q_buffer;
  thread_local std::vector<float> d_buffer, s_buffer;
  thread_local std::vector<int32_t> sum_buffer;
  q_buffer.resize(static_cast<size_t>(m * k));
  d_buffer.resize(static_cast<size_t>(m * k / 16));
  s_buffer.resize(static_cast<size_t>(m * k / 16));
  sum_buffer.resize(static_cast<size_t>(m * k / 16));
  int8_t* q = q_buffer.data();
  float* d16 = d_buffer.data();
  float* s16 = s_buffer.data();
  int32_t* sum16 = sum_buffer.data();
  auto quantize = [&](size_t r0, size_t r1) {
    const int64_t i0 = static_cast<int64_t>(r0);
    leaves.quantize_q8(x + i0 * k, static_cast<int64_t>(r1 - r0), k, q + i0 * k, d16 + i0 * k / 16, s16 + i0 * k / 16,
                       sum16 + i0 * k / 16);
  };
  quantize_activations(pool, m, k, quantize);
  const Q8Blocks xq{q, d16, s16, sum16};
  const int64_t n = w.dim(0);
  if (w.layout == TensorLayout::kGgufTiles16) {
    if (!leaves.gguf_tiles_cols) fail("gemm: the {} kernels do not read the GGUF tile layout", leaves.name);
    split_columns(pool, y, m, n, GgufTiles::kRows, parallel, epilogue, [&](int64_t n0, int64_t n1, int) {
      leaves.gguf_tiles_cols(xq, m, k, w.dtype, w.as<uint8_t>(), n, bias, y, n0, n1);
    });
    return;
  }
  split_columns(pool, y, m, n, 4, parallel, epilogue, [&](int64_t n0, int64_t n1, int) {
    leaves.gguf_cols(xq, m, k, w.dtype, w.as<uint8_t>(), n, bias, y, n0, n1);
  });
}

// Q8_0 in TensorLayout::kQ8_0Tiles16: X in int16 blocks (kernels/quant_leaf.h), in buffers the calling thread keeps
// (no allocation once warm). The pool's threads see them through these pointers: a thread_local named inside the
// lambdas would be theirs.
void run_gemm_q8_0_tiles(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w,
                         const float* bias, float* y, ThreadPool& pool, bool parallel, const GemmEpilogue* epilogue) {
  thread_local std::vector<int16_t> q_buffer;
  thread_local std::vector<float> scale_buffer;
  q_buffer.resize(static_cast<size_t>(m * k));
  scale_buffer.resize(static_cast<size_t>(m * k / 32));
  int16_t* q = q_buffer.data();
  float* scale = scale_buffer.data();
  quantize_activations(pool, m, k, [&](size_t r0, size_t r1) {
    const int64_t i0 = static_cast<int64_t>(r0);
    leaves.quantize_int16(x + i0 * k, static_cast<int64_t>(r1 - r0), k, q + i0 * k, scale + i0 * k / 32);
  });
  const Int16Blocks xq{q, scale};
  const int64_t n = w.dim(0);
  split_columns(pool, y, m, n, 16, parallel, epilogue, [&](int64_t n0, int64_t n1, int) {
    leaves.q8_0_tiles_cols(xq, m, k, w.as<uint8_t>(), n, bias, y, n0, n1);
  });
}

// W8A16 (int8 rows or row-major Q8_0): f32 activations, or bf16 ones where the leaves have a bf16 GEMM for
// per-channel symmetric int8 and there are enough rows.
void run_gemm_w8a16(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
                    float* y, ThreadPool& pool, bool parallel, const GemmEpilogue* epilogue) {
  W8A16View view;
  view.data = w.data;
  if (w.dtype == DType::Q8_0) {
    view.q8_0 = true;
    view.group_size = 32;
    view.groups = k / 32;
  } else {
    const QuantParams& p = *w.quant;
    view.scales = p.scales.as<float>();
    view.zeros = p.symmetric ? nullptr : p.zeros.as<float>();
    view.group_size = p.group_size;
    view.groups = p.groups;
  }
  const int64_t n = w.dim(0);
  if (w.dtype == DType::I8 && view.groups == 1 && !view.zeros && leaves.w8a16_bf16_cols &&
      m >= leaves.w8a16_bf16_min_rows) {
    const int64_t ldxb = bf16_row_stride(k);
    const uint16_t* xb = round_rows_to_bf16(leaves.bf16_round_rows, x, m, k, pool);
    split_columns(pool, y, m, n, 32, parallel, epilogue, [&](int64_t n0, int64_t n1, int) {
      leaves.w8a16_bf16_cols(xb, ldxb, m, k, w.as<int8_t>(), view.scales, n, bias, y, n0, n1);
    });
    return;
  }
  const bool slabs = m >= leaves.w8a16_scratch_min_rows;
  std::vector<std::unique_ptr<float[]>> scratch(slabs ? static_cast<size_t>(pool.size()) : 0);
  split_columns(pool, y, m, n, slabs ? kW8A16SlabRows : 16, parallel, epilogue,
                [&](int64_t n0, int64_t n1, int thread) {
                  float* s = nullptr;
                  if (slabs) {
                    auto& buf = scratch[static_cast<size_t>(thread)];
                    if (!buf) buf = std::make_unique<float[]>(w8a16_scratch_floats(k));
                    s = buf.get();
                  }
                  leaves.w8a16_cols(x, m, k, view, n, bias, y, n0, n1, s);
                });
}

// W8A8: each row of x quantized to int8, then int8 x int8 panels.
void run_gemm_w8a8(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
                   float* y, ThreadPool& pool, bool parallel, const GemmEpilogue* epilogue) {
  const QuantParams& p = *w.quant;
  W8A8View view;
  view.panels = w.as<int8_t>();
  view.k4 = (k + 3) / 4 * 4;
  view.group_size = p.group_size;
  view.groups = p.groups;
  view.scales = p.panel_scales.as<float>();
  view.qsum = p.panel_qsum.as<int32_t>();
  view.zeros = p.symmetric ? nullptr : p.panel_zeros.as<int32_t>();
  std::vector<uint8_t> q(static_cast<size_t>(m * view.k4));
  std::vector<float> scale(static_cast<size_t>(m));
  std::vector<int32_t> sums(p.symmetric ? 0 : static_cast<size_t>(m * p.groups));
  int32_t* sums_ptr = p.symmetric ? nullptr : sums.data();
  quantize_activations(pool, m, k, [&](size_t r0, size_t r1) {
    const int64_t i0 = static_cast<int64_t>(r0), rows = static_cast<int64_t>(r1 - r0);
    leaves.quantize_rows(x + i0 * k, rows, k, view.k4, p.group_size, p.groups, q.data() + i0 * view.k4,
                         scale.data() + i0, sums_ptr ? sums_ptr + i0 * p.groups : nullptr);
  });
  const QuantizedRows rows{q.data(), scale.data(), sums_ptr};
  const int64_t n = w.dim(0);
  split_columns(pool, y, m, n, 16, parallel, epilogue,
                [&](int64_t n0, int64_t n1, int) { leaves.w8a8_cols(rows, m, view, n, bias, y, n0, n1); });
}

}  // namespace

const QuantLeaves& quant_leaves(Isa isa) {
  static const QuantLeaves avx512_without_vnni = [] {
    QuantLeaves l = kAvx512QuantLeaves;
    l.name = "avx512 (w8a8: avx2)";
    l.quantize_rows = kAvx2QuantLeaves.quantize_rows;
    l.w8a8_cols = kAvx2QuantLeaves.w8a8_cols;
    l.quantize_int16 = kAvx2QuantLeaves.quantize_int16;  // the Q8_0 tiles' int16 dot products want VNNI too
    l.q8_0_tiles_cols = kAvx2QuantLeaves.q8_0_tiles_cols;
    l.quantize_q8 = kAvx2QuantLeaves.quantize_q8;  // the GGUF block types' vpdpbusd too
    l.gguf_cols = kAvx2QuantLeaves.gguf_cols;
    l.gguf_tiles_cols = nullptr;  // vpdpbusd as well: no tiles are made, the AVX2 row kernel runs
    return l;
  }();
  static const QuantLeaves avx512_bf16 = [] {
    QuantLeaves l = cpu_features().avx512_vnni ? kAvx512QuantLeaves : avx512_without_vnni;
    l.bf16_round_rows = kAvx512Bf16Leaves.bf16_round_rows;
    l.w8a16_bf16_cols = avx512::gemm_w8a16_bf16_packed_cols;
    l.w8a16_bf16_min_rows = 64;  // where the bf16 GEMM itself switches to its packed form
    return l;
  }();
  switch (isa) {
    case Isa::kScalar: return kRefQuantLeaves;
    case Isa::kAvx2: return kAvx2QuantLeaves;
    case Isa::kAvx512: return cpu_features().avx512_vnni ? kAvx512QuantLeaves : avx512_without_vnni;
    case Isa::kAvx512Bf16: return avx512_bf16;
  }
  return kRefQuantLeaves;
}

void run_gemm_quantized(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w,
                        const float* bias, float* y, ThreadPool& pool, const GemmEpilogue* epilogue) {
  if (!is_quantized(w)) fail("gemm: weight of type {} is not quantized", dtype_name(w.dtype));
  if (w.rank() != 2 || w.dim(1) != k)
    fail("gemm: weight of shape {} does not fit inputs of width {}", w.shape_string(), k);
  const int64_t n = w.dim(0);
  if (m <= 0 || n <= 0) return;
  const bool parallel = m * n * k >= kMinParallelMacs;
  if (w.dtype == DType::Q8_0 && k % 32 != 0)
    fail("gemm: Q8_0 weight {} has rows that are not whole blocks of 32", w.shape_string());

  if ((is_block_type(w.dtype) && w.dtype != DType::Q8_0) || w.layout == TensorLayout::kGgufTiles16) {
    run_gemm_gguf(leaves, x, m, k, w, bias, y, pool, parallel, epilogue);
  } else if (w.dtype == DType::Q8_0 && w.layout == TensorLayout::kQ8_0Tiles16) {
    run_gemm_q8_0_tiles(leaves, x, m, k, w, bias, y, pool, parallel, epilogue);
  } else if (w.dtype == DType::Q8_0 || w.quant->layout == QuantParams::Layout::kRows) {
    run_gemm_w8a16(leaves, x, m, k, w, bias, y, pool, parallel, epilogue);
  } else {
    run_gemm_w8a8(leaves, x, m, k, w, bias, y, pool, parallel, epilogue);
  }
}

bool gguf_tiles_preferred() { return quant_leaves(active_kernels().isa).gguf_tiles_cols != nullptr; }

void gemm_quantized(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
                    ThreadPool& pool, const GemmEpilogue* epilogue) {
  run_gemm_quantized(quant_leaves(active_kernels().isa), x, m, k, w, bias, y, pool, epilogue);
}

void embedding_quantized(const int32_t* ids, int64_t n, const Tensor& table, float* out) {
  const int64_t dim = table.dim(1);
  for (int64_t t = 0; t < n; ++t) dequantize_rows(table, ids[t], 1, out + t * dim);
}

}  // namespace minfer::kernels
