// Qwen3.5 / Qwen3.6 (text): a hybrid of Gated DeltaNet layers (three of four) and gated full attention (the fourth),
// each followed by the gated MLP:
//   x += mixer(rmsnorm(x));  x += mlp(rmsnorm(x))
// Gated DeltaNet: qkv -> causal conv (4 taps, SiLU) -> the gated delta rule (kernels/mixers.h) -> RMSNorm per value
// head times SiLU(z) -> out projection. Attention: Qwen3's per-head q/k norms, partial rotary (a quarter of head_dim
// 256; the interleaved mRoPE sections carry one position for text, which is plain RoPE), and a sigmoid gate per
// head from q_proj on the output. Every RMSNorm but the delta rule's multiplies by (1 + w) (added at load for HF).
// From Hugging Face the text model of Qwen3_5ForConditionalGeneration (model.language_model.*; the vision tower and
// the MTP layers are skipped) or Qwen3_5ForCausalLM; from GGUF llama.cpp's qwen35.
#include "model/families/qwen35.h"

#include "model/families/family_file.h"

namespace minfer {
namespace {

using graph::Node;
using graph::OpKind;
using graph::ValueId;

ValueId linear_attention(DecoderBuilder& b, int64_t layer, ValueId h) {
  const ModelConfig& c = b.config();
  const LinearAttentionShape& l = c.linear;
  const std::string p = DecoderBuilder::prefix(layer);
  graph::Graph& g = b.graph();
  const ValueId qkv = b.matmul(h, p + "ssm_in_qkv", "", p + "qkv");
  const ValueId z = b.matmul(h, p + "ssm_in_z", "", p + "z");
  const ValueId beta = b.matmul(h, p + "ssm_in_b", "", p + "beta_in");
  const ValueId decay = b.matmul(h, p + "ssm_in_a", "", p + "decay_in");
  const auto index = static_cast<int32_t>(layer);
  const ValueId mixed = b.conv1d(layer, qkv, p + "ssm_conv", "", l.conv_channels(), true, p + "qkv_conv");
  Node delta{.kind = OpKind::kDeltaNet,
             .inputs = {mixed, beta, decay},
             .output = g.add_value(p + "delta", l.v_heads * l.v_dim),
             .layer = index,
             .heads = l.v_heads,
             .head_dim = l.k_dim};
  delta.weight = b.f32(p + "ssm_a");
  delta.bias = b.f32(p + "ssm_dt_bias");
  delta.kv_heads = l.k_heads;
  delta.value_dim = l.v_dim;
  delta.tiled_heads = l.tiled_heads;
  const ValueId normed = b.rmsnorm(g.add_node(delta), p + "ssm_norm_gated", p + "delta_normed", l.v_dim);
  const ValueId gated = g.add_node(Node{
      .kind = OpKind::kSiluMul, .inputs = {z, normed}, .output = g.add_value(p + "delta_gated", l.v_heads * l.v_dim)});
  return b.all_reduce(b.matmul(gated, p + "ssm_out", "", p + b.shard_name("o")), p + "o");
}

// Qwen3.5-MoE's feed-forward block: the routed experts, plus the shared expert on every token scaled by
// sigmoid(shared_gate . h).
ValueId experts_and_shared(DecoderBuilder& b, int64_t layer, ValueId h) {
  const ValueId routed = b.moe(layer, h);
  if (b.config().shared_expert_intermediate_size == 0) return routed;
  const std::string p = DecoderBuilder::prefix(layer);
  graph::Graph& g = b.graph();
  const ValueId gate = b.matmul(h, p + "shared.w_gate", "", p + "shared_gate_in");
  const ValueId up = b.matmul(h, p + "shared.w_up", "", p + "shared_up");
  const ValueId act = g.add_node(Node{
      .kind = OpKind::kSiluMul, .inputs = {gate, up}, .output = g.add_value(p + "shared_act", g.value(gate).width)});
  const ValueId down = b.matmul(act, p + "shared.w_down", "", p + "shared_down");
  const ValueId scale = b.matmul(h, p + "shared_gate", "", p + "shared_scale");
  // The gate scales the rank's partial sum under tensor parallel (it is linear), all-reduced after.
  const ValueId shared = g.add_node(Node{.kind = OpKind::kSigmoidMul,
                                         .inputs = {scale, down},
                                         .output = g.add_value(p + b.shard_name("shared"), g.value(down).width)});
  return b.add(routed, b.all_reduce(shared, p + "shared"), p + "moe_sum");
}

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, ValueId x) {
    const ValueId h = b.rmsnorm(x, p + "attn_norm", p + "attn_in");
    const ValueId mixed = b.config().is_recurrent(i) ? linear_attention(b, i, h) : b.attention(i, h);
    x = b.add(x, mixed, p + "x_attn");
    const ValueId f = b.rmsnorm(x, p + "ffn_norm", p + "ffn_in");
    return b.add(x, b.config().is_moe(i) ? experts_and_shared(b, i, f) : b.gated_mlp(i, f), p + "x_out");
  });
}

// layer_types, or every full_attention_interval-th layer full (transformers' default).
void read_layer_mixers(const HfFields& f, ModelConfig& c) {
  c.layer_mixers.clear();
  if (const nlohmann::json* types = f.get("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers)
      fail_load(f.path(), "field \"layer_types\" must list the {} layers' types, got {}", c.num_layers, types->dump());
    for (const nlohmann::json& t : *types) {
      if (t != "linear_attention" && t != "full_attention")
        fail_load(f.path(), "unsupported layer type {} in \"layer_types\" (linear_attention, full_attention)",
                  t.dump());
      c.layer_mixers.push_back(t == "linear_attention" ? LayerMixer::kGatedDeltaNet : LayerMixer::kAttention);
    }
    return;
  }
  const int64_t interval = f.integer("full_attention_interval", 4);
  if (interval <= 0) fail_load(f.path(), "invalid full_attention_interval {}", interval);
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.layer_mixers.push_back((i + 1) % interval != 0 ? LayerMixer::kGatedDeltaNet : LayerMixer::kAttention);
}

// rope_parameters (transformers 5) or the older top-level fields: theta and the partial rotary factor; only the
// default rope type (mRoPE's sections are one position for text).
void read_rope(const HfFields& f, ModelConfig& c) {
  const nlohmann::json* params = f.get("rope_parameters");
  if (params && !params->is_object())
    fail_load(f.path(), "field \"rope_parameters\" must be an object, got {}", params->dump());
  const HfFields rope = params ? HfFields(*params, f.path()) : f;
  c.rope_theta = rope.number("rope_theta", f.number("rope_theta", 10000000.0));
  if (const std::string type = rope.string("rope_type", "default"); type != "default")
    fail_load(f.path(), "unsupported rope_parameters.rope_type '{}' (supported: default)", type);
  const double partial = rope.number("partial_rotary_factor", f.number("partial_rotary_factor", 0.25));
  if (!(partial > 0 && partial <= 1)) fail_load(f.path(), "invalid partial_rotary_factor {}", partial);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
}

void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.qk_norm = true;
  c.norm_weight_plus_one = true;
  c.attn_output_gate = f.boolean("attn_output_gate", true);
  read_rope(f, c);
  read_layer_mixers(f, c);
  c.linear.k_heads = f.integer("linear_num_key_heads");
  c.linear.v_heads = f.integer("linear_num_value_heads");
  c.linear.k_dim = f.integer("linear_key_head_dim");
  c.linear.v_dim = f.integer("linear_value_head_dim");
  c.linear.conv_kernel = f.integer("linear_conv_kernel_dim", 4);
  c.mtp_layers = f.integer("mtp_num_hidden_layers", 0);
}

// Qwen3.5-MoE: every layer's MLP is num_experts experts (softmax router, top num_experts_per_tok, always
// renormalised: transformers has no switch for it) and one shared expert.
void read_moe_hf(const HfFields& f, std::string_view model_type, ModelConfig& c) {
  read_hf(f, model_type, c);
  c.num_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size", 0);
  c.norm_topk_prob = true;
  if (!f.get("intermediate_size")) c.intermediate_size = c.moe_intermediate_size;
}

void read_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  c.qk_norm = true;
  c.attn_output_gate = true;
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  // block_count counts the MTP layers after the trunk (loaded as mtp.{j}.*, not run here).
  c.mtp_layers = g.find_int(key("nextn_predict_layers")).value_or(0);
  c.num_layers -= c.mtp_layers;
  LinearAttentionShape& l = c.linear;
  l.k_dim = g.get_int(key("ssm.state_size"));
  l.k_heads = g.get_int(key("ssm.group_count"));
  l.v_heads = g.get_int(key("ssm.time_step_rank"));
  l.conv_kernel = g.get_int(key("ssm.conv_kernel"));
  const int64_t inner = g.get_int(key("ssm.inner_size"));
  if (l.v_heads <= 0 || inner % l.v_heads != 0)
    fail_load(g.path(), "invalid metadata: {} ({}) is not a multiple of {} ({})", key("ssm.inner_size"), inner,
              key("ssm.time_step_rank"), l.v_heads);
  l.v_dim = inner / l.v_heads;
  l.tiled_heads = true;
  c.layer_mixers.clear();
  const std::string recurrent = key("attention.recurrent_layers");
  if (const GgufValue* flags = g.find(recurrent); flags && flags->type == GgufType::ARRAY) {
    for (int64_t flag : g.get_int_array(recurrent))
      if (static_cast<int64_t>(c.layer_mixers.size()) < c.num_layers)
        c.layer_mixers.push_back(flag != 0 ? LayerMixer::kGatedDeltaNet : LayerMixer::kAttention);
    return;
  }
  const int64_t interval = g.find_int(key("full_attention_interval")).value_or(4);
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.layer_mixers.push_back((i + 1) % interval != 0 ? LayerMixer::kGatedDeltaNet : LayerMixer::kAttention);
}

constexpr HfModelType kTypes[] = {{"qwen3_5", "Qwen3_5ForConditionalGeneration"},
                                  {"qwen3_5_text", "Qwen3_5ForCausalLM"}};
constexpr HfModelType kMoeTypes[] = {{"qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration"},
                                     {"qwen3_5_moe_text", "Qwen3_5MoeForCausalLM"}};

}  // namespace

graph::Graph build_qwen35_graph(const ModelWeights& weights) { return build_graph(weights); }
void read_qwen35_moe_hf(const HfFields& f, std::string_view model_type, ModelConfig& c) {
  read_moe_hf(f, model_type, c);
}
void read_qwen35_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) { read_gguf(g, arch, c); }

// clang-format off
extern const Family kQwen35Family = {
    .name = "qwen35", .hf_model_types = kTypes, .read_hf = read_hf, .gguf_arch = "qwen35", .read_gguf = read_gguf,
    .layer_names = kQwen35Names, .build_graph = build_graph, .gguf_export = {.arch = nullptr,
    .refusal = "writing Qwen3.5 as GGUF is not supported yet"}, .test_presets = kQwen35Presets,
    .test_config = qwen35_test_config, .test_hf_weights = qwen35_test_hf_weights,
    .hf_text_prefix = "model.language_model.", .adapt_weights = adapt_qwen35_weights};

extern const Family kQwen35MoeFamily = {
    .name = "qwen35moe", .hf_model_types = kMoeTypes, .read_hf = read_moe_hf, .gguf_arch = "qwen35moe",
    .read_gguf = read_gguf, .layer_names = kQwen35MoeNames, .hf_experts = &kQwen35Experts, .build_graph = build_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing Qwen3.5-MoE as GGUF is not supported yet"},
    .test_presets = kQwen35MoePresets, .test_config = qwen35_moe_test_config,
    .test_hf_weights = qwen35_test_hf_weights, .hf_text_prefix = "model.language_model.",
    .adapt_weights = adapt_qwen35_weights, .shared_experts = true};
// clang-format on

}  // namespace minfer
