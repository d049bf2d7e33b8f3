// The operator graph of a model: a list of nodes in execution order (already topological), each reading
// values produced earlier and producing at most one new value. Values are 2-D f32 activations whose row
// count is decided per step (all tokens of the batch, or only the rows that sample) and whose width is fixed.
// Fusion passes rewrite the node list; the executor runs it and counts dispatches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/fused/fused_matmul.h"
#include "kernels/kernels.h"
#include "kernels/moe.h"
#include "tensor/tensor.h"

namespace minfer::graph {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;

enum class OpKind : uint8_t {
  kEmbedding,    // out[t] = weight[token[t]] (* scale when set: Gemma's sqrt(hidden))
  kRmsNorm,      // out = rmsnorm(in0) * weight; with head_dim set, over each head of head_dim (Qwen3's q/k norms);
                 // with a gate in1 (fused), out * silu(in1), or with gate_first rmsnorm(in0 * silu(in1)) * weight
  kMatMul,       // out = in0 @ weight^T (+ bias)
  kRope,         // out = rope(in0) at the step's positions (heads x head_dim layout)
  kKvWrite,      // cache[layer] <- (in0 = k, in1 = v) at the step's slots; no output
  kAttention,    // out = paged attention of in0 (q) over cache[layer]
  kAdd,          // out = in0 + in1
  kSiluMul,      // out = silu(in0) * in1
  kGeluTanhMul,  // out = gelu_tanh(in0) * in1 (Gemma)
  kSoftcap,      // out = softcap * tanh(in0 / softcap) (Gemma's final_logit_softcapping)
  kMoe,          // out = mixture-of-experts FFN of in0: router (weight), experts, top_k (kernels/moe.h)
  kGatherRows,   // out = the rows of in0 that sample (the last position of each sequence)
  kSigmoidMul,   // out = in1 * sigmoid(in0) (Qwen3.5's attention output gate); in0 one wide: a gate per row
  kMul,          // out = in0 * in1 (LFM2's convolution gates)
  kRelu2,        // out = max(in0, 0)^2 (Nemotron-H's MLP)
  // Vision encoders (vision/): their patches come in as rows, their image tokens leave pooled.
  kInput,             // out = the step's given rows (StepInputs::input_rows): an image's patches
  kLayerNorm,         // out = layernorm(in0) * weight + bias
  kGeluTanh,          // out = gelu_tanh(in0)
  kAvgPool,           // out (one row per sampled row) = the mean of each block x block square of an image's patch grid
  kEncoderAttention,  // out = attention of in0 (q) over in1 (k), in2 (v) within each image, unmasked (GEMMs)
  // Recurrent mixers (kernels/mixers.h), reading and updating each sequence's state slot of `layer`.
  kConv1d,    // out = causal depthwise conv of in0 with weight [channels, taps] (+ bias), SiLU-ed when `silu`;
              // with gates in1, in2 (fused, LFM2): in2 * conv(in1 * in0)
  kDeltaNet,  // out = gated delta rule of in0 (conv'd q | k | v), in1 (beta logits), in2 (decay logits)
  kSsmScan,   // out = Mamba2's selective scan of in0 (conv'd x | B | C) with in1 (dt logits)
  // Collectives of a tensor-parallel group (dist/communicator.h).
  kAllReduce,    // out = the sum over ranks of in0 (after a row-parallel projection)
  kGatherVocab,  // out (rank 0) = every rank's column slice of in0 side by side (vocab-parallel logits)
  // Fused ops (graph/passes/ rewrite the primitives above into these).
  kAddRmsNorm,   // aux_output = in0 + in1; out = rmsnorm(aux_output) * weight
  kFusedMatMul,  // out = epilogue(prologue(in0) @ weight^T + bias); see kernels/fused/fused_matmul.h
};

const char* op_name(OpKind kind);

// Rows of a value: every token of the step, or one per sampled position.
enum class RowSpace : uint8_t { kTokens, kSampled };

struct Value {
  std::string name;
  int64_t width = 0;
  RowSpace rows = RowSpace::kTokens;
};

struct Node {
  OpKind kind = OpKind::kAdd;
  std::vector<ValueId> inputs;
  ValueId output = kNoValue;
  const Tensor* weight = nullptr;  // MatMul, RmsNorm, Embedding
  const Tensor* bias = nullptr;    // MatMul (optional); Moe: the router's (optional)
  const Tensor* sinks = nullptr;   // Attention: f32 [heads] sink logits (kernels::AttentionParams::sinks), optional
  // Attributes.
  int32_t layer = -1;    // KvWrite, Attention
  int32_t rope = 0;      // Rope, FusedMatMul kRopeKvWrite: which of the executor's RoPE tables (local/global)
  int64_t heads = 0;     // Rope, Attention: heads of the input
  int64_t head_dim = 0;  // Rope, Attention; RmsNorm per head when set
  float eps = 0.0f;      // RmsNorm
  float scale = 0.0f;    // Attention: usually 1/sqrt(head_dim); Embedding: the multiplier (0: none)
  // Embedding of a vocab-parallel shard: the weight holds rows [row_offset, row_offset + rows); other tokens give
  // zero rows (an all-reduce follows). GatherVocab: the full width's columns per rank (the last rank's slice may be
  // narrower than this, the ranks' common stride).
  int64_t row_offset = 0;
  int64_t vocab_stride = 0;
  int64_t window = 0;       // Attention: sliding window (kernels::AttentionParams), 0 = whole context
  float softcap = 0.0f;     // Attention: score soft-capping, 0 = none; Softcap: the cap
  bool silu = false;        // Conv1d: SiLU on the output
  bool gate_first = false;  // RmsNorm with a gate: the gate multiplies the input (Mamba2), not the output (Qwen3.5)
  // DeltaNet: heads = value heads, kv_heads = key heads, head_dim = key width, value_dim = value width, weight = the
  // decay coefficients -exp(A_log) and bias = dt_bias (f32 [value heads]); value heads tiled over key heads (GGUF).
  int64_t value_dim = 0;
  bool tiled_heads = false;
  // SsmScan: heads, head_dim, kv_heads = groups, value_dim = state size; weight = A (-exp(A_log)), bias = dt_bias,
  // skip = D (f32 [heads] each).
  const Tensor* skip = nullptr;
  // Fused ops.
  ValueId aux_output = kNoValue;        // AddRmsNorm: the residual sum, a second output
  const Tensor* norm_weight = nullptr;  // FusedMatMul prologue: RMSNorm of the input rows (eps above)
  bool gather = false;                  // FusedMatMul prologue: only the rows that sample (output is kSampled)
  kernels::fused::Epilogue epilogue = kernels::fused::Epilogue::kNone;  // FusedMatMul; kResidual reads in1
  int64_t block = 0;     // FusedMatMul kSiluMul / kGeluTanhMul: gate/up interleave block
  int64_t kv_heads = 0;  // FusedMatMul kRopeKvWrite (heads, head_dim and layer above)
  // Moe: gate, up, down of each expert in turn (with `block` set: gate/up interleaved by it, then down), how many each
  // row uses, and whether their weights renormalise.
  std::vector<const Tensor*> experts;
  int64_t top_k = 0;
  bool renormalize = false;
  // Moe (gpt-oss): f32 gate, up and down biases of each expert in the order of `experts` (empty: none), and the
  // experts' activation.
  std::vector<const Tensor*> expert_biases;
  kernels::MoeActivation moe_activation = kernels::MoeActivation::kSilu;
  // Moe with a sigmoid router (LFM2-MoE): kernels::MoeRouting's gating, selection bias (f32) and scale.
  kernels::MoeGating moe_gating = kernels::MoeGating::kSoftmax;
  const Tensor* selection_bias = nullptr;
  float routed_scale = 1.0f;
  // Moe under expert parallel: `experts` holds this rank's experts only, from expert_begin on (of the router's
  // rows); tokens go to the ranks holding their experts and come back by all-to-all (dist/expert_parallel.h).
  bool expert_parallel = false;
  int64_t expert_begin = 0;
  // FusedMatMul kRopeKvWrite: the per-head q/k RMSNorms folded in (Qwen3), with their eps.
  const Tensor* q_norm = nullptr;
  const Tensor* k_norm = nullptr;
  float head_norm_eps = 0.0f;
};

// What a node computes, e.g. "matmul" or "fused_matmul[rmsnorm+gemm+rope+kv_write]".
std::string node_label(const Node& node);

class Graph {
 public:
  ValueId add_value(std::string name, int64_t width, RowSpace rows = RowSpace::kTokens);
  // Appends a node; returns its output value (kNoValue when the op produces none).
  ValueId add_node(Node node);
  void set_output(ValueId logits) { output_ = logits; }
  // Keeps a tensor the graph made (e.g. a bias converted to f32) alive as long as the graph; the pointer
  // stays valid when the graph is moved.
  const Tensor* add_constant(Tensor t) {
    constants_.push_back(std::make_unique<Tensor>(std::move(t)));
    return constants_.back().get();
  }
  // Whether `t` is one of the graph's constants; if so, replace_constant swaps its value in place (the nodes
  // pointing at it see the new value, the old buffer is freed).
  bool owns_constant(const Tensor* t) const {
    for (const auto& c : constants_)
      if (c.get() == t) return true;
    return false;
  }
  void replace_constant(const Tensor* t, Tensor value) {
    for (auto& c : constants_)
      if (c.get() == t) *c = std::move(value);
  }

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const Value& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  ValueId output() const { return output_; }

  // Checks every node's inputs exist and are produced before use, and widths agree. Throws Error.
  void verify() const;
  // One line per node, for debugging and `--report-ops`.
  std::string to_string() const;

 private:
  void verify_fused_matmul(size_t i, const Node& n) const;

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  ValueId output_ = kNoValue;
  std::vector<std::unique_ptr<Tensor>> constants_;
};

}  // namespace minfer::graph
