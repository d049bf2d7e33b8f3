// Llama 2 / 3 (and llama2.c's checkpoints), and the Llama block most families share: Mistral, Mixtral, Phi-3, Qwen2,
// Qwen3, Qwen3-MoE, SmolLM3, Granite and gpt-oss build it with their config's traits (q/k/v biases, per-head q/k
// norms, windows, NoPE layers as the identity RoPE table, multipliers, sinks, experts: DecoderBuilder reads them):
//   x += o(attention(rmsnorm(x)));  x += mlp(rmsnorm(x))
// Unfused, 16 primitive ops a layer (18 with q/k norms), then the final norm and lm_head on the sampled rows.
#include "model/families/family_file.h"

namespace minfer {

graph::Graph build_llama_graph(const ModelWeights& weights) {
  return DecoderBuilder::build(weights, [](DecoderBuilder& b, int64_t i, const std::string& p, graph::ValueId x) {
    x = b.add(x, b.attention(i, b.rmsnorm(x, p + "attn_norm", p + "attn_in")), p + "x_attn");
    return b.add(x, b.mlp(i, b.rmsnorm(x, p + "ffn_norm", p + "ffn_in")), p + "x_out");
  });
}

namespace {

void read_hf(const HfFields& f, std::string_view, ModelConfig&) {
  if (f.get("sliding_window") != nullptr)
    fail_load(f.path(), "unsupported: sliding_window on a llama model (LlamaForCausalLM has no sliding window)");
}

// llama.cpp's converter writes Mixtral as llama with an expert count.
void read_gguf(const GgufFile&, const std::string&, ModelConfig& c) {
  if (c.num_experts > 0) c.arch = "mixtral";
}

// LlamaForCausalLM (meta-llama/Llama-3.2-1B's config.json: Llama 3 RoPE scaling).
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "LlamaForCausalLM", "4.45.0.dev0");
  j.update({{"attention_bias", false},
            {"head_dim", p.hidden / p.heads},
            {"hidden_act", "silu"},
            {"mlp_bias", false},
            {"pretraining_tp", 1},
            {"rms_norm_eps", 1e-05},
            {"rope_scaling",
             {{"factor", 32.0},
              {"high_freq_factor", 4.0},
              {"low_freq_factor", 1.0},
              {"original_max_position_embeddings", 8192},
              {"rope_type", "llama3"}}},
            {"rope_theta", 500000.0}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"llama", "LlamaForCausalLM"}};

// clang-format off
const TestPreset kPresets[] = {
    {.name = "llama-3.2-1b", .model_type = "llama", .tiny = false, .hidden = 2048, .intermediate = 8192, .layers = 16,
     .heads = 32, .kv_heads = 8, .vocab = 128256, .max_position_embeddings = 131072, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .bos = 128000, .config_eos = {128001}, .generation_eos = {128001}},
    {.name = "tiny-llama", .model_type = "llama", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 3,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 131072, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16},
};
// clang-format on

}  // namespace

// GGUF q/k rows interleaved: llama.cpp's converter permutes HF's.
// clang-format off
extern const Family kLlamaFamily = {
    .name = "llama", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "llama",
    .gguf_rope_style = kernels::RopeStyle::kInterleaved, .read_gguf = read_gguf, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "llama", .interleave_qk = true}, .test_presets = kPresets, .test_config = test_config};
// clang-format on

}  // namespace minfer
