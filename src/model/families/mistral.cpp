// Mistral (a sliding window on every layer when configured) and Mixtral (Mistral's block with a mixture of experts:
// a softmax router picks num_experts_per_tok of num_local_experts MLPs, renormalised over the chosen ones). Both are
// the Llama block (model/families/llama.cpp); llama.cpp's converter writes both as GGUF architecture llama, whose
// reader (kLlamaFamily) tells Mixtral by its expert count.
#include <spdlog/spdlog.h>

#include "model/families/family_file.h"

namespace minfer {
namespace {

void read_mistral_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.sliding_window = f.integer("sliding_window", 0);
}

// Mixtral always renormalises over its chosen experts; the router's aux-loss fields only matter for training.
void read_mixtral_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.num_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  c.sliding_window = f.integer("sliding_window", 0);
}

// llama.cpp's llama architecture has no window: its converter drops Mistral's, and so does this export (the same
// numbers for prompts within the window), saying so.
void write_llama_keys(const ModelConfig& c, const std::string& path, GgufWriter&) {
  if (c.sliding_window > 0 && c.sliding_window < c.max_position_embeddings)
    spdlog::warn(
        "{}: the {}-token sliding window is not part of GGUF's llama architecture; written without it, as "
        "llama.cpp's converter does (the same results within the window)",
        path, c.sliding_window);
}

// MistralForCausalLM (mistralai/Mistral-7B-v0.1's config.json).
nlohmann::json mistral_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "MistralForCausalLM", "4.34.0.dev0");
  j.erase("attention_dropout");  // Mistral-7B-v0.1's config has none
  j.update({{"hidden_act", "silu"}, {"rms_norm_eps", 1e-05}, {"rope_theta", 10000.0}, {"sliding_window", x.window(p)}});
  return j;
}

// MixtralForCausalLM (mistralai/Mixtral-8x7B-v0.1's config.json): Mistral's block with 8 experts, top-2, no window.
nlohmann::json mixtral_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = mistral_config(p, x);
  j.update({{"architectures", {"MixtralForCausalLM"}},
            {"num_experts_per_tok", p.experts_per_tok},
            {"num_local_experts", p.experts},
            {"output_router_logits", false},
            {"rope_theta", 1000000.0},
            {"router_aux_loss_coef", 0.02},
            {"sliding_window", nullptr}});
  return j;
}

constexpr HfModelType kMistralTypes[] = {{"mistral", "MistralForCausalLM"}};
constexpr HfModelType kMixtralTypes[] = {{"mixtral", "MixtralForCausalLM"}};

constexpr WeightNameRow kMixtralNames[] = {
    {"router", "block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "", "ffn_down_exps.weight"},
};
constexpr HfExpertNames kMixtralExperts = {"block_sparse_moe.experts.", "w1.weight", "w3.weight", "w2.weight"};

// Their 32k SentencePiece vocabularies replaced by generated ones of that size.
// clang-format off
const TestPreset kMistralPresets[] = {
    {.name = "mistral-7b", .model_type = "mistral", .tiny = false, .hidden = 4096, .intermediate = 14336,
     .layers = 32, .heads = 32, .kv_heads = 8, .vocab = 32000, .max_position_embeddings = 32768, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .sliding_window = 4096, .bos = 1, .config_eos = {2},
     .generation_eos = {2}},
    {.name = "tiny-mistral", .model_type = "mistral", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 3,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 32768, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16, .sliding_window = 4096},
};

const TestPreset kMixtralPresets[] = {
    {.name = "mixtral-8x7b", .model_type = "mixtral", .tiny = false, .hidden = 4096, .intermediate = 14336,
     .layers = 32, .heads = 32, .kv_heads = 8, .vocab = 32000, .max_position_embeddings = 32768, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .experts = 8, .experts_per_tok = 2, .moe_intermediate = 14336, .bos = 1,
     .config_eos = {2}, .generation_eos = {2}},
    {.name = "tiny-mixtral", .model_type = "mixtral", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 32768, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16, .experts = 4, .experts_per_tok = 2, .moe_intermediate = 128},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kMistralFamily = {
    .name = "mistral", .hf_model_types = kMistralTypes, .read_hf = read_mistral_hf, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "llama", .interleave_qk = true, .write_keys = write_llama_keys},
    .test_presets = kMistralPresets, .test_config = mistral_config};
// clang-format on

// clang-format off
extern const Family kMixtralFamily = {
    .name = "mixtral", .hf_model_types = kMixtralTypes, .read_hf = read_mixtral_hf, .layer_names = kMixtralNames,
    .hf_experts = &kMixtralExperts, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "llama", .interleave_qk = true, .write_keys = write_llama_keys},
    .test_presets = kMixtralPresets, .test_config = mixtral_config};
// clang-format on

}  // namespace minfer
