// oneDNN's matmul for bf16 weights in TensorLayout::kBf16Blocked64: the GEMM of prefill and batched decode.
// oneDNN picks its implementation for the CPU at run time (brgemm with AVX-512-BF16 here; AMX where the CPU
// and the kernel allow it, AVX-512 / AVX2 emulation below), so the engine does not carry its own.
#pragma once

#include <cstdint>

namespace minfer::kernels {

// Whether the GEMM driver hands blocked bf16 weights with m rows of X to oneDNN. Without AMX: for 8-11 rows and
// past 64 (prefill); the own kernel (avx512::gemm_bf16_blocked_cols) takes the rest: up to 7 rows it streams the
// weights faster (docs/BENCHMARKS.md, "oneDNN"), and from 12 to 64 rows (batched decode) its block-major loop
// with the next segment prefetched measured 1.1-1.35x oneDNN's AVX-512 brgemm (BENCHMARKS, "Block-major GEMM for
// batched decode"). With AMX (cpu_features().amx_bf16: the CPU has it, the kernel granted the tile state and
// MINFER_ISA does not cap it): oneDNN from 8 rows on, as its AMX brgemm multiplies 16 x 32 bf16 tiles at several
// times the vdpbf16ps rate the own loop is bound by; up to 7 rows decode is bound by the weight stream.
inline constexpr int64_t kOneDnnMinRows = 8;
inline constexpr int64_t kOwnBatchedMinRows = 12;
inline constexpr int64_t kOwnBatchedMaxRows = 64;
inline constexpr bool onednn_takes_rows(int64_t m, bool amx) {
  return m >= kOneDnnMinRows && (amx || m < kOwnBatchedMinRows || m > kOwnBatchedMaxRows);
}
// The same for this process's CPU.
bool onednn_takes_rows(int64_t m);

// The rows oneDNN is given for m rows of X: m itself up to 64, then m rounded up to 16 (to 64 past 512). Each
// new shape is a new JIT-compiled primitive (~0.4 ms, kept per thread), so batches of every size between 65
// and 2048 rows share ~60 shapes instead of making ~2000; the padding rows are zero and cost at most 1/5.
int64_t onednn_rows(int64_t m);

// Columns [n0, n1) of Y[m, n] = Xb[m, :] W^T (+ bias) for W in TensorLayout::kBf16Blocked64 (n0 a multiple of
// 64), the GemmBf16ColsFn contract (kernels/leaf.h) except that xb must hold onednn_rows(m) rows, zero past m.
// Runs on the calling thread alone (oneDNN's OpenMP team is held at one thread per caller: the engine's pool
// splits the columns). Safe to call from several threads at once.
void onednn_gemm_bf16_blocked_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                                   const float* bias, float* y, int64_t n0, int64_t n1);

// oneDNN's name for the implementation it runs for an m x k by k x n bf16 matmul over the blocked layout (e.g.
// "brg:avx512_core_bf16", "brg:avx512_core_amx"), for reports.
const char* onednn_gemm_impl(int64_t m, int64_t k, int64_t n);

}  // namespace minfer::kernels
