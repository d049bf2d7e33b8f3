// Gemma 2 and Gemma 3 (text): the Llama block with sandwich norms (each sub-block's output RMSNorm-ed before its
// residual add), a GELU(tanh) MLP, embeddings scaled by sqrt(hidden), and local sliding-window layers between global
// ones (DecoderBuilder::attention picks the window, and Gemma 3's local RoPE base, per layer).
//   x += post_attn_norm(o(attention(attn_norm(x))));  x += post_ffn_norm(mlp(ffn_norm(x)))
// What differs between the two comes from the config: Gemma 3's per-head q/k norms, Gemma 2's soft-capping of scores
// and logits (in the attention leaves and the head). The (1 + w) of Gemma's RMSNorm is in the loaded weights already
// (ModelConfig::norm_weight_plus_one).
#include "model/families/decoder_builder.h"

namespace minfer {

graph::Graph build_gemma_graph(const ModelWeights& weights) {
  graph::Graph g;
  DecoderBuilder b(weights, g);
  graph::ValueId x = b.embed();
  for (int64_t i = 0; i < weights.config.num_layers; ++i) {
    const std::string p = DecoderBuilder::prefix(i);
    const graph::ValueId attn = b.attention(i, b.rmsnorm(x, p + "attn_norm", p + "attn_in"));
    x = b.add(x, b.rmsnorm(attn, p + "post_attn_norm", p + "attn_out"), p + "x_attn");
    const graph::ValueId mlp = b.gated_mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in"));
    x = b.add(x, b.rmsnorm(mlp, p + "post_ffn_norm", p + "ffn_out"), p + "x_out");
  }
  b.head(x);
  return g;
}

}  // namespace minfer
