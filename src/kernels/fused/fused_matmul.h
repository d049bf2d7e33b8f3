// One dispatch for a GEMM and what surrounds it in a decoder layer:
//   prologue  pick the rows that sample (lm_head) and/or RMSNorm the input rows, on the calling thread
//             (M x K work, small beside the GEMM's M x K x N);
//   GEMM      the weight as packed at compile time (fused_weights.h), with its bias;
//   epilogue  per column tile, by the thread that computed it (gemm_epilogues.h): residual add, SiLU * up,
//             or (per-head RMSNorm of Q and K +) RoPE + paged KV write + Q copy.
// So a fused matmul is one fork-join of the pool, like a plain GEMM.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace minfer::kernels::fused {

enum class Epilogue : uint8_t { kNone, kResidual, kSiluMul, kGeluTanhMul, kRopeKvWrite };

struct FusedMatMul {
  // Input X [rows, k].
  const float* x = nullptr;
  int64_t rows = 0;
  int64_t k = 0;
  // Prologue. gather_rows: when set, X is replaced by its rows gather_rows[0 .. gather_count).
  const int32_t* gather_rows = nullptr;
  int64_t gather_count = 0;
  const Tensor* norm_weight = nullptr;  // RMSNorm of each (gathered) row before the GEMM
  float eps = 0.0f;
  float* prologue_scratch = nullptr;  // [output rows, k] when gathering or normalising

  const Tensor* weight = nullptr;  // [n, k]
  const float* bias = nullptr;     // [n] or null
  // The GEMM result [output rows, n]: the final output for kNone and kResidual; scratch for the others.
  float* y = nullptr;

  Epilogue epilogue = Epilogue::kNone;
  const float* residual = nullptr;  // kResidual: [output rows, n]
  float* out = nullptr;  // kSiluMul, kGeluTanhMul: [rows, n / 2]; kRopeKvWrite: roped Q [rows, heads * head_dim]
  int64_t block = 0;     // kSiluMul, kGeluTanhMul: gate/up interleave block
  // kRopeKvWrite.
  const float* rope_cos = nullptr;  // [rows, half_rot] (rope_angles of the rows' positions)
  const float* rope_sin = nullptr;
  const int64_t* slot_mapping = nullptr;
  KvLayerView cache;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t half_rot = 0;
  RopeStyle style = RopeStyle::kNeox;
  // Per-head RMSNorm of Q and K before RoPE ([head_dim] weights; Qwen3), when set.
  const Tensor* q_norm = nullptr;
  const Tensor* k_norm = nullptr;
  float head_norm_eps = 0.0f;
};

// Runs the fused operator with the leaves of `table` (any ISA; kernel_table(Isa::kScalar) is the reference).
void fused_matmul(const KernelTable& table, const FusedMatMul& op, ThreadPool& pool);

// sum = a + b and y = rmsnorm(sum) * weight, row by row while the row is in L1 (residual add + RMSNorm).
// Rows [0, rows) of width dim; the caller splits rows across threads.
void add_rmsnorm(const KernelTable& table, const float* a, const float* b, const Tensor& weight, float eps, float* sum,
                 float* y, int64_t rows, int64_t dim);

}  // namespace minfer::kernels::fused
