#include "model/families/decoder_builder.h"

namespace minfer {

using graph::Node;
using graph::OpKind;
using graph::RowSpace;
using graph::ValueId;

graph::Graph DecoderBuilder::build(const ModelWeights& weights, const Block& block) {
  graph::Graph g;
  DecoderBuilder b(weights, g);
  ValueId x = b.embed();
  for (int64_t i = 0; i < weights.config.num_layers; ++i) x = block(b, i, prefix(i), x);
  b.head(x);
  return g;
}

ValueId DecoderBuilder::embed() {
  const bool sharded = w_.shard.sharded();
  Node n{.kind = OpKind::kEmbedding, .output = g_.add_value(shard_name("x"), c_.hidden_size)};
  n.weight = &w_.get("embed");
  n.scale = c_.embedding_scale;
  if (!sharded) return g_.add_node(n);
  n.row_offset = w_.shard.vocab_begin;  // vocab-parallel: this rank's rows, then the sum of every rank's
  n.vocab_stride = w_.shard.vocab_stride;
  return all_reduce(g_.add_node(n), "x");
}

ValueId DecoderBuilder::all_reduce(ValueId x, const std::string& out) {
  if (!w_.shard.sharded()) return x;
  return g_.add_node(Node{
      .kind = OpKind::kAllReduce, .inputs = {x}, .output = g_.add_value(out, g_.value(x).width, g_.value(x).rows)});
}

ValueId DecoderBuilder::matmul(ValueId x, const std::string& weight, const std::string& bias, const std::string& out) {
  const Tensor& wt = w_.get(weight);
  Node n{.kind = OpKind::kMatMul, .inputs = {x}, .output = g_.add_value(out, wt.dim(0), g_.value(x).rows)};
  n.weight = &wt;
  if (!bias.empty()) n.bias = f32(bias);
  return g_.add_node(n);
}

const Tensor* DecoderBuilder::f32(const std::string& name) {
  // Kernels read biases and sinks as f32: convert once here if the checkpoint stores them narrower.
  const Tensor& t = w_.get(name);
  return t.dtype == DType::F32 ? &t : g_.add_constant(to_f32(t));
}

ValueId DecoderBuilder::rmsnorm(ValueId x, const std::string& weight, const std::string& out, int64_t head_dim) {
  Node n{.kind = OpKind::kRmsNorm, .inputs = {x}, .output = g_.add_value(out, g_.value(x).width, g_.value(x).rows)};
  n.weight = &w_.get(weight);
  n.eps = static_cast<float>(c_.rms_norm_eps);
  n.head_dim = head_dim;
  return g_.add_node(n);
}

ValueId DecoderBuilder::add(ValueId a, ValueId b, const std::string& out) {
  return g_.add_node(
      Node{.kind = OpKind::kAdd, .inputs = {a, b}, .output = g_.add_value(out, g_.value(a).width, g_.value(a).rows)});
}

ValueId DecoderBuilder::rope(ValueId x, int64_t heads, int32_t table, const std::string& out) {
  Node n{.kind = OpKind::kRope,
         .inputs = {x},
         .output = g_.add_value(out, heads * c_.head_dim),
         .heads = heads,
         .head_dim = c_.head_dim};
  n.rope = table;
  return g_.add_node(n);
}

ValueId DecoderBuilder::attention(int64_t layer, ValueId h) {
  const std::string p = prefix(layer);
  const bool bias = c_.attention_bias;
  ValueId q = matmul(h, p + "wq", bias ? p + "bq" : "", p + "q");
  ValueId k = matmul(h, p + "wk", bias ? p + "bk" : "", p + "k");
  // Per head, or over the whole projection (post-norm blocks; the QKV pass then leaves the three GEMMs apart).
  if (c_.qk_norm) {
    const int64_t width = c_.qk_norm_full_width ? 0 : c_.head_dim;
    q = rmsnorm(q, p + "q_norm", p + "q_normed", width);
    k = rmsnorm(k, p + "k_norm", p + "k_normed", width);
  }
  const ValueId v = matmul(h, p + "wv", bias ? p + "bv" : "", p + "v");
  const bool sliding = c_.is_sliding(layer);
  const int32_t table = c_.rope_table(layer);  // the sliding layers' own, or the identity for NoPE layers
  const ValueId q_rot = rope(q, c_.num_heads, table, p + "q_rot");
  const ValueId k_rot = rope(k, c_.num_kv_heads, table, p + "k_rot");
  const auto l = static_cast<int32_t>(layer);
  g_.add_node(Node{.kind = OpKind::kKvWrite, .inputs = {k_rot, v}, .layer = l});
  Node attn{.kind = OpKind::kAttention,
            .inputs = {q_rot},
            .output = g_.add_value(p + "attn", c_.num_heads * c_.head_dim),
            .layer = l,
            .heads = c_.num_heads,
            .head_dim = c_.head_dim,
            .scale = c_.attention_score_scale()};
  attn.window = sliding ? c_.sliding_window : 0;
  attn.softcap = static_cast<float>(c_.attn_softcap);
  if (c_.attention_sinks) attn.sinks = f32(p + "sinks");
  ValueId heads_out = g_.add_node(attn);
  if (c_.attn_output_gate) {  // Qwen3.5: each head's output times the sigmoid of its gate
    const ValueId gate = matmul(h, p + "wq_gate", "", p + "attn_gate");
    heads_out = g_.add_node(Node{.kind = OpKind::kSigmoidMul,
                                 .inputs = {gate, heads_out},
                                 .output = g_.add_value(p + "attn_gated", c_.num_heads * c_.head_dim)});
  }
  return all_reduce(matmul(heads_out, p + "wo", c_.o_bias ? p + "bo" : "", p + shard_name("o")), p + "o");
}

ValueId DecoderBuilder::gated_mlp(int64_t layer, ValueId h) {
  const std::string p = prefix(layer);
  if (!c_.mlp_gated) {  // down(relu(up(h))^2): Nemotron-H
    const ValueId up = matmul(h, p + "w_up", "", p + "up");
    const ValueId act = g_.add_node(
        Node{.kind = OpKind::kRelu2, .inputs = {up}, .output = g_.add_value(p + "act", g_.value(up).width)});
    return all_reduce(matmul(act, p + "w_down", "", p + shard_name("down")), p + "down");
  }
  const ValueId gate = matmul(h, p + "w_gate", "", p + "gate");
  const ValueId up = matmul(h, p + "w_up", "", p + "up");
  const OpKind act = c_.hidden_act == Activation::kGeluTanh ? OpKind::kGeluTanhMul : OpKind::kSiluMul;
  const ValueId gated =
      g_.add_node(Node{.kind = act, .inputs = {gate, up}, .output = g_.add_value(p + "act", g_.value(gate).width)});
  return all_reduce(matmul(gated, p + "w_down", "", p + shard_name("down")), p + "down");
}

ValueId DecoderBuilder::moe(int64_t layer, ValueId h) {
  const std::string p = prefix(layer);
  const bool ep = w_.shard.expert_parallel;
  Node n{.kind = OpKind::kMoe,
         .inputs = {h},
         .output = g_.add_value(p + (ep ? "moe" : shard_name("moe")), c_.hidden_size)};
  // The router in f32 when stored as f16 / bf16 (it is small: experts x hidden): bf16 GEMMs round their activations
  // for many rows and not for one, and a near tie between two experts' logits must not be decided differently in a
  // prompt than in decode.
  const Tensor& router = w_.get(p + "router");
  n.weight = router.dtype == DType::F16 || router.dtype == DType::BF16 ? f32(p + "router") : &router;
  // Expert parallel: this rank's experts, whole (the node exchanges rows with the others); tensor parallel: a slice
  // of every expert, all-reduced after.
  n.expert_parallel = ep;
  n.expert_begin = ep ? w_.shard.expert_begin : 0;
  const int64_t end = ep ? w_.shard.expert_end : c_.num_experts;
  for (int64_t e = n.expert_begin; e < end; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    for (const char* w : {"w_gate", "w_up", "w_down"}) n.experts.push_back(&w_.get(x + w));
    if (c_.moe_bias)
      for (const char* b : {"b_gate", "b_up", "b_down"}) n.expert_biases.push_back(f32(x + b));
  }
  if (c_.moe_bias) n.bias = f32(p + "router_bias");
  n.moe_activation = c_.moe_swiglu_oai ? kernels::MoeActivation::kSwigluOai : kernels::MoeActivation::kSilu;
  n.top_k = c_.num_experts_per_tok;
  n.renormalize = c_.norm_topk_prob;
  n.moe_gating = c_.moe_gating;
  if (c_.moe_selection_bias) n.selection_bias = f32(p + "expert_bias");
  n.routed_scale = static_cast<float>(c_.routed_scaling_factor);
  return ep ? g_.add_node(n) : all_reduce(g_.add_node(n), p + "moe");
}

ValueId DecoderBuilder::conv1d(int64_t layer, ValueId x, const std::string& weight, const std::string& bias,
                               int64_t width, bool silu, const std::string& out) {
  Node conv{.kind = OpKind::kConv1d, .inputs = {x}, .output = g_.add_value(out, width)};
  conv.weight = f32(weight);
  if (!bias.empty()) conv.bias = f32(bias);
  conv.layer = static_cast<int32_t>(layer);
  conv.silu = silu;
  return g_.add_node(conv);
}

void DecoderBuilder::head(ValueId x) {
  // Only the rows that sample go through the final norm and the (large) lm_head.
  const ValueId last = g_.add_node(Node{.kind = OpKind::kGatherRows,
                                        .inputs = {x},
                                        .output = g_.add_value("x_last", c_.hidden_size, RowSpace::kSampled)});
  const ValueId normed = rmsnorm(last, "final_norm", "x_final");
  ValueId logits = matmul(normed, w_.find("lm_head") ? "lm_head" : "embed", "", "logits");
  if (w_.shard.sharded()) {  // vocab-parallel: each rank's columns, side by side on rank 0
    Node gather{.kind = OpKind::kGatherVocab,
                .inputs = {logits},
                .output = g_.add_value("logits_all", c_.vocab_size, RowSpace::kSampled)};
    gather.vocab_stride = w_.shard.vocab_stride;
    logits = g_.add_node(gather);
  }
  if (c_.final_softcap > 0) {
    Node cap{.kind = OpKind::kSoftcap,
             .inputs = {logits},
             .output = g_.add_value("logits_capped", c_.vocab_size, RowSpace::kSampled)};
    cap.softcap = static_cast<float>(c_.final_softcap);
    logits = g_.add_node(cap);
  }
  g_.set_output(logits);
}

}  // namespace minfer
