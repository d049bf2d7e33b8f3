// The Llama block, which Llama 2/3, Mistral (a sliding window on every layer when configured), Qwen2 (q/k/v biases;
// sliding layers above max_window_layers when use_sliding_window), Phi-3 (its fused qkv / gate_up weights split at
// load; partial rotary embedding and longrope in its RoPE table), Qwen3 (per-head q/k norms), SmolLM3 (every fourth
// layer without positional encoding: its rotation is the identity table, ModelConfig::rope_table), Granite (its
// embedding and attention multipliers are the embedding and score scales; its residual and logit multipliers are in
// the loaded weights, loaders/output_scales.cpp), and the
// mixture-of-experts Qwen3-MoE, Mixtral and gpt-oss (the MLP of their MoE layers replaced by one moe node; gpt-oss
// adds q/k/v/o biases, attention sinks and biased experts, all config) share:
//   x += o(attention(rmsnorm(x)));  x += down(silu(gate(h)) * up(h)) with h = rmsnorm(x)
// Unfused, 16 primitive ops a layer (18 with q/k norms), then the final norm and lm_head on the sampled rows.
#include "model/families/decoder_builder.h"

namespace minfer {

graph::Graph build_llama_graph(const ModelWeights& weights) {
  graph::Graph g;
  DecoderBuilder b(weights, g);
  graph::ValueId x = b.embed();
  for (int64_t i = 0; i < weights.config.num_layers; ++i) {
    const std::string p = DecoderBuilder::prefix(i);
    x = b.add(x, b.attention(i, b.rmsnorm(x, p + "attn_norm", p + "attn_in")), p + "x_attn");
    x = b.add(x, b.mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in")), p + "x_out");
  }
  b.head(x);
  return g;
}

}  // namespace minfer
