// Granite (3.x dense): the Llama block (model/families/llama.cpp) with four multipliers: the embeddings' and the
// attention scores' (in place of 1/sqrt(head_dim)) are the graph's embedding and score scales; each block output's
// and the logits' divisor are folded into the o / down projections and the final norm at load
// (loaders/output_scales.cpp).
#include "model/families/family_file.h"

namespace minfer {
namespace {

// GraniteConfig's defaults are 1.
void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(f.number("embedding_multiplier", 1.0));
  c.attention_scale = f.number("attention_multiplier", 1.0);
  c.residual_multiplier = f.number("residual_multiplier", 1.0);
  c.logits_scaling = f.number("logits_scaling", 1.0);
}

// llama.cpp's keys (src/models/granite.cpp): an attention scale of 0 or none means 1/sqrt(head_dim).
void read_gguf(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(g.find_float(a + ".embedding_scale").value_or(0.0));
  c.attention_scale = g.find_float(a + ".attention.scale").value_or(0.0);
  c.residual_multiplier = g.find_float(a + ".residual_scale").value_or(1.0);
  c.logits_scaling = g.get_float(a + ".logit_scale");
}

// The export writes the loaded weights, into which the residual and logit multipliers are folded already: the file
// says 1 for both.
void write_keys(const ModelConfig& c, const std::string&, GgufWriter& w) {
  w.set_f32("granite.embedding_scale", c.embedding_scale);
  w.set_f32("granite.attention.scale", static_cast<float>(c.attention_score_scale()));
  w.set_f32("granite.residual_scale", 1.0f);
  w.set_f32("granite.logit_scale", 1.0f);
}

// GraniteForCausalLM (ibm-granite/granite-3.3-2b-instruct's config.json: Llama's with four multipliers; tiny-granite
// scales its scores by 0.1, not 1/sqrt(16), so a missed multiplier shows). Granite states no head_dim.
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "GraniteForCausalLM", "4.49.0");
  j.update({{"attention_bias", false},
            {"attention_multiplier", p.tiny ? 0.1 : 0.015625},
            {"embedding_multiplier", 12.0},
            {"hidden_act", "silu"},
            {"logits_scaling", 8.0},
            {"mlp_bias", false},
            {"pretraining_tp", 1},
            {"residual_multiplier", 0.22},
            {"rms_norm_eps", 1e-05},
            {"rope_scaling", nullptr},
            {"rope_theta", 10000000.0}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"granite", "GraniteForCausalLM"}};

// ibm-granite/granite-3.3-2b-instruct (its 49k vocabulary replaced by a generated one of that size) and a tiny
// sibling (embed_std 0.01: its embeddings are multiplied by 12).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "granite-3.3-2b", .model_type = "granite", .tiny = false, .hidden = 2048, .intermediate = 8192,
     .layers = 40, .heads = 32, .kv_heads = 8, .vocab = 49159, .max_position_embeddings = 131072, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .bos = 0, .config_eos = {0}, .generation_eos = {0}},
    {.name = "tiny-granite", .model_type = "granite", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 131072, .tied = true, .embed_std = 0.01,
     .weight_std = 0.16},
};
// clang-format on

}  // namespace

// GGUF q/k rows interleaved: written by llama.cpp's LlamaModel converter.
// clang-format off
extern const Family kGraniteFamily = {
    .name = "granite", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "granite",
    .gguf_rope_style = kernels::RopeStyle::kInterleaved, .read_gguf = read_gguf, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "granite", .interleave_qk = true, .write_keys = write_keys}, .test_presets = kPresets,
    .test_config = test_config};
// clang-format on

}  // namespace minfer
