// GEMM driver: checks the operands and splits the output columns (weight rows) across the pool in chunks
// (multiples of 16; of 64 for blocked weights), so each weight row is streamed exactly once, by whichever thread
// claims it. For bf16 weights on a leaf set with a bf16-activation GEMM, the activations are first rounded to
// bf16 once per call (into a per-thread scratch that only grows), then every column chunk reads them from cache;
// blocked weights go to the own kernel or, for the row counts onednn_takes_rows names, to oneDNN's matmul per chunk.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "kernels/leaf.h"
#include "kernels/onednn_gemm.h"
#include "kernels/quant.h"

namespace minfer::kernels {
namespace {

// Below this many multiply-adds the fork-join costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 16;
// Rounding the activations to bf16 is split across the pool from this many elements on (prefill).
constexpr int64_t kMinParallelRound = 1 << 16;

// Column chunks are multiples of `grain` (16; 64 for blocked weights) and of the epilogue's alignment (see
// gemm_epilogue.h).
size_t chunk_grain(int64_t grain, const GemmEpilogue* epilogue) {
  return static_cast<size_t>(epilogue ? std::lcm<int64_t>(grain, std::max<int64_t>(1, epilogue->col_align)) : grain);
}

void check_operands(int64_t k, const Tensor& w) {
  if (w.rank() != 2 || w.dim(1) != k) {
    fail("gemm: weight of shape {} does not fit inputs of width {}", w.shape_string(), k);
  }
  if (w.layout != TensorLayout::kRowMajor) fail("gemm: bf16 blocked weights need the AVX-512-BF16 GEMM");
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16) {
    fail("gemm: weights of type {} need a quantised kernel (have f32, f16, bf16)", dtype_name(w.dtype));
  }
}

// The empty sum: the bias alone.
void bias_only(int64_t m, int64_t n, const float* bias, float* y, const GemmEpilogue* epilogue) {
  for (int64_t i = 0; i < m; ++i) {
    if (bias) {
      std::memcpy(y + i * n, bias, static_cast<size_t>(n) * sizeof(float));
    } else {
      std::fill(y + i * n, y + (i + 1) * n, 0.0f);
    }
  }
  if (epilogue) epilogue->apply(epilogue->ctx, y, m, n, 0, n);
}

// Calls compute(n0, n1) on column tiles covering [0, n), then the epilogue on each tile by the same thread,
// serially for small problems, else on the pool with tiles claimed in shrinking chunks (GuidedChunks, with
// ThreadPool::share: a thread the OS deschedules does not hold up the others, and the caller never waits for one
// that has not started).
template <class Compute>
void for_column_tiles(ThreadPool& pool, int64_t m, int64_t n, int64_t k, float* y, const GemmEpilogue* epilogue,
                      const Compute& compute, int64_t grain = 16) {
  if (pool.size() == 1 || n < 32 || m * n * k < kMinParallelMacs) {
    compute(int64_t{0}, n);
    if (epilogue) epilogue->apply(epilogue->ctx, y, m, n, 0, n);
    return;
  }
  // The job captures one reference, so the std::function keeps it in its small buffer: no allocation.
  struct Shared {
    const Compute& compute;
    const GemmEpilogue* epilogue;
    float* y;
    int64_t m, n;
    GuidedChunks chunks;
  } shared{compute, epilogue, y, m, n, {static_cast<size_t>(n), chunk_grain(grain, epilogue), pool.size()}};
  pool.share([&shared] {
    for (auto [b, e] = shared.chunks.claim(); b < e; std::tie(b, e) = shared.chunks.claim()) {
      const auto begin = static_cast<int64_t>(b), end = static_cast<int64_t>(e);
      shared.compute(begin, end);
      if (shared.epilogue) shared.epilogue->apply(shared.epilogue->ctx, shared.y, shared.m, shared.n, begin, end);
    }
  });
}

// Scratch of the calling thread for activations rounded to bf16, 64-byte aligned. It grows to the largest
// GEMM this thread has run and is then reused, so steady-state steps allocate nothing.
uint16_t* bf16_scratch(size_t elems) {
  thread_local std::vector<uint16_t> buf;
  if (buf.size() < elems + 32) buf.resize(elems + 32);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(uint16_t);
}

// Blocked weights go to the own kernel or to oneDNN's matmul (given whole row buckets) by the number of rows
// (onednn_takes_rows, kernels/onednn_gemm.h); row-major ones to the leaf's GEMM.
void run_gemm_bf16(const LeafKernels& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
                   float* y, ThreadPool& pool, const GemmEpilogue* epilogue) {
  const int64_t n = w.dim(0);
  const int64_t ldxb = bf16_row_stride(k);
  const bool blocked = w.layout == TensorLayout::kBf16Blocked64;
  const bool onednn = blocked && onednn_takes_rows(m);
  const GemmBf16ColsFn leaf =
      onednn ? onednn_gemm_bf16_blocked_cols : (blocked ? leaves.gemm_bf16_blocked_cols : leaves.gemm_bf16_cols);
  const uint16_t* xb = round_rows_to_bf16(leaves.bf16_round_rows, x, m, k, pool, onednn ? onednn_rows(m) : m);
  const auto* wb = static_cast<const uint16_t*>(w.data);
  for_column_tiles(
      pool, m, n, k, y, epilogue, [=](int64_t n0, int64_t n1) { leaf(xb, ldxb, m, k, wb, n, bias, y, n0, n1); },
      blocked ? 64 : 16);
}

}  // namespace

const uint16_t* round_rows_to_bf16(Bf16RoundRowsFn round, const float* x, int64_t m, int64_t k, ThreadPool& pool,
                                   int64_t padded_rows) {
  const int64_t ldxb = bf16_row_stride(k);
  uint16_t* xb = bf16_scratch(static_cast<size_t>(std::max(m, padded_rows) * ldxb));
  if (padded_rows > m) std::fill(xb + m * ldxb, xb + padded_rows * ldxb, uint16_t{0});
  if (pool.size() > 1 && m > 1 && m * k >= kMinParallelRound) {
    struct Rows {
      Bf16RoundRowsFn round;
      const float* x;
      uint16_t* xb;
      int64_t m, k, ldxb, chunk;
      std::atomic<int64_t> next{0};
    } rows{round, x, xb, m, k, ldxb, std::max<int64_t>(1, m / (8 * pool.size()))};
    pool.share([&rows] {  // one captured reference: no allocation
      for (int64_t b = rows.next.fetch_add(rows.chunk); b < rows.m; b = rows.next.fetch_add(rows.chunk)) {
        const int64_t e = std::min(rows.m, b + rows.chunk);
        rows.round(rows.x + b * rows.k, e - b, rows.k, rows.xb + b * rows.ldxb, rows.ldxb);
      }
    });
  } else {
    round(x, m, k, xb, ldxb);
  }
  return xb;
}

void run_gemm(GemmColsFn leaf, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
              ThreadPool& pool, const GemmEpilogue* epilogue) {
  if (is_quantized(w)) return gemm_quantized(x, m, k, w, bias, y, pool, epilogue);  // int8 / Q8_0: quant issue
  check_operands(k, w);
  const int64_t n = w.dim(0);
  if (m <= 0 || n <= 0) return;
  if (k == 0) return bias_only(m, n, bias, y, epilogue);
  const void* wd = w.data;
  const DType wtype = w.dtype;
  for_column_tiles(pool, m, n, k, y, epilogue,
                   [=](int64_t n0, int64_t n1) { leaf(x, m, k, wd, wtype, n, bias, y, n0, n1); });
}

void run_gemm(const LeafKernels& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
              float* y, ThreadPool& pool, const GemmEpilogue* epilogue) {
  const GemmBf16ColsFn leaf =
      w.layout == TensorLayout::kBf16Blocked64 ? leaves.gemm_bf16_blocked_cols : leaves.gemm_bf16_cols;
  if (w.dtype == DType::BF16 && leaf && leaves.bf16_round_rows && k > 0 && m > 0 && w.rank() == 2 && w.dim(1) == k &&
      w.dim(0) > 0) {
    return run_gemm_bf16(leaves, x, m, k, w, bias, y, pool, epilogue);
  }
  run_gemm(leaves.gemm_cols, x, m, k, w, bias, y, pool, epilogue);
}

}  // namespace minfer::kernels
