// Gemma 2 and Gemma 3 (text): the Llama block with sandwich norms (each sub-block's output RMSNorm-ed before its
// residual add), a GELU(tanh) MLP, embeddings scaled by sqrt(hidden), and local sliding-window layers between global
// ones (DecoderBuilder::attention picks the window, and Gemma 3's local RoPE base, per layer).
//   x += post_attn_norm(o(attention(attn_norm(x))));  x += post_ffn_norm(mlp(ffn_norm(x)))
// What differs between the two comes from the config: Gemma 3's per-head q/k norms, Gemma 2's soft-capping of scores
// and logits (in the attention leaves and the head). The (1 + w) of Gemma's RMSNorm is in the loaded weights already
// (ModelConfig::norm_weight_plus_one: GGUF files store 1 + w, the HF loader adds the 1 once).
#include <cmath>

#include "model/families/family_file.h"
#include "tokenizer/chat_template.h"

namespace minfer {
namespace {

graph::Graph build_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, graph::ValueId x) {
    const graph::ValueId attn = b.attention(i, b.rmsnorm(x, p + "attn_norm", p + "attn_in"));
    x = b.add(x, b.rmsnorm(attn, p + "post_attn_norm", p + "attn_out"), p + "x_attn");
    const graph::ValueId mlp = b.gated_mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in"));
    return b.add(x, b.rmsnorm(mlp, p + "post_ffn_norm", p + "ffn_out"), p + "x_out");
  });
}

// What Gemma 2 and Gemma 3 share in config.json: GELU(tanh) MLP, sandwich norms with (1 + w) weights, sqrt(hidden)
// embedding scale, query_pre_attn_scalar, tied embeddings by default.
void read_gemma_hf(const HfFields& f, ModelConfig& c) {
  c.hidden_act = Activation::kGeluTanh;
  if (const std::string act = f.string("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh")
    fail_load(f.path(), "unsupported hidden_activation '{}' (supported: gelu_pytorch_tanh)", act);
  if (f.boolean("use_bidirectional_attention", false))
    fail_load(f.path(), "unsupported: use_bidirectional_attention = true (an encoder; minfer runs causal decoders)");
  c.sandwich_norms = true;
  c.norm_weight_plus_one = true;
  c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  c.attention_scale = 1.0 / std::sqrt(f.number("query_pre_attn_scalar", static_cast<double>(c.head_dim)));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
}

// Gemma 2: soft-capping of scores and logits (Gemma2Config's defaults 50 and 30 when absent, none when null), a
// 4096-position window on every other layer from the first (layer_types when given), one RoPE base for all layers.
void read_gemma2_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  read_gemma_hf(f, c);
  c.attn_softcap = f.number_or_none("attn_logit_softcapping", 50.0);
  c.final_softcap = f.number_or_none("final_logit_softcapping", 30.0);
  c.sliding_window = f.integer("sliding_window", 4096);
  read_layer_types(f, c, [](int64_t i) { return i % 2 == 0; });
}

// Gemma 3: q/k norms, optional soft-capping, local layers with their own RoPE base (rope_local_base_freq, or
// transformers 5's rope_parameters per layer type); every pattern-th layer global in older configs.
void read_gemma3_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  read_gemma_hf(f, c);
  c.qk_norm = true;
  c.attn_softcap = f.number("attn_logit_softcapping", 0.0);
  c.final_softcap = f.number("final_logit_softcapping", 0.0);
  c.sliding_window = f.integer("sliding_window", 0);
  c.rope_local_theta = f.number("rope_local_base_freq", 10000.0);
  const int64_t pattern = f.integer("sliding_window_pattern", f.integer("_sliding_window_pattern", 6));
  read_layer_types(f, c, [&](int64_t i) { return pattern <= 0 || (i + 1) % pattern != 0; });
  const nlohmann::json* params = f.get("rope_parameters");
  if (params == nullptr) return;
  if (!params->is_object()) fail_load(f.path(), "field \"rope_parameters\" must be an object, got {}", params->dump());
  const HfFields p(*params, f.path());
  if (const nlohmann::json* full = p.get("full_attention")) {
    c.rope_theta = HfFields(*full, f.path()).number("rope_theta", c.rope_theta);
    c.rope_scaling = parse_rope_scaling(full, f.path());
  }
  if (const nlohmann::json* local = p.get("sliding_attention")) {
    const HfFields l(*local, f.path());
    if (const std::string t = l.string("rope_type", "default"); t != "default")
      fail_load(f.path(), "unsupported rope_parameters.sliding_attention.rope_type '{}' (supported: default)", t);
    c.rope_local_theta = l.number("rope_theta", c.rope_local_theta);
  }
}

// llama.cpp's attention scale for Gemma (src/llama-model.cpp): 1/sqrt(head_dim), except for the 27B models (46 and
// 62 layers), which scale by 1/sqrt(hidden / heads), as their query_pre_attn_scalar says.
double llamacpp_attention_scale(const ModelConfig& c, bool gemma2) {
  const bool is_27b = c.num_layers == (gemma2 ? 46 : 62);
  return 1.0 / std::sqrt(static_cast<double>(is_27b ? c.hidden_size / c.num_heads : c.head_dim));
}

// Gemma 2 and Gemma 3 as llama.cpp reads them (src/models/gemma2.cpp, gemma3.cpp): norms stored as 1 + w already,
// the window and its layer pattern (an array of per-layer flags, or a period whose last layer is global: 2 for
// Gemma 2, 6 for Gemma 3). Gemma 2 always soft-caps (50 and 30 unless the file says otherwise) and has a
// 4096-position window by default; Gemma 3 soft-caps logits when the file says so and rotates its local layers with
// their own base (10000 by default).
void read_gguf(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const bool gemma2 = a == "gemma2";
  c.hidden_act = Activation::kGeluTanh;
  c.qk_norm = !gemma2;
  c.sandwich_norms = true;
  c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  c.attention_scale = llamacpp_attention_scale(c, gemma2);
  c.attn_softcap = gemma2 ? g.find_float(a + ".attn_logit_softcapping").value_or(50.0) : 0.0;
  c.final_softcap = g.find_float(a + ".final_logit_softcapping").value_or(gemma2 ? 30.0 : 0.0);
  c.sliding_window = g.find_int(a + ".attention.sliding_window").value_or(gemma2 ? 4096 : 0);
  if (c.sliding_window <= 0) return;
  if (!gemma2) c.rope_local_theta = g.find_float(a + ".rope.freq_base_swa").value_or(10000.0);
  read_window_pattern(g, a + ".attention.sliding_window_pattern", gemma2 ? 2 : 6, c);
}

// The keys read back above; refused where llama.cpp (src/models/gemma2.cpp, gemma3.cpp) would compute something
// else: an attention scale other than its rule's, Gemma 2 without soft-capped scores, Gemma 3 with them.
void write_keys(const ModelConfig& c, const std::string& path, GgufWriter& w) {
  const bool gemma2 = c.arch == "gemma2";
  const std::string a = c.arch;
  if (std::abs(c.attention_score_scale() / llamacpp_attention_scale(c, gemma2) - 1.0) > 1e-6)
    fail_load(path,
              "cannot write {} as GGUF: query_pre_attn_scalar gives an attention scale of {}, and llama.cpp's {} "
              "fixes it at {}",
              a, c.attention_score_scale(), a, llamacpp_attention_scale(c, gemma2));
  if ((c.attn_softcap > 0) != gemma2)
    fail_load(path, "cannot write {} as GGUF: llama.cpp's {} {} attention scores (attn_logit_softcapping)", a, a,
              gemma2 ? "always soft-caps" : "never soft-caps");
  if (gemma2) w.set_f32(a + ".attn_logit_softcapping", static_cast<float>(c.attn_softcap));
  w.set_f32(a + ".final_logit_softcapping", static_cast<float>(c.final_softcap));
  if (c.sliding_window <= 0) return;
  write_window_keys(c, a, w);
  if (!gemma2) w.set_f32(a + ".rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
}

// Post-attention and pre/post-FFN norms (HF's post_attention_layernorm is their post-attention norm, not the pre-FFN
// one).
constexpr WeightNameRow kNames[] = {
    {"post_attn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"ffn_norm", "pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_ffn_norm", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

nlohmann::json gemma_config(const TestPreset& p, const TestConfigContext& x, const char* hf_class,
                            const char* version) {
  nlohmann::json j = test_config_base(p, x, hf_class, version);
  j.update({{"attention_bias", false},
            {"head_dim", p.head_size()},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"pad_token_id", 0},
            {"query_pre_attn_scalar", p.tiny ? 24 : p.head_size()},
            {"rms_norm_eps", 1e-06},
            {"sliding_window", x.window(p)}});
  return j;
}

// Gemma3ForCausalLM (google/gemma-3-270m's config.json; tiny-gemma3 scales by a query_pre_attn_scalar that is not
// head_dim, so a wrong scale shows).
nlohmann::json gemma3_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = gemma_config(p, x, "Gemma3ForCausalLM", "4.55.0.dev0");
  j.update({{"attn_logit_softcapping", nullptr},
            {"final_logit_softcapping", nullptr},
            {"layer_types", test_layer_types(p.layers, [&](int64_t i) { return (i + 1) % p.sliding_period != 0; })},
            {"rope_local_base_freq", 10000.0},
            {"rope_scaling", nullptr},
            {"rope_theta", 1000000.0},
            {"use_bidirectional_attention", false}});
  return j;
}

// Gemma2ForCausalLM (google/gemma-2-2b's config.json: no layer_types, so the alternation is the reader's rule).
// tiny-gemma2 scales by a query_pre_attn_scalar that is not head_dim and soft-caps at 5 (scores) and 4 (logits), low
// enough to bend its small values, so a missing or misplaced cap shows.
nlohmann::json gemma2_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = gemma_config(p, x, "Gemma2ForCausalLM", "4.42.4");
  j.erase("tie_word_embeddings");  // tied by Gemma2Config's default
  j.update({{"attn_logit_softcapping", p.tiny ? 5.0 : 50.0},
            {"cache_implementation", "hybrid"},
            {"final_logit_softcapping", p.tiny ? 4.0 : 30.0},
            {"hidden_act", "gelu_pytorch_tanh"},
            {"rope_theta", 10000.0}});
  return j;
}

constexpr HfModelType kGemma2Types[] = {{"gemma2", "Gemma2ForCausalLM"}};
// Gemma3ForConditionalGeneration: its text model, and its SigLIP tower and projector (vision/vision_model.h).
constexpr HfModelType kGemma3Types[] = {{"gemma3_text", "Gemma3ForCausalLM"},
                                        {"gemma3", "Gemma3ForConditionalGeneration"}};

// The real shapes' 262k / 256k SentencePiece vocabularies replaced by generated ones of that size. tiny-gemma3 has a
// global layer after two local ones; tiny-gemma2's head_dim is not hidden / heads, as the 2B's is not.
// clang-format off
const TestPreset kGemma3Presets[] = {
    {.name = "gemma3-270m", .model_type = "gemma3_text", .tiny = false, .hidden = 640, .intermediate = 2048,
     .layers = 18, .heads = 4, .kv_heads = 1, .vocab = 262144, .max_position_embeddings = 32768, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 256, .sliding_window = 512, .sliding_period = 6, .bos = 2,
     .config_eos = {1}, .generation_eos = {1, 106}},
    {.name = "tiny-gemma3", .model_type = "gemma3_text", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 3,
     .heads = 4, .kv_heads = 1, .vocab = 0, .max_position_embeddings = 32768, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .head_dim = 32, .sliding_window = 512, .sliding_period = 3},
};

const TestPreset kGemma2Presets[] = {
    {.name = "gemma2-2b", .model_type = "gemma2", .tiny = false, .hidden = 2304, .intermediate = 9216, .layers = 26,
     .heads = 8, .kv_heads = 4, .vocab = 256000, .max_position_embeddings = 8192, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .head_dim = 256, .sliding_window = 4096, .sliding_period = 2, .bos = 2, .config_eos = {1},
     .generation_eos = {1, 107}},
    {.name = "tiny-gemma2", .model_type = "gemma2", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 3,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 8192, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .head_dim = 32, .sliding_window = 512, .sliding_period = 2},
};
// clang-format on

}  // namespace

// Files without a chat template get Gemma 3's, whose turns are Gemma 2's.
// clang-format off
extern const Family kGemma2Family = {
    .name = "gemma2", .hf_model_types = kGemma2Types, .read_hf = read_gemma2_hf, .gguf_arch = "gemma2",
    .read_gguf = read_gguf, .layer_names = kNames, .build_graph = build_graph,
    .gguf_export = {.arch = "gemma2", .write_keys = write_keys},
    .fallback_chat_template = kGemma3ChatTemplate, .test_presets = kGemma2Presets, .test_config = gemma2_config};
// clang-format on

// clang-format off
extern const Family kGemma3Family = {
    .name = "gemma3", .hf_model_types = kGemma3Types, .read_hf = read_gemma3_hf, .gguf_arch = "gemma3",
    .read_gguf = read_gguf, .layer_names = kNames, .build_graph = build_graph,
    .gguf_export = {.arch = "gemma3", .write_keys = write_keys},
    .fallback_chat_template = kGemma3ChatTemplate, .test_presets = kGemma3Presets, .test_config = gemma3_config};
// clang-format on

}  // namespace minfer
