// Qwen2 / Qwen2.5: the Llama block (model/families/llama.cpp) with q/k/v biases always, and, with
// use_sliding_window, a window on the layers from max_window_layers on.
#include "model/families/family_file.h"

namespace minfer {
namespace {

void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.attention_bias = true;
  read_qwen_window(f, c);
}

void read_gguf(const GgufFile&, const std::string&, ModelConfig& c) { c.attention_bias = true; }

// Qwen2ForCausalLM (Qwen/Qwen2.5-0.5B's config.json).
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "Qwen2ForCausalLM", "4.40.1");
  j.update({{"hidden_act", "silu"},
            {"max_window_layers", p.max_window_layers},
            {"rms_norm_eps", 1e-06},
            {"rope_theta", 1000000.0},
            {"sliding_window", p.max_position_embeddings},
            {"use_mrope", false},
            {"use_sliding_window", false}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"qwen2", "Qwen2ForCausalLM"}};

// clang-format off
const TestPreset kPresets[] = {
    {.name = "qwen2.5-0.5b", .model_type = "qwen2", .tiny = false, .hidden = 896, .intermediate = 4864, .layers = 24,
     .heads = 14, .kv_heads = 2, .vocab = 151936, .max_position_embeddings = 32768, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .max_window_layers = 24, .bos = 151643, .config_eos = {151643}, .generation_eos = {151643},
     .qwen_tokenizer = true},
    {.name = "qwen2.5-1.5b", .model_type = "qwen2", .tiny = false, .hidden = 1536, .intermediate = 8960, .layers = 28,
     .heads = 12, .kv_heads = 2, .vocab = 151936, .max_position_embeddings = 131072, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .max_window_layers = 28, .bos = 151643, .config_eos = {151643}, .generation_eos = {151643},
     .qwen_tokenizer = true},
    {.name = "tiny-qwen2", .model_type = "qwen2", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 32768, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .max_window_layers = 2, .qwen_tokenizer = true},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kQwen2Family = {
    .name = "qwen2", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "qwen2", .read_gguf = read_gguf,
    .build_graph = build_llama_graph, .gguf_export = {.arch = "qwen2"}, .test_presets = kPresets,
    .test_config = test_config};
// clang-format on

}  // namespace minfer
