// The GEMM epilogues of the fused operators (see kernels/gemm_epilogue.h for the hook). Each is a context
// struct plus an `as_epilogue()` that packs it for the GEMM driver. The arithmetic is the unfused leaves'
// (add, silu_mul, rope, kv_write of the same LeafKernels), applied to a tile while it is in cache, so a fused
// graph computes bit for bit what the unfused one does on the same instruction set.
#pragma once

#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/kernels.h"
#include "kernels/leaf.h"

namespace minfer::kernels::fused {

// y[r, c] += residual[r, c]; residual is [m, n] with row stride n (the o-proj and down-proj skip connection).
struct ResidualEpilogue {
  const LeafKernels* leaves = nullptr;
  const float* residual = nullptr;
  GemmEpilogue as_epilogue() const;
};

// The GEMM output holds gate and up rows interleaved in blocks (see fused_weights.h: interleave_gate_up):
// columns [2 b B, 2 b B + len) are gate rows [b B, b B + len) and the next len columns the matching up rows.
// out[r, f] = act(gate[r, f]) * up[r, f], out is [m, n / 2]; `gated` is the leaf set's silu_mul or gelu_tanh_mul.
struct GatedActEpilogue {
  BinaryFn gated = nullptr;
  float* out = nullptr;
  int64_t block = 0;
  GemmEpilogue as_epilogue() const;
};

// The GEMM output holds, per row, K and V of each kv head side by side, then all query heads (see
// fused_weights.h: pack_qkv): [k_0 v_0 k_1 v_1 ... | q_0 ... q_{H-1}], each head_dim wide. Per tile: RoPE on the
// K and Q heads at the rows' positions, K and V written to the paged cache at the rows' slots, roped Q copied
// to q_out [m, heads * head_dim] (the layout paged attention reads).
struct RopeKvWriteEpilogue {
  const KernelTable* table = nullptr;  // the rope leaf
  const float* cos = nullptr;          // [m, half_rot]: the rows' RoPE angles (rope_angles)
  const float* sin = nullptr;
  const int64_t* slot_mapping = nullptr;  // [m], negative = do not cache
  KvLayerView cache;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t half_rot = 0;
  RopeStyle style = RopeStyle::kNeox;
  float* q_out = nullptr;
  const Tensor* q_norm = nullptr;  // per-head RMSNorm before RoPE (Qwen3), when set
  const Tensor* k_norm = nullptr;
  float head_norm_eps = 0.0f;
  GemmEpilogue as_epilogue() const;
};

}  // namespace minfer::kernels::fused
