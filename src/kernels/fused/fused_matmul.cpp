#include "kernels/fused/fused_matmul.h"

#include <cstring>

#include "base/error.h"
#include "kernels/fused/gemm_epilogues.h"
#include "kernels/leaf.h"

namespace minfer::kernels::fused {
namespace {

// The rows the GEMM reads: X itself, or its gathered and/or normalised rows in the scratch.
const float* run_prologue(const KernelTable& table, const FusedMatMul& op, int64_t out_rows) {
  const float* x = op.x;
  if (op.gather_rows) {
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t src = op.gather_rows[r];
      if (src < 0 || src >= op.rows) fail("fused matmul: gathered row {} outside the {} rows", src, op.rows);
      std::memcpy(op.prologue_scratch + r * op.k, op.x + src * op.k, static_cast<size_t>(op.k) * sizeof(float));
    }
    x = op.prologue_scratch;
  }
  if (op.norm_weight) {
    // In place is fine: the leaf reads a row completely before writing it.
    table.rmsnorm(x, *op.norm_weight, op.eps, op.prologue_scratch, out_rows, op.k);
    x = op.prologue_scratch;
  }
  return x;
}

}  // namespace

// The GEMM goes through the same driver entry as an unfused matmul (run_gemm over the leaf set), so both
// take the same path for the weight type (e.g. bf16 activations x bf16 weights) and round alike.
void fused_matmul(const KernelTable& table, const FusedMatMul& op, ThreadPool& pool) {
  MINFER_CHECK(op.weight != nullptr && op.weight->rank() == 2, "fused matmul needs a 2-D weight");
  const int64_t out_rows = op.gather_rows ? op.gather_count : op.rows;
  if (out_rows <= 0) return;
  const float* x = run_prologue(table, op, out_rows);
  const int64_t n = op.weight->dim(0);
  switch (op.epilogue) {
    case Epilogue::kNone: run_gemm(*table.leaves, x, out_rows, op.k, *op.weight, op.bias, op.y, pool); return;
    case Epilogue::kResidual: {
      const ResidualEpilogue e{table.leaves, op.residual};
      const GemmEpilogue hook = e.as_epilogue();
      run_gemm(*table.leaves, x, out_rows, op.k, *op.weight, op.bias, op.y, pool, &hook);
      return;
    }
    case Epilogue::kSiluMul:
    case Epilogue::kGeluTanhMul: {
      MINFER_CHECK(n % 2 == 0 && op.block > 0, "fused gate/up: {} columns, block {}", n, op.block);
      const BinaryFn gated = op.epilogue == Epilogue::kSiluMul ? table.leaves->silu_mul : table.leaves->gelu_tanh_mul;
      const GatedActEpilogue e{gated, op.out, op.block};
      const GemmEpilogue hook = e.as_epilogue();
      run_gemm(*table.leaves, x, out_rows, op.k, *op.weight, op.bias, op.y, pool, &hook);
      return;
    }
    case Epilogue::kRopeKvWrite: {
      MINFER_CHECK(n == (op.heads + 2 * op.cache.kv_heads) * op.head_dim && op.cache.head_dim == op.head_dim,
                   "fused qkv: {} columns for {} heads, {} kv heads of {}", n, op.heads, op.cache.kv_heads,
                   op.head_dim);
      if (op.half_rot < 0 || 2 * op.half_rot > op.head_dim)
        fail("rope: {} rotated pairs in a head of {}", op.half_rot, op.head_dim);
      for (const Tensor* norm : {op.q_norm, op.k_norm})
        if (norm && norm->numel() != op.head_dim)
          fail("fused qkv: head norm weight {} for heads of {}", norm->shape_string(), op.head_dim);
      RopeKvWriteEpilogue e;
      e.table = &table;
      e.cos = op.rope_cos;
      e.sin = op.rope_sin;
      e.slot_mapping = op.slot_mapping;
      e.cache = op.cache;
      e.heads = op.heads;
      e.head_dim = op.head_dim;
      e.half_rot = op.half_rot;
      e.style = op.style;
      e.q_out = op.out;
      e.q_norm = op.q_norm;
      e.k_norm = op.k_norm;
      e.head_norm_eps = op.head_norm_eps;
      const GemmEpilogue hook = e.as_epilogue();
      run_gemm(*table.leaves, x, out_rows, op.k, *op.weight, op.bias, op.y, pool, &hook);
      return;
    }
  }
  fail("fused matmul: unknown epilogue {}", static_cast<int>(op.epilogue));
}

void add_rmsnorm(const KernelTable& table, const float* a, const float* b, const Tensor& weight, float eps, float* sum,
                 float* y, int64_t rows, int64_t dim) {
  if (weight.numel() != dim) fail("add_rmsnorm: weight of shape {} for rows of {}", weight.shape_string(), dim);
  for (int64_t r = 0; r < rows; ++r) {
    table.leaves->add(a + r * dim, b + r * dim, sum + r * dim, dim);
    table.leaves->rmsnorm(sum + r * dim, weight.data, weight.dtype, eps, y + r * dim, 1, dim);
  }
}

}  // namespace minfer::kernels::fused
