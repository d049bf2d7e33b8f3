// OLMo 2 and OLMo 3: the Llama block with its norms moved after each sub-block (no norm before attention or the
// MLP; each output RMSNorm-ed before its residual add) and q/k norms over the whole projection, not per head. OLMo 3
// adds sliding-window layers (three of every four), which rotate without the model's RoPE scaling (the local table,
// ModelConfig::rope_local_theta).
//   x += post_attn_norm(o(attention(x)));  x += post_ffn_norm(mlp(x))
#include "model/families/decoder_builder.h"

namespace minfer {

graph::Graph build_olmo2_graph(const ModelWeights& weights) {
  graph::Graph g;
  DecoderBuilder b(weights, g);
  graph::ValueId x = b.embed();
  for (int64_t i = 0; i < weights.config.num_layers; ++i) {
    const std::string p = DecoderBuilder::prefix(i);
    x = b.add(x, b.rmsnorm(b.attention(i, x), p + "post_attn_norm", p + "attn_out"), p + "x_attn");
    x = b.add(x, b.rmsnorm(b.mlp(i, x), p + "post_ffn_norm", p + "ffn_out"), p + "x_out");
  }
  b.head(x);
  return g;
}

}  // namespace minfer
