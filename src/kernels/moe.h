// Mixture-of-experts feed-forward (Qwen3-MoE, Mixtral, gpt-oss) over a batch of rows: a softmax router picks top_k
// experts per row; each expert then runs once over all the rows routed to it, as grouped GEMMs (its gate, up and down
// weights read once per call, whatever the number of rows: no per-token GEMV in prefill), and each row's output is
// the probability-weighted sum of its experts' outputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "tensor/tensor.h"

namespace minfer::kernels {

// How an expert gates: down(silu(gate(x)) * up(x)), or gpt-oss's clamped SwiGLU (ref::swiglu_oai).
enum class MoeActivation : uint8_t { kSilu, kSwigluOai };

// How a row's router logits become scores: a softmax over the experts (Qwen3-MoE, Mixtral, gpt-oss), or each logit's
// sigmoid on its own (LFM2-MoE; DeepSeek-V3's too).
enum class MoeGating : uint8_t { kSoftmax, kSigmoid };

// How the router's logits choose a row's top_k experts and weigh them.
struct MoeRouting {
  int64_t top_k = 0;
  bool renormalize = true;  // the chosen scores renormalised to sum to 1 (norm_topk_prob)
  MoeGating gating = MoeGating::kSoftmax;
  // Added to the scores to choose the experts but not to weigh them (LFM2-MoE's expert_bias, DeepSeek-V3's
  // e_score_correction_bias): f32 [experts]; null: none.
  const float* selection_bias = nullptr;
  float scale = 1.0f;  // the chosen weights times this, after renormalising (routed_scaling_factor)
};

struct MoeWeights {
  const Tensor* router = nullptr;  // [experts, hidden], any GEMM weight type
  // 3 per expert: gate [ff, hidden], up [ff, hidden], down [hidden, ff]; or with gate_up_block, 2 per expert: gate and
  // up interleaved in blocks of that many rows (kernels/fused/fused_weights.h) [2 ff, hidden], then down.
  std::span<const Tensor* const> experts;
  int64_t top_k = 0;
  bool renormalize = true;  // the chosen experts' probabilities renormalised to sum to 1 (norm_topk_prob)
  int64_t gate_up_block = 0;
  // gpt-oss: the router's bias (f32 [experts]) and 3 f32 biases per expert, in the order of `experts`: gate [ff],
  // up [ff], down [hidden] (not with gate_up_block). Null / empty: none.
  const Tensor* router_bias = nullptr;
  std::span<const Tensor* const> expert_biases;
  MoeActivation activation = MoeActivation::kSilu;
  // Sigmoid routers (LFM2-MoE): MoeRouting's gating, selection bias (f32 [experts]) and scale.
  MoeGating gating = MoeGating::kSoftmax;
  const Tensor* selection_bias = nullptr;
  float routed_scale = 1.0f;
  MoeRouting routing() const {
    return {top_k, renormalize, gating, selection_bias ? selection_bias->as<float>() : nullptr, routed_scale};
  }
};

// Buffers a call grows once to the largest batch and then reuses.
struct MoeScratch {
  std::vector<float> logits, gathered, gate, up, expert_out, slot_out;
  std::vector<int32_t> choice, by_expert, offsets;
  std::vector<float> prob;
};

// Which experts each row chose and with what weight, in the order of their score (+ selection bias; ties: the lower
// expert). choice and prob are [rows, top_k]. Exposed for tests.
void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& routing, int32_t* choice,
               float* prob);

// out [n, hidden] = down_e(silu(gate_e(x)) * up_e(x)) for expert e of moe.experts (its index there), over rows
// x [n, hidden]: the expert's weights read once for all n rows.
void moe_expert_ffn(const MoeWeights& moe, int64_t e, const float* x, int64_t n, int64_t hidden, float* out,
                    ThreadPool& pool, MoeScratch& scratch);

// out [rows, hidden] = each row's expert outputs slot_out [rows * top_k, hidden] (row r's at r * top_k + slot),
// weighted by prob and summed in expert order (choice and prob [rows, top_k] as moe_route gives them).
void moe_combine(int64_t rows, int64_t top_k, int64_t hidden, const int32_t* choice, const float* prob,
                 const float* slot_out, float* out, ThreadPool& pool);

// out [rows, hidden] = sum over each row's chosen experts e of prob_e * down_e(silu(gate_e(x)) * up_e(x)), summed in
// expert order (as transformers' index_add over experts does), so a row's result does not depend on the other rows
// beyond the last bits of the GEMMs' row blocking.
void moe_ffn(const float* x, int64_t rows, int64_t hidden, const MoeWeights& moe, float* out, ThreadPool& pool,
             MoeScratch& scratch);

}  // namespace minfer::kernels
