// OLMo 2 and OLMo 3: the Llama block with its norms moved after each sub-block (no norm before attention or the
// MLP; each output RMSNorm-ed before its residual add) and q/k norms over the whole projection, not per head. OLMo 3
// adds sliding-window layers (three of every four), which rotate without the model's RoPE scaling (the local table,
// ModelConfig::rope_local_theta). llama.cpp reads both as GGUF architecture olmo2.
//   x += post_attn_norm(o(attention(x)));  x += post_ffn_norm(mlp(x))
#include "model/families/family_file.h"

namespace minfer {
namespace {

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, graph::ValueId x) {
    x = b.add(x, b.rmsnorm(b.attention(i, x), p + "post_attn_norm", p + "attn_out"), p + "x_attn");
    return b.add(x, b.rmsnorm(b.mlp(i, x), p + "post_ffn_norm", p + "ffn_out"), p + "x_out");
  });
}

void set_traits(ModelConfig& c) { c.qk_norm = c.qk_norm_full_width = c.post_norms_only = true; }

// OLMo 3 (model_type olmo3) slides a window (4096 by default) on the layers layer_types marks (by default all but
// every fourth), which rotate with the unscaled RoPE (transformers' Olmo3 gives them rope_type "default").
void read_hf(const HfFields& f, std::string_view model_type, ModelConfig& c) {
  set_traits(c);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-5);  // Olmo2Config's and Olmo3Config's default
  if (model_type != "olmo3") return;
  c.sliding_window = f.integer("sliding_window", 4096);
  read_layer_types(f, c, [](int64_t i) { return (i + 1) % 4 != 0; });
  c.rope_local_theta = c.rope_theta;
}

// OLMo 3 as llama.cpp reads it (src/models/olmo2.cpp): a window when the file has one, on the layers of its pattern
// (an array of flags, or a period whose last layer is global, 4 by default), rotating without the RoPE scaling and
// with rope.freq_base_swa when given (else the model's base).
void read_gguf(const GgufFile& g, const std::string&, ModelConfig& c) {
  set_traits(c);
  c.sliding_window = g.find_int("olmo2.attention.sliding_window").value_or(0);
  if (c.sliding_window <= 0) return;
  c.rope_local_theta = g.find_float("olmo2.rope.freq_base_swa").value_or(c.rope_theta);
  read_window_pattern(g, "olmo2.attention.sliding_window_pattern", 4, c);
}

void write_keys(const ModelConfig& c, const std::string&, GgufWriter& w) {
  if (c.sliding_window <= 0) return;
  write_window_keys(c, "olmo2", w);
  w.set_f32("olmo2.rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
}

// Post-attention and post-FFN norms, named as Gemma's (and no pre-FFN norm).
constexpr WeightNameRow kNames[] = {
    {"post_attn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"post_ffn_norm", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// Olmo2ForCausalLM (allenai/OLMo-2-0425-1B's config.json) and Olmo3ForCausalLM (allenai/Olmo-3-7B's form: a window
// on the layers of layer_types and YaRN on the full ones; tiny-olmo3's original context of 64 makes YaRN bite).
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  const bool olmo3 = std::string_view(p.model_type) == "olmo3";
  nlohmann::json j =
      test_config_base(p, x, olmo3 ? "Olmo3ForCausalLM" : "Olmo2ForCausalLM", olmo3 ? "4.57.0" : "4.48.0");
  j.update({{"attention_bias", false},
            {"hidden_act", "silu"},
            {"pad_token_id", 100277},
            {"rms_norm_eps", 1e-06},
            {"rope_scaling", nullptr},
            {"rope_theta", 500000.0}});
  if (!olmo3) return j;
  j.update({{"layer_types", test_layer_types(p.layers, [&](int64_t i) { return (i + 1) % p.sliding_period != 0; })},
            {"sliding_window", x.window(p)},
            {"rope_scaling",
             {{"attention_factor", 1.2079441541679836},
              {"beta_fast", 32},
              {"beta_slow", 1},
              {"factor", 8.0},
              {"original_max_position_embeddings", p.tiny ? 64 : 8192},
              {"rope_type", "yarn"}}}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"olmo2", "Olmo2ForCausalLM"}, {"olmo3", "Olmo3ForCausalLM"}};

// allenai/OLMo-2-0425-1B (its 100k vocabulary replaced by a generated one of that size), and tiny siblings of it and
// of OLMo 3 (a 512-position window on three of its four layers, and YaRN on the fourth).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "olmo2-1b", .model_type = "olmo2", .tiny = false, .hidden = 2048, .intermediate = 8192, .layers = 16,
     .heads = 16, .kv_heads = 16, .vocab = 100352, .max_position_embeddings = 4096, .tied = false, .embed_std = 0.02,
     .weight_std = 0.02, .bos = 100257, .config_eos = {100257}, .generation_eos = {100257}},
    {.name = "tiny-olmo2", .model_type = "olmo2", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 4096, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16},
    {.name = "tiny-olmo3", .model_type = "olmo3", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 4,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 65536, .tied = false, .embed_std = 0.08,
     .weight_std = 0.12, .sliding_window = 512, .sliding_period = 4},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kOlmo2Family = {
    .name = "olmo2", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "olmo2", .read_gguf = read_gguf,
    .layer_names = kNames, .build_graph = build_graph, .gguf_export = {.arch = "olmo2", .write_keys = write_keys},
    .test_presets = kPresets, .test_config = test_config};
// clang-format on

}  // namespace minfer
