// Builds the operator graph of a Llama-family decoder (Llama 2/3, Qwen2/2.5) from loaded weights.
#pragma once

#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/passes/fusion_passes.h"
#include "model/model_weights.h"

namespace minfer {

// Unfused graph, 16 primitive ops per layer:
//   rmsnorm, q/k/v matmul (+bias), rope q, rope k, kv_write, attention, o matmul, add,
//   rmsnorm, gate matmul, up matmul, silu_mul, down matmul, add
// then final rmsnorm on the sampled rows only and the lm_head matmul.
// The weights must outlive the graph (nodes point at them).
graph::Graph build_decoder_graph(const ModelWeights& weights);

// The graph a model runs: the decoder graph rewritten by the fusion passes `options` enables (none for
// FusionStrategy::kNone). Fused GEMM weights are packed here, once, and owned by the graph; the weight copies of
// the layout passes are split across `pool` when given.
graph::Graph compile_decoder_graph(const ModelWeights& weights, const graph::FusionOptions& options,
                                   graph::FusionReport* report = nullptr, ThreadPool* pool = nullptr);

// The RoPE frequencies and pairing the graph's rope nodes use.
graph::RopeTable rope_table(const ModelConfig& config);

}  // namespace minfer
