// OpenAI's gpt-oss: the Llama block (model/families/llama.cpp) with q/k/v/o biases, per-head attention sinks, a
// 128-position window on every other layer, YaRN, and a mixture of experts on every layer whose router and experts
// have biases and whose experts gate with the clamped SwiGLU. The experts arrive stacked (HF: transposed, gate and up
// interleaved, or as MXFP4 blocks in OpenAI's own checkpoints; GGUF: Qwen3-MoE's form plus biases) and are split at
// load (loaders/gpt_oss_experts.cpp).
#include <cmath>

#include "model/families/family_file.h"

namespace minfer {
namespace {

void set_traits(ModelConfig& c) {
  c.attention_bias = c.o_bias = c.attention_sinks = true;
  c.norm_topk_prob = c.moe_bias = c.moe_swiglu_oai = true;
}

// transformers' GptOssConfig and modelling: layer_types (by default every other layer from the first slides), YaRN
// (the class default when the config has no rope_scaling), num_local_experts experts of intermediate_size gated by
// the clamped SwiGLU (limit 7, alpha 1.702, fixed in the modelling code) and weighted by a softmax over the chosen
// experts' logits (the same numbers as the renormalised top-k of a full softmax).
void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  set_traits(c);
  c.num_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 4);
  c.moe_intermediate_size = c.intermediate_size;
  if (const double limit = f.number("swiglu_limit", 7.0); limit != 7.0)
    fail_load(f.path(), "unsupported swiglu_limit {} (gpt-oss's experts clamp at 7)", limit);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-5);
  c.sliding_window = f.integer("sliding_window", 128);
  read_layer_types(f, c, [](int64_t i) { return i % 2 == 0; });
  if (f.get("rope_scaling") != nullptr) return;
  RopeScaling& s = c.rope_scaling;
  s.type = "yarn";
  s.factor = 32.0;
  s.truncate = false;
  s.original_max_position_embeddings = 4096;
  s.attention_factor = 0.1 * std::log(s.factor) + 1.0;
}

// As llama.cpp reads it (src/models/openai-moe.cpp): a window on every other layer from the first (pattern 2) and the
// model's one RoPE (YaRN-scaled) on every layer.
void read_gguf(const GgufFile& g, const std::string&, ModelConfig& c) {
  set_traits(c);
  c.sliding_window = g.get_int("gpt-oss.attention.sliding_window");
  read_window_pattern(g, "gpt-oss.attention.sliding_window_pattern", 2, c);
  if (const auto swa_base = g.find_float("gpt-oss.rope.freq_base_swa"); swa_base && *swa_base != c.rope_theta)
    fail_load(g.path(), "unsupported: gpt-oss.rope.freq_base_swa ({}) differs from the RoPE base ({})", *swa_base,
              c.rope_theta);
}

// The window and the layers it slides on (llama.cpp's gpt-oss reads both); experts, sinks and biases are the
// exporter's (stacked as llama.cpp's converter stacks them).
void write_keys(const ModelConfig& c, const std::string&, GgufWriter& w) { write_window_keys(c, "gpt-oss", w); }

// HF's post_attention_layernorm is the pre-FFN norm (GGUF calls it post_attention_norm); per-head sinks; a router
// with a bias; experts with biases. The stacked forms have canonical names of their own (experts.gate_up_proj, ...)
// that the loader splits; the per-expert rows' HF names are the stacked tensors they come from (for error messages).
constexpr WeightNameRow kNames[] = {
    {"ffn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"sinks", "self_attn.sinks", "attn_sinks.weight"},
    {"router", "mlp.router.weight", "ffn_gate_inp.weight"},
    {"router_bias", "mlp.router.bias", "ffn_gate_inp.bias"},
    {"experts.gate_up_proj", "mlp.experts.gate_up_proj", ""},
    {"experts.gate_up_proj_bias", "mlp.experts.gate_up_proj_bias", ""},
    {"experts.down_proj", "mlp.experts.down_proj", ""},
    {"experts.gate_up_proj_blocks", "mlp.experts.gate_up_proj_blocks", ""},
    {"experts.gate_up_proj_scales", "mlp.experts.gate_up_proj_scales", ""},
    {"experts.down_proj_blocks", "mlp.experts.down_proj_blocks", ""},
    {"experts.down_proj_scales", "mlp.experts.down_proj_scales", ""},
    {"experts.w_gate", "mlp.experts.gate_up_proj", "ffn_gate_exps.weight"},
    {"experts.w_up", "mlp.experts.gate_up_proj", "ffn_up_exps.weight"},
    {"experts.w_down", "mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"experts.b_gate", "mlp.experts.gate_up_proj_bias", "ffn_gate_exps.bias"},
    {"experts.b_up", "mlp.experts.gate_up_proj_bias", "ffn_up_exps.bias"},
    {"experts.b_down", "mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
};

// The checkpoint's stacked experts (transposed, gate and up interleaved column by column) in place of each expert's
// matrices and biases, after each layer's router bias.
void test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  const int64_t ne = c.num_experts, ff = c.moe_intermediate_size, hidden = c.hidden_size;
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    if (w.name.find(".mlp.experts.") != std::string::npos) continue;
    const bool router_bias = w.name.ends_with(".mlp.router.bias");
    out.push_back(std::move(w));
    if (!router_bias) continue;
    const std::string x = out.back().name.substr(0, out.back().name.size() - 11) + "experts.";
    out.push_back({x + "gate_up_proj", {ne, hidden, 2 * ff}});
    out.push_back({x + "gate_up_proj_bias", {ne, 2 * ff}});
    out.push_back({x + "down_proj", {ne, ff, hidden}});
    out.push_back({x + "down_proj_bias", {ne, hidden}});
  }
  weights = std::move(out);
}

// GptOssForCausalLM (openai/gpt-oss-20b's config.json without its MXFP4 quantization_config: the weights written are
// bf16 or f32).
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "GptOssForCausalLM", "4.55.0.dev0");
  j.erase("bos_token_id");
  j.update({{"attention_bias", true},
            {"experts_per_token", p.experts_per_tok},
            {"head_dim", p.head_size()},
            {"hidden_act", "silu"},
            {"initial_context_length", 4096},
            {"intermediate_size", p.moe_intermediate},
            {"layer_types", test_layer_types(p.layers, [](int64_t i) { return i % 2 == 0; })},
            {"num_experts_per_tok", p.experts_per_tok},
            {"num_local_experts", p.experts},
            {"output_router_logits", false},
            {"rms_norm_eps", 1e-05},
            {"rope_scaling",
             {{"beta_fast", 32.0},
              {"beta_slow", 1.0},
              {"factor", 32.0},
              {"original_max_position_embeddings", 4096},
              {"rope_type", "yarn"},
              {"truncate", false}}},
            {"rope_theta", 150000},
            {"router_aux_loss_coef", 0.9},
            {"sliding_window", x.window(p)},
            {"swiglu_limit", 7.0}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"gpt_oss", "GptOssForCausalLM"}};

// openai/gpt-oss-20b (its o200k vocabulary replaced by a generated one of that size; experts stored in bf16 as the
// dequantized checkpoints are, not MXFP4) and a tiny sibling whose q width (4 x 32) is not hidden and whose experts
// are narrower than hidden (32: whole MXFP4 blocks, as gpt-oss's 2880 are).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "gpt-oss-20b", .model_type = "gpt_oss", .tiny = false, .hidden = 2880, .intermediate = 2880,
     .layers = 24, .heads = 64, .kv_heads = 8, .vocab = 201088, .max_position_embeddings = 131072, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 64, .sliding_window = 128, .sliding_period = 2, .experts = 32,
     .experts_per_tok = 4, .moe_intermediate = 2880, .bos = 151643, .config_eos = {151643},
     .generation_eos = {151643}, .qwen_tokenizer = true},
    {.name = "tiny-gpt-oss", .model_type = "gpt_oss", .tiny = true, .hidden = 64, .intermediate = 32, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 131072, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16, .head_dim = 32, .sliding_window = 128, .sliding_period = 2, .experts = 8,
     .experts_per_tok = 2, .moe_intermediate = 32, .qwen_tokenizer = true},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kGptOssFamily = {
    .name = "gpt-oss", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "gpt-oss", .read_gguf = read_gguf,
    .layer_names = kNames, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "gpt-oss", .yarn_as_llamacpp = true, .write_keys = write_keys}, .test_presets = kPresets,
    .test_config = test_config, .test_hf_weights = test_hf_weights};
// clang-format on

}  // namespace minfer
