// LFM2 (Liquid AI, built for CPUs and phones): gated short convolutions on most layers, GQA attention with per-head
// q/k norms on a few, each followed by the gated MLP:
//   x += mixer(rmsnorm(x));  x += mlp(rmsnorm(x));  the final norm (embedding_norm) after the last layer
// The convolution: B, C, x = in_proj(h) (split at load into three projections); y = C * conv(B * x) (a causal
// depthwise conv of conv_L_cache taps, no activation, its last inputs kept per sequence); out_proj(y).
// From Hugging Face (Lfm2ForCausalLM) and from GGUF (llama.cpp's lfm2, conv layers marked by head_count_kv 0).
// LFM2-MoE (Lfm2MoeForCausalLM, GGUF lfm2moe): the same layers, the MLP of all but the first num_dense_layers
// replaced by experts under a sigmoid router whose expert_bias picks the experts but does not weigh them.
#include <algorithm>

#include "model/families/family_file.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

using graph::Node;
using graph::OpKind;
using graph::ValueId;

ValueId mul(DecoderBuilder& b, ValueId x, ValueId y, const std::string& out) {
  graph::Graph& g = b.graph();
  return g.add_node(Node{.kind = OpKind::kMul, .inputs = {x, y}, .output = g.add_value(out, g.value(x).width)});
}

ValueId short_conv(DecoderBuilder& b, int64_t layer, ValueId h) {
  const std::string p = DecoderBuilder::prefix(layer);
  const ValueId gate_in = b.matmul(h, p + "conv_in_b", "", p + "conv_b");
  const ValueId gate_out = b.matmul(h, p + "conv_in_c", "", p + "conv_c");
  const ValueId x = b.matmul(h, p + "conv_in_x", "", p + "conv_x");
  const ValueId conv = b.conv1d(layer, mul(b, gate_in, x, p + "conv_bx"), p + "conv_kernel", "",
                                b.config().conv_channels(), false, p + "conv");
  const ValueId y = mul(b, gate_out, conv, p + "conv_y");
  return b.all_reduce(b.matmul(y, p + "conv_out", "", p + b.shard_name("o")), p + "o");
}

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, ValueId x) {
    const ValueId h = b.rmsnorm(x, p + "attn_norm", p + "attn_in");
    const ValueId mixed = b.config().is_recurrent(i) ? short_conv(b, i, h) : b.attention(i, h);
    x = b.add(x, mixed, p + "x_attn");
    return b.add(x, b.mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in")), p + "x_out");
  });
}

// layer_types ("conv" / "full_attention"), or full_attn_idxs.
void read_layer_mixers(const HfFields& f, ModelConfig& c) {
  c.layer_mixers.assign(static_cast<size_t>(c.num_layers), LayerMixer::kShortConv);
  if (const nlohmann::json* types = f.get("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers)
      fail_load(f.path(), "field \"layer_types\" must list the {} layers' types, got {}", c.num_layers, types->dump());
    for (size_t i = 0; i < types->size(); ++i) {
      const nlohmann::json& t = (*types)[i];
      if (t != "conv" && t != "full_attention")
        fail_load(f.path(), "unsupported layer type {} in \"layer_types\" (conv, full_attention)", t.dump());
      if (t == "full_attention") c.layer_mixers[i] = LayerMixer::kAttention;
    }
    return;
  }
  const nlohmann::json* idxs = f.get("full_attn_idxs");
  if (idxs == nullptr || !idxs->is_array())
    fail_load(f.path(), "missing field \"layer_types\" (or \"full_attn_idxs\"): which layers attend");
  for (const nlohmann::json& i : *idxs) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.num_layers)
      fail_load(f.path(), "field \"full_attn_idxs\" holds {}, not a layer index", i.dump());
    c.layer_mixers[i.get<size_t>()] = LayerMixer::kAttention;
  }
}

// The MLP's width: intermediate_size, or with block_auto_adjust_ff_dim two thirds of it, times
// block_ffn_dim_multiplier, rounded up to block_multiple_of (transformers' Lfm2MLP).
int64_t mlp_width(const HfFields& f, int64_t width) {
  if (!f.boolean("block_auto_adjust_ff_dim", true)) return width;
  width = 2 * width / 3;
  if (const nlohmann::json* m = f.get("block_ffn_dim_multiplier")) {
    if (!m->is_number()) fail_load(f.path(), "field \"block_ffn_dim_multiplier\" must be a number");
    const int64_t multiple = f.integer("block_multiple_of", 256);
    if (multiple <= 0) fail_load(f.path(), "invalid block_multiple_of {}", multiple);
    width = static_cast<int64_t>(m->get<double>() * static_cast<double>(width));
    width = (width + multiple - 1) / multiple * multiple;
  }
  return width;
}

void read_common_hf(const HfFields& f, ModelConfig& c) {
  c.qk_norm = true;
  c.rms_norm_eps = f.number("norm_eps", 1e-5);
  // tie_embedding: the name in LFM2's own config.json (it wins in transformers too).
  c.tie_word_embeddings = f.boolean("tie_embedding", f.boolean("tie_word_embeddings", true));
  if (const nlohmann::json* params = f.get("rope_parameters")) {
    const HfFields rope(*params, f.path());
    c.rope_theta = rope.number("rope_theta", 1000000.0);
    if (const std::string type = rope.string("rope_type", "default"); type != "default")
      fail_load(f.path(), "unsupported rope_parameters.rope_type '{}' (supported: default)", type);
  } else {
    c.rope_theta = f.number("rope_theta", 1000000.0);
  }
  if (f.boolean("conv_bias", false)) fail_load(f.path(), "unsupported: conv_bias = true (biased LFM2 convolutions)");
  c.short_conv_kernel = f.integer("conv_L_cache", 3);
  read_layer_mixers(f, c);
}

void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  read_common_hf(f, c);
  c.intermediate_size = mlp_width(f, c.intermediate_size);
}

// The first num_dense_layers keep the dense MLP (intermediate_size as given: no adjustment here).
void set_dense_layers(ModelConfig& c, int64_t dense) {
  c.layer_dense.assign(static_cast<size_t>(c.num_layers), false);
  for (int64_t i = 0; i < std::min(dense, c.num_layers); ++i) c.layer_dense[static_cast<size_t>(i)] = true;
}

void read_moe_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  read_common_hf(f, c);
  c.num_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.norm_topk_prob = f.boolean("norm_topk_prob", true);
  c.moe_gating = kernels::MoeGating::kSigmoid;
  c.moe_selection_bias = f.boolean("use_expert_bias", true);
  c.routed_scaling_factor = f.number("routed_scaling_factor", 1.0);
  set_dense_layers(c, f.integer("num_dense_layers", 2));
}

void read_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  c.qk_norm = true;
  c.short_conv_kernel = g.get_int(arch + ".shortconv.l_cache");
  const std::string kv_key = arch + ".attention.head_count_kv";
  c.layer_mixers.clear();
  const GgufValue* kv = g.find(kv_key);
  if (kv == nullptr || kv->type != GgufType::ARRAY)
    fail_load(g.path(), "metadata '{}' must list each layer's KV heads (0 for a convolution layer)", kv_key);
  for (int64_t n : g.get_int_array(kv_key))
    c.layer_mixers.push_back(n == 0 ? LayerMixer::kShortConv : LayerMixer::kAttention);
}

// llama.cpp's lfm2moe: the router's function must be the sigmoid (expert_gating_func 2); it always renormalises and
// scales only where expert_weights_scale says so.
void read_moe_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  read_gguf(g, arch, c);
  const std::string gating = arch + ".expert_gating_func";
  if (const int64_t f = g.get_int(gating); f != 2)
    fail_load(g.path(), "unsupported metadata: {} = {} (LFM2-MoE routes by sigmoid, 2)", gating, f);
  c.moe_gating = kernels::MoeGating::kSigmoid;
  c.moe_selection_bias = true;
  c.norm_topk_prob = g.find_int(arch + ".expert_weights_norm").value_or(1) != 0;
  const double scale = g.find_float(arch + ".expert_weights_scale").value_or(0.0);
  c.routed_scaling_factor = scale != 0.0 ? scale : 1.0;
  set_dense_layers(c, g.find_int(arch + ".leading_dense_block_count").value_or(0));
}

// in_proj holds the B, C and x rows, one hidden_size each (split at load, adapt_weights below).
void split_in_proj(ModelWeights& w) {
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (!w.config.is_recurrent(i)) continue;
    require_fused(w, p + "conv_in", p + "conv_in_b");
    auto it = w.tensors.find(p + "conv_in");
    if (it == w.tensors.end()) continue;
    const Tensor in = it->second;
    const int64_t h = w.config.hidden_size;
    if (in.rank() != 2 || in.dim(0) != 3 * h || in.quant)
      fail_load(w.path, "tensor '{}' has shape {}, expected [{}, {}] (B, C and x rows)",
                checkpoint_name(w, p + "conv_in"), in.shape_string(), 3 * h, h);
    w.tensors[p + "conv_in_b"] = row_slice(in, 0, h);
    w.tensors[p + "conv_in_c"] = row_slice(in, h, 2 * h);
    w.tensors[p + "conv_in_x"] = row_slice(in, 2 * h, 3 * h);
    w.tensors.erase(it);
    squeeze_conv_kernel(w, p + "conv_kernel");
  }
}

constexpr WeightNameRow kNames[] = {
    {"attn_norm", "operator_norm.weight", "attn_norm.weight"},
    {"wo", "self_attn.out_proj.weight", "attn_output.weight"},
    {"q_norm", "self_attn.q_layernorm.weight", "attn_q_norm.weight"},
    {"k_norm", "self_attn.k_layernorm.weight", "attn_k_norm.weight"},
    {"ffn_norm", "ffn_norm.weight", "ffn_norm.weight"},
    {"w_gate", "feed_forward.w1.weight", "ffn_gate.weight"},
    {"w_up", "feed_forward.w3.weight", "ffn_up.weight"},
    {"w_down", "feed_forward.w2.weight", "ffn_down.weight"},
    {"conv_in", "conv.in_proj.weight", "shortconv.in_proj.weight"},
    {"conv_kernel", "conv.conv.weight", "shortconv.conv.weight"},
    {"conv_out", "conv.out_proj.weight", "shortconv.out_proj.weight"},
    // Only names for the test-model writer, which writes in_proj whole (lfm2_test_hf_weights).
    {"conv_in_b", "conv.in_proj_b.weight", ""},
    {"conv_in_c", "conv.in_proj_c.weight", ""},
    {"conv_in_x", "conv.in_proj_x.weight", ""},
};
// LFM2-MoE's router, its selection bias and the experts (HF: one tensor per expert, or transformers 5's stacked
// gate_up_proj / down_proj; GGUF: stacked per projection).
constexpr WeightNameRow kMoeRows[] = {
    {"router", "feed_forward.gate.weight", "ffn_gate_inp.weight"},
    {"expert_bias", "feed_forward.expert_bias", "exp_probs_b.bias"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "feed_forward.experts.down_proj", "ffn_down_exps.weight"},
    {"experts.w_gate_up", "feed_forward.experts.gate_up_proj", ""},
};
constexpr auto kMoeNames = concat_names(kNames, kMoeRows);
constexpr HfExpertNames kExperts = {"feed_forward.experts.", "w1.weight", "w3.weight", "w2.weight"};

constexpr WeightNameRow kGlobalNames[] = {{"final_norm", "model.embedding_norm.weight", "token_embd_norm.weight"}};

constexpr HfModelType kTypes[] = {{"lfm2", "Lfm2ForCausalLM"}};
constexpr HfModelType kMoeTypes[] = {{"lfm2_moe", "Lfm2MoeForCausalLM"}};

// in_proj's B | C | x rows; transformers 5's stacked experts.
void adapt_moe_weights(ModelWeights& w) {
  split_in_proj(w);
  for (int64_t i = 0; i < w.config.num_layers; ++i)
    if (w.config.is_moe(i))
      split_stacked_gate_up(w, "layers." + std::to_string(i) + ".", "feed_forward.experts.gate_up_proj");
}

}  // namespace

extern const std::span<const TestPreset> kLfm2Presets, kLfm2MoePresets;
nlohmann::json lfm2_test_config(const TestPreset& p, const TestConfigContext& x);
nlohmann::json lfm2_moe_test_config(const TestPreset& p, const TestConfigContext& x);
void lfm2_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights);

// clang-format off
extern const Family kLfm2Family = {
    .name = "lfm2", .hf_model_types = kTypes, .read_hf = read_hf, .gguf_arch = "lfm2", .read_gguf = read_gguf,
    .layer_names = kNames, .global_names = kGlobalNames, .build_graph = build_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing LFM2 as GGUF is not supported yet"},
    .test_presets = kLfm2Presets, .test_config = lfm2_test_config, .test_hf_weights = lfm2_test_hf_weights,
    .adapt_weights = split_in_proj};

extern const Family kLfm2MoeFamily = {
    .name = "lfm2moe", .hf_model_types = kMoeTypes, .read_hf = read_moe_hf, .gguf_arch = "lfm2moe",
    .read_gguf = read_moe_gguf, .layer_names = kMoeNames, .global_names = kGlobalNames, .hf_experts = &kExperts,
    .build_graph = build_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing LFM2-MoE as GGUF is not supported yet"},
    .test_presets = kLfm2MoePresets, .test_config = lfm2_moe_test_config, .test_hf_weights = lfm2_test_hf_weights,
    .adapt_weights = adapt_moe_weights};
// clang-format on

}  // namespace minfer
