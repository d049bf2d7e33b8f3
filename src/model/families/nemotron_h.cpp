// Nemotron-H (NVIDIA; Nemotron-H-8B, Nemotron Nano 9B v2): each layer is one block, a Mamba2 mixer, attention (GQA,
// no positional encoding) or an MLP (squared ReLU, no gate), after one RMSNorm:
//   x += block(rmsnorm(x))
// The layers' kinds come from hybrid_override_pattern (M mamba, * attention, - MLP) or transformers 5's
// layers_block_type list. A minfer layer is a mixer then an MLP: Nemotron-H's mixer layers have no MLP
// (ModelConfig::layer_mlp) and its MLP layers no mixer (LayerMixer::kNone; their norm renamed ffn_norm at load).
// From Hugging Face (NemotronHForCausalLM: backbone.* names, or model.* as transformers 5 saves them) and from GGUF
// (llama.cpp's nemotron_h: the layer kinds from the per-layer head_count_kv and feed_forward_length lists). llama.cpp's
// converter reorders the rows of q and k within each head as for RoPE, which this model does not apply: the same
// reordering of both leaves every attention score as it was, so the GGUF rows are used as stored.
// The MoE variant (nemotron_h_moe, Nemotron 3) is refused.
#include "model/families/family_file.h"
#include "model/families/mamba2.h"

namespace minfer {
namespace {

using graph::ValueId;

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, ValueId x) {
    const ModelConfig& c = b.config();
    if (c.mixer(i) == LayerMixer::kNone)
      return b.add(x, b.gated_mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in")), p + "x_out");
    const ValueId h = b.rmsnorm(x, p + "attn_norm", p + "attn_in");
    return b.add(x, c.is_recurrent(i) ? mamba2_mixer(b, i, h) : b.attention(i, h), p + "x_out");
  });
}

// Each layer's kind, from its pattern character or list entry.
void set_layer(ModelConfig& c, size_t i, std::string_view kind, const std::string& path) {
  if (kind == "M" || kind == "mamba" || kind == "linear_attention") {
    c.layer_mixers[i] = LayerMixer::kMamba2;
  } else if (kind == "*" || kind == "attention" || kind == "full_attention") {
    c.layer_mixers[i] = LayerMixer::kAttention;
  } else if (kind == "-" || kind == "mlp") {
    c.layer_mixers[i] = LayerMixer::kNone;
    c.layer_mlp[i] = true;
  } else if (kind == "E" || kind == "moe") {
    fail_load(path, "unsupported: Nemotron-H MoE layers (layer {} is '{}'; nemotron_h_moe is not supported yet)", i,
              kind);
  } else {
    fail_load(path, "unsupported layer type '{}' at layer {} (M / mamba, * / attention, - / mlp)", kind, i);
  }
}

void read_layers(const HfFields& f, ModelConfig& c) {
  const nlohmann::json* list = f.get("layers_block_type");
  if (list == nullptr) list = f.get("layer_types");
  const nlohmann::json* pattern = f.get("hybrid_override_pattern");
  if (list == nullptr && (pattern == nullptr || !pattern->is_string()))
    fail_load(f.path(), "missing field \"hybrid_override_pattern\" (or \"layers_block_type\"): each layer's kind");
  const auto n = static_cast<size_t>(c.num_layers);
  c.layer_mixers.assign(n, LayerMixer::kMamba2);
  c.layer_mlp.assign(n, false);
  if (list != nullptr) {
    if (!list->is_array() || list->size() != n)
      fail_load(f.path(), "field \"layers_block_type\" must list the {} layers' types, got {}", n, list->dump());
    for (size_t i = 0; i < n; ++i) {
      if (!(*list)[i].is_string()) fail_load(f.path(), "field \"layers_block_type\" holds {}", (*list)[i].dump());
      set_layer(c, i, (*list)[i].get<std::string>(), f.path());
    }
    return;
  }
  const std::string p = pattern->get<std::string>();
  if (p.size() != n)
    fail_load(f.path(), "field \"hybrid_override_pattern\" has {} characters for {} layers", p.size(), n);
  for (size_t i = 0; i < n; ++i) set_layer(c, i, std::string_view(p).substr(i, 1), f.path());
}

void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.rms_norm_eps = f.number("layer_norm_epsilon", f.number("rms_norm_eps", 1e-5));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.layer_rope.assign(static_cast<size_t>(c.num_layers), false);
  c.mlp_gated = false;
  if (const std::string act = f.string("mlp_hidden_act", "relu2"); act != "relu2")
    fail_load(f.path(), "unsupported mlp_hidden_act '{}' (relu2)", act);
  c.hidden_act = Activation::kRelu2;
  for (const char* flag : {"mlp_bias", "use_bias"})
    if (f.boolean(flag, false)) fail_load(f.path(), "unsupported: {} = true", flag);
  if (f.string("mamba_hidden_act", "silu") != "silu") fail_load(f.path(), "unsupported mamba_hidden_act (silu)");
  check_time_step_limit(f);
  read_layers(f, c);
  MambaShape& m = c.mamba;
  m.heads = f.integer("mamba_num_heads", 128);
  m.head_dim = f.integer("mamba_head_dim", 64);
  m.groups = f.integer("n_groups", f.integer("mamba_n_groups", 8));
  m.state = f.integer("ssm_state_size", 128);
  m.conv_kernel = f.integer("conv_kernel", f.integer("mamba_d_conv", 4));
  m.conv_bias = f.boolean("use_conv_bias", true);
}

void read_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  if (g.find_int(arch + ".expert_count").value_or(0) > 0)
    fail_load(g.path(), "unsupported: Nemotron-H with experts ({}.expert_count)", arch);
  c.rms_norm_eps = g.find_float(arch + ".attention.layer_norm_rms_epsilon")
                       .value_or(g.find_float(arch + ".attention.layer_norm_epsilon").value_or(1e-5));
  c.layer_rope.assign(static_cast<size_t>(c.num_layers), false);
  c.mlp_gated = false;
  c.hidden_act = Activation::kRelu2;
  read_mamba2_gguf(g, arch, c.mamba);
  const std::string kv_key = arch + ".attention.head_count_kv", ff_key = arch + ".feed_forward_length";
  for (const std::string& key : {kv_key, ff_key}) {
    const GgufValue* v = g.find(key);
    if (v == nullptr || v->type != GgufType::ARRAY || static_cast<int64_t>(g.get_int_array(key).size()) < c.num_layers)
      fail_load(g.path(), "metadata '{}' must list each layer's value (0 where a layer has none)", key);
  }
  const std::vector<int64_t> kv = g.get_int_array(kv_key), ff = g.get_int_array(ff_key);
  c.layer_mixers.assign(static_cast<size_t>(c.num_layers), LayerMixer::kMamba2);
  c.layer_mlp.assign(static_cast<size_t>(c.num_layers), false);
  for (size_t i = 0; i < static_cast<size_t>(c.num_layers); ++i) {
    if (ff[i] > 0) {
      c.layer_mixers[i] = LayerMixer::kNone;
      c.layer_mlp[i] = true;
    } else if (kv[i] > 0) {
      c.layer_mixers[i] = LayerMixer::kAttention;
    }
  }
}

// The MLP layers' norm is their MLP's (ffn_norm); the Mamba2 layers' weights in the graph's forms.
void adapt_weights(ModelWeights& w) {
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (w.config.mixer(i) == LayerMixer::kNone) {
      if (auto it = w.tensors.find(p + "attn_norm"); it != w.tensors.end()) {
        w.tensors[p + "ffn_norm"] = it->second;
        w.tensors.erase(it);
      }
    }
    if (w.config.is_recurrent(i)) adapt_mamba2_weights(w, p);
  }
}

// Every block's one norm is "norm" (attn_norm here, renamed on MLP layers; the ffn_norm row names it for the
// test-model writer); the mixer's weights under "mixer.".
constexpr WeightNameRow kNames[] = {
    {"attn_norm", "norm.weight", "attn_norm.weight"},
    {"ffn_norm", "norm.weight", "attn_norm.weight"},
    {"ssm_in", "mixer.in_proj.weight", "ssm_in.weight"},
    {"ssm_conv", "mixer.conv1d.weight", "ssm_conv1d.weight"},
    {"ssm_conv_bias", "mixer.conv1d.bias", "ssm_conv1d.bias"},
    {"ssm_dt_bias", "mixer.dt_bias", "ssm_dt.bias"},
    {"ssm_a", "mixer.A_log", "ssm_a"},
    {"ssm_d", "mixer.D", "ssm_d"},
    {"ssm_norm_gated", "mixer.norm.weight", "ssm_norm.weight"},
    {"ssm_out", "mixer.out_proj.weight", "ssm_out.weight"},
    {"wq", "mixer.q_proj.weight", "attn_q.weight"},
    {"wk", "mixer.k_proj.weight", "attn_k.weight"},
    {"wv", "mixer.v_proj.weight", "attn_v.weight"},
    {"wo", "mixer.o_proj.weight", "attn_output.weight"},
    {"w_up", "mixer.up_proj.weight", "ffn_up.weight"},
    {"w_down", "mixer.down_proj.weight", "ffn_down.weight"},
    // Only names for the test-model writer, which writes in_proj whole (test_hf_weights).
    {"ssm_in_z", "mixer.in_proj_z.weight", ""},
    {"ssm_in_xbc", "mixer.in_proj_xbc.weight", ""},
    {"ssm_in_dt", "mixer.in_proj_dt.weight", ""},
};
constexpr WeightNameRow kGlobalNames[] = {{"embed", "model.embeddings.weight", "token_embd.weight"},
                                          {"final_norm", "model.norm_f.weight", "output_norm.weight"}};

constexpr HfModelType kTypes[] = {{"nemotron_h", "NemotronHForCausalLM"}};

// The layer kinds of nemotron-nano-9b-v2 (NVIDIA-Nemotron-Nano-9B-v2's hybrid_override_pattern) and tiny-nemotron-h.
std::string pattern(const TestPreset& p) {
  const std::string full = p.tiny ? "M-*M-" : "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-";
  return full.substr(0, static_cast<size_t>(p.layers));
}

nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "NemotronHForCausalLM", "5.25.0");
  j.update({{"attention_bias", false},
            {"chunk_size", 128},
            {"conv_kernel", 4},
            {"head_dim", p.head_size()},
            {"hybrid_override_pattern", pattern(p)},
            {"layer_norm_epsilon", 1e-05},
            {"mamba_head_dim", p.tiny ? 16 : 80},
            {"mamba_hidden_act", "silu"},
            {"mamba_num_heads", p.tiny ? 8 : 128},
            {"mlp_bias", false},
            {"mlp_hidden_act", "relu2"},
            {"n_groups", p.tiny ? 2 : 8},
            {"residual_in_fp32", false},
            {"ssm_state_size", p.tiny ? 16 : 128},
            {"use_bias", false},
            {"use_conv_bias", true}});
  return j;
}

// in_proj whole ([z | x B C | dt]) and the conv kernel as [channels, 1, taps].
void test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    const std::string& n = w.name;
    if (n.ends_with(".mixer.in_proj_xbc.weight") || n.ends_with(".mixer.in_proj_dt.weight")) continue;
    if (n.ends_with(".mixer.in_proj_z.weight"))
      w = {n.substr(0, n.size() - 16) + "in_proj.weight",
           {c.mamba.inner() + c.mamba.conv_channels() + c.mamba.heads, c.hidden_size}};
    if (n.ends_with(".mixer.conv1d.weight")) w.shape = {w.shape[0], 1, w.shape[1]};
    out.push_back(std::move(w));
  }
  weights = std::move(out);
}

// nemotron-nano-9b-v2: NVIDIA-Nemotron-Nano-9B-v2's shape (use --layers for a slice); tiny-nemotron-h: mamba, MLP,
// attention, mamba, MLP, its vocabulary padded to 648 (llama.cpp's converter pads Nemotron-H's to a multiple of 8).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "nemotron-nano-9b-v2", .model_type = "nemotron_h", .tiny = false, .hidden = 4480, .intermediate = 15680,
     .layers = 56, .heads = 40, .kv_heads = 8, .vocab = 131072, .max_position_embeddings = 131072, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 128},
    {.name = "tiny-nemotron-h", .model_type = "nemotron_h", .tiny = true, .hidden = 64, .intermediate = 128,
     .layers = 5, .heads = 4, .kv_heads = 2, .vocab = 648, .max_position_embeddings = 131072, .tied = false,
     .embed_std = 0.08, .weight_std = 0.16, .head_dim = 16},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kNemotronHFamily = {
    .name = "nemotron_h", .hf_model_types = kTypes, .read_hf = read_hf, .gguf_arch = "nemotron_h",
    .read_gguf = read_gguf, .layer_names = kNames, .global_names = kGlobalNames, .build_graph = build_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing Nemotron-H as GGUF is not supported yet"},
    .test_presets = kPresets, .test_config = test_config, .test_hf_weights = test_hf_weights,
    .hf_text_prefix = "backbone.", .adapt_weights = adapt_weights};
// clang-format on

}  // namespace minfer
