#include "model/decoder_graph.h"

#include <cmath>
#include <string>

namespace minfer {

using graph::Node;
using graph::OpKind;
using graph::RowSpace;
using graph::ValueId;

graph::Graph build_decoder_graph(const ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  graph::Graph g;
  const int64_t q_width = c.num_heads * c.head_dim;
  const int64_t kv_width = c.num_kv_heads * c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  auto matmul = [&](ValueId x, const std::string& w, const std::string& b, const std::string& out) {
    const Tensor& wt = weights.get(w);
    Node n{.kind = OpKind::kMatMul, .inputs = {x}, .output = g.add_value(out, wt.dim(0), g.value(x).rows)};
    n.weight = &wt;
    // The GEMM epilogue adds an f32 bias; convert once here if the checkpoint stores it narrower.
    if (!b.empty()) {
      const Tensor& bias = weights.get(b);
      n.bias = bias.dtype == DType::F32 ? &bias : g.add_constant(to_f32(bias));
    }
    return g.add_node(n);
  };
  // head_dim > 0: over each head of that width (Qwen3's q/k norms, one [head_dim] weight shared by the heads).
  auto rmsnorm = [&](ValueId x, const std::string& w, const std::string& out, int64_t head_dim = 0) {
    Node n{.kind = OpKind::kRmsNorm, .inputs = {x}, .output = g.add_value(out, g.value(x).width, g.value(x).rows)};
    n.weight = &weights.get(w);
    n.eps = eps;
    n.head_dim = head_dim;
    return g.add_node(n);
  };
  auto binary = [&](OpKind kind, ValueId a, ValueId b, const std::string& out) {
    return g.add_node(
        Node{.kind = kind, .inputs = {a, b}, .output = g.add_value(out, g.value(a).width, g.value(a).rows)});
  };

  Node embed{.kind = OpKind::kEmbedding, .output = g.add_value("x", c.hidden_size)};
  embed.weight = &weights.get("embed");
  ValueId x = g.add_node(embed);

  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    const std::string bias_q = c.attention_bias ? p + "bq" : "";
    const std::string bias_k = c.attention_bias ? p + "bk" : "";
    const std::string bias_v = c.attention_bias ? p + "bv" : "";
    const ValueId h = rmsnorm(x, p + "attn_norm", p + "attn_in");
    ValueId q = matmul(h, p + "wq", bias_q, p + "q");
    ValueId k = matmul(h, p + "wk", bias_k, p + "k");
    if (c.qk_norm) {
      q = rmsnorm(q, p + "q_norm", p + "q_normed", c.head_dim);
      k = rmsnorm(k, p + "k_norm", p + "k_normed", c.head_dim);
    }
    const ValueId v = matmul(h, p + "wv", bias_v, p + "v");
    const ValueId q_rot = g.add_node(Node{.kind = OpKind::kRope,
                                          .inputs = {q},
                                          .output = g.add_value(p + "q_rot", q_width),
                                          .heads = c.num_heads,
                                          .head_dim = c.head_dim});
    const ValueId k_rot = g.add_node(Node{.kind = OpKind::kRope,
                                          .inputs = {k},
                                          .output = g.add_value(p + "k_rot", kv_width),
                                          .heads = c.num_kv_heads,
                                          .head_dim = c.head_dim});
    g.add_node(Node{.kind = OpKind::kKvWrite, .inputs = {k_rot, v}, .layer = static_cast<int32_t>(i)});
    const ValueId attn =
        g.add_node(Node{.kind = OpKind::kAttention,
                        .inputs = {q_rot},
                        .output = g.add_value(p + "attn", q_width),
                        .layer = static_cast<int32_t>(i),
                        .heads = c.num_heads,
                        .head_dim = c.head_dim,
                        .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))});
    const ValueId o = matmul(attn, p + "wo", "", p + "o");
    x = binary(OpKind::kAdd, x, o, p + "x_attn");
    const ValueId h2 = rmsnorm(x, p + "ffn_norm", p + "ffn_in");
    const ValueId gate = matmul(h2, p + "w_gate", "", p + "gate");
    const ValueId up = matmul(h2, p + "w_up", "", p + "up");
    const ValueId act = binary(OpKind::kSiluMul, gate, up, p + "act");
    const ValueId down = matmul(act, p + "w_down", "", p + "down");
    x = binary(OpKind::kAdd, x, down, p + "x_out");
  }

  // Only the rows that sample go through the final norm and the (large) lm_head.
  const ValueId last = g.add_node(Node{
      .kind = OpKind::kGatherRows, .inputs = {x}, .output = g.add_value("x_last", c.hidden_size, RowSpace::kSampled)});
  const ValueId normed = rmsnorm(last, "final_norm", "x_final");
  const ValueId logits = matmul(normed, weights.find("lm_head") ? "lm_head" : "embed", "", "logits");
  g.set_output(logits);
  return g;
}

graph::Graph compile_decoder_graph(const ModelWeights& weights, const graph::FusionOptions& options,
                                   graph::FusionReport* report, ThreadPool* pool) {
  graph::Graph g = build_decoder_graph(weights);
  graph::FusionReport r = graph::run_fusion_passes(g, options, pool);
  if (report) *report = std::move(r);
  return g;
}

graph::RopeTable rope_table(const ModelConfig& config) {
  return graph::RopeTable{config.rope_inv_freq(), config.rope_style};
}

}  // namespace minfer
