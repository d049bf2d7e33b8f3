// Granite 4.0-H (granitemoehybrid): Mamba2 layers with a few attention layers (no positional encoding unless
// position_embedding_type is "rope"), each followed by routed experts plus an ungated shared MLP (or the shared MLP
// alone in the dense variants), with Granite's multipliers (embedding, attention scale, residual and logits, the last
// two folded into the weights at load: loaders/output_scales.cpp):
//   x += mixer(rmsnorm(x));  x += moe(h) + shared(h), h = rmsnorm(x)
// Mamba2: z, x|B|C and dt from in_proj (split at load); conv (4 taps, bias, SiLU) over x|B|C; the selective scan
// (kernels/mixers.h); RMSNorm per group of y * SiLU(z); out projection. From Hugging Face and GGUF (llama.cpp's
// granitehybrid).
#include "model/families/granite_hybrid.h"

#include "model/families/family_file.h"
#include "model/families/mamba2.h"

namespace minfer {
namespace {

using graph::Node;
using graph::OpKind;
using graph::ValueId;

// The routed experts plus the shared MLP, or the shared MLP alone (loaded as the layer's dense MLP).
ValueId feed_forward(DecoderBuilder& b, int64_t layer, ValueId h) {
  if (!b.config().is_moe(layer)) return b.gated_mlp(layer, h);
  const std::string p = DecoderBuilder::prefix(layer);
  graph::Graph& g = b.graph();
  const ValueId gate = b.matmul(h, p + "shared.w_gate", "", p + "shared_gate_in");
  const ValueId up = b.matmul(h, p + "shared.w_up", "", p + "shared_up");
  const ValueId act = g.add_node(Node{
      .kind = OpKind::kSiluMul, .inputs = {gate, up}, .output = g.add_value(p + "shared_act", g.value(gate).width)});
  const ValueId shared = b.all_reduce(b.matmul(act, p + "shared.w_down", "", p + b.shard_name("shared")), p + "shared");
  return b.add(b.moe(layer, h), shared, p + "moe_sum");
}

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, ValueId x) {
    const ValueId h = b.rmsnorm(x, p + "attn_norm", p + "attn_in");
    const ValueId mixed = b.config().is_recurrent(i) ? mamba2_mixer(b, i, h) : b.attention(i, h);
    x = b.add(x, mixed, p + "x_attn");
    return b.add(x, feed_forward(b, i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in")), p + "x_out");
  });
}

void read_layer_types(const HfFields& f, ModelConfig& c) {
  c.layer_mixers.assign(static_cast<size_t>(c.num_layers), LayerMixer::kMamba2);
  const nlohmann::json* types = f.get("layer_types");
  if (types == nullptr) types = f.get("layers_block_type");
  if (types == nullptr) return;  // transformers' default: every layer Mamba2
  if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers)
    fail_load(f.path(), "field \"layer_types\" must list the {} layers' types, got {}", c.num_layers, types->dump());
  for (size_t i = 0; i < types->size(); ++i) {
    const nlohmann::json& t = (*types)[i];
    if (t == "attention" || t == "full_attention") {
      c.layer_mixers[i] = LayerMixer::kAttention;
    } else if (t != "mamba" && t != "linear_attention") {
      fail_load(f.path(), "unsupported layer type {} in \"layer_types\" (mamba, attention)", t.dump());
    }
  }
}

void read_mamba(const HfFields& f, ModelConfig& c) {
  MambaShape& m = c.mamba;
  m.heads = f.integer("mamba_n_heads", 128);
  m.groups = f.integer("mamba_n_groups", 1);
  m.state = f.integer("mamba_d_state", 256);
  m.conv_kernel = f.integer("mamba_d_conv", 4);
  m.conv_bias = f.boolean("mamba_conv_bias", true);
  const int64_t inner = f.integer("mamba_expand", 2) * c.hidden_size;
  const nlohmann::json* head = f.get("mamba_d_head");
  m.head_dim = head == nullptr || *head == "auto" ? (m.heads > 0 ? inner / m.heads : 0) : f.integer("mamba_d_head");
  if (m.inner() != inner)
    fail_load(f.path(), "invalid config: mamba_n_heads x mamba_d_head = {} is not mamba_expand x hidden_size = {}",
              m.inner(), inner);
  if (f.boolean("mamba_proj_bias", false)) fail_load(f.path(), "unsupported: mamba_proj_bias = true");
  check_time_step_limit(f);
}

void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(f.number("embedding_multiplier", 1.0));
  c.attention_scale = f.number("attention_multiplier", 1.0);
  c.residual_multiplier = f.number("residual_multiplier", 1.0);
  c.logits_scaling = f.number("logits_scaling", 1.0);
  if (f.string("position_embedding_type", "nope") != "rope")
    c.layer_rope.assign(static_cast<size_t>(c.num_layers), false);
  if (const nlohmann::json* params = f.get("rope_parameters"))
    c.rope_theta = HfFields(*params, f.path()).number("rope_theta", c.rope_theta);
  read_layer_types(f, c);
  read_mamba(f, c);
  c.num_experts = f.integer("num_local_experts", 8);
  if (c.num_experts > 0) {
    c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;  // softmax over the top k logits
    c.shared_expert_intermediate_size = f.integer("shared_intermediate_size", 1024);
    c.shared_expert_gated = false;
  } else {
    c.intermediate_size = f.integer("shared_intermediate_size", 1024);  // the shared MLP is the layer's MLP
  }
}

}  // namespace

// clang-format off
extern const Family kGraniteHybridFamily = {
    .name = "granitehybrid", .hf_model_types = kGraniteHybridTypes, .read_hf = read_hf,
    .gguf_arch = "granitehybrid", .gguf_rope_style = kernels::RopeStyle::kInterleaved,
    .read_gguf = read_granite_hybrid_gguf, .layer_names = kGraniteHybridNames, .hf_experts = &kGraniteHybridExperts,
    .build_graph = build_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing Granite 4.0-H as GGUF is not supported yet"},
    .test_presets = kGraniteHybridPresets, .test_config = granite_hybrid_test_config,
    .test_hf_weights = granite_hybrid_test_hf_weights, .adapt_weights = adapt_granite_hybrid_weights,
    .shared_experts = true};
// clang-format on

}  // namespace minfer
