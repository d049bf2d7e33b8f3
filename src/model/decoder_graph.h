// Builds the operator graph of a decoder from loaded weights: the family's builder (model/families/), then the
// fusion passes.
#pragma once

#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/passes/fusion_passes.h"
#include "model/model_weights.h"

namespace minfer {

// The unfused graph of the model's family (for Llama, 16 primitive ops per layer:
//   rmsnorm, q/k/v matmul (+bias), rope q, rope k, kv_write, attention, o matmul, add,
//   rmsnorm, gate matmul, up matmul, silu_mul, down matmul, add
// then final rmsnorm on the sampled rows only and the lm_head matmul).
// The weights must outlive the graph (nodes point at them).
// kHiddenStates ends at the final norm (rows [sampled, hidden_size]): the graph of an embedding engine.
enum class DecoderHead : uint8_t { kLogits, kHiddenStates };
graph::Graph build_decoder_graph(const ModelWeights& weights, DecoderHead head = DecoderHead::kLogits);

// The graph a model runs: the decoder graph rewritten by the fusion passes `options` enables (none for
// FusionStrategy::kNone). Fused GEMM weights are packed here, once, and owned by the graph; the weight copies of
// the layout passes are split across `pool` when given.
graph::Graph compile_decoder_graph(const ModelWeights& weights, const graph::FusionOptions& options,
                                   graph::FusionReport* report = nullptr, ThreadPool* pool = nullptr,
                                   DecoderHead head = DecoderHead::kLogits);

// The RoPE tables the graph's rope nodes index: the global one, then the sliding layers' own where they have one.
// max_model_len picks longrope's factors (0: the short ones).
graph::RopeTables rope_tables(const ModelConfig& config, int64_t max_model_len = 0);

}  // namespace minfer
