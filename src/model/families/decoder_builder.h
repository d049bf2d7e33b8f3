// The pieces every decoder family's graph is built from (model/families/*.cpp): projections, norms, the attention
// block (q/k/v, optional per-head q/k norms, RoPE, KV write, paged attention, output projection), the gated MLP and
// the sampling head. A family file composes them in its own order; the fusion passes then see the same primitive
// patterns whichever family built them.
#pragma once

#include <functional>
#include <string>

#include "graph/graph.h"
#include "model/model_weights.h"

namespace minfer {

class DecoderBuilder {
 public:
  DecoderBuilder(const ModelWeights& weights, graph::Graph& graph) : w_(weights), c_(weights.config), g_(graph) {}

  // A layer's block: the residual stream after layer `layer` (value names prefixed `prefix`) from the one before.
  using Block =
      std::function<graph::ValueId(DecoderBuilder&, int64_t layer, const std::string& prefix, graph::ValueId)>;
  // The embedding, `block` once per layer, then the head: every family's graph.
  static graph::Graph build(const ModelWeights& weights, const Block& block);

  const ModelConfig& config() const { return c_; }
  graph::Graph& graph() { return g_; }

  // The token embeddings, times config().embedding_scale when set.
  graph::ValueId embed();
  // x @ weight^T (+ bias); an empty bias name: none.
  graph::ValueId matmul(graph::ValueId x, const std::string& weight, const std::string& bias, const std::string& out);
  // RMSNorm of each row, or with head_dim > 0 of each head of that width (q/k norms).
  graph::ValueId rmsnorm(graph::ValueId x, const std::string& weight, const std::string& out, int64_t head_dim = 0);
  graph::ValueId add(graph::ValueId a, graph::ValueId b, const std::string& out);
  // The sum over the tensor-parallel ranks of a row-parallel projection's partial output; x itself unsharded.
  graph::ValueId all_reduce(graph::ValueId x, const std::string& out);
  // Layer `layer`'s attention from its normalised input h, through the output projection: q/k/v (+ bias when the
  // config has it), q/k norms (config().qk_norm), RoPE (the layer's table), the KV write and paged attention (the
  // layer's window, the config's scale and soft-cap).
  graph::ValueId attention(int64_t layer, graph::ValueId h);
  // down(act(gate(h)) * up(h)) with the config's activation.
  graph::ValueId gated_mlp(int64_t layer, graph::ValueId h);
  // The layer's mixture of experts (one node: router, grouped expert GEMMs, weighted combine).
  graph::ValueId moe(int64_t layer, graph::ValueId h);
  // The layer's feed-forward block: its experts on an MoE layer, else the gated MLP.
  graph::ValueId mlp(int64_t layer, graph::ValueId h) { return c_.is_moe(layer) ? moe(layer, h) : gated_mlp(layer, h); }
  // The causal depthwise convolution of a recurrent layer (its state in the layer's slot): weight [channels, taps]
  // and optional bias (empty name: none), SiLU-ed when `silu`; out `width` channels wide.
  graph::ValueId conv1d(int64_t layer, graph::ValueId x, const std::string& weight, const std::string& bias,
                        int64_t width, bool silu, const std::string& out);
  // Final norm over the sampled rows, lm_head (or the tied embedding), soft-capped when configured; sets the output.
  void head(graph::ValueId x);

  static std::string prefix(int64_t layer) { return "layers." + std::to_string(layer) + "."; }
  // Weight `name` as f32 (a graph constant when the checkpoint stores it narrower): biases, sinks, mixer constants.
  const Tensor* f32(const std::string& name);
  // The name of a value an all-reduce completes: `name` itself in one process, name + "_shard" (the rank's partial
  // sum) in a tensor-parallel group, where the all-reduce's output takes `name`.
  std::string shard_name(const std::string& name) const { return w_.shard.sharded() ? name + "_shard" : name; }

 private:
  graph::ValueId rope(graph::ValueId x, int64_t heads, int32_t table, const std::string& out);

  const ModelWeights& w_;
  const ModelConfig& c_;
  graph::Graph& g_;
};

// The Llama block (model/families/llama.cpp), which most families build with their config's traits:
//   x += o(attention(rmsnorm(x)));  x += mlp(rmsnorm(x))
graph::Graph build_llama_graph(const ModelWeights& weights);

}  // namespace minfer
