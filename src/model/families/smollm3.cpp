// SmolLM3: the Llama block (model/families/llama.cpp) whose layers marked 0 in no_rope_layers attend without
// positional encoding (NoPE: their rotation is the identity table, ModelConfig::rope_table).
#include "model/families/family_file.h"

namespace minfer {
namespace {

// no_rope_layers (1 = RoPE, 0 = NoPE) or, without the list, every no_rope_layer_interval-th layer NoPE
// (transformers' default rule, interval 4).
void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  read_qwen_window(f, c);
  if (const nlohmann::json* list = f.get("no_rope_layers")) {
    if (!list->is_array()) fail_load(f.path(), "field \"no_rope_layers\" must be a list of 0/1, got {}", list->dump());
    for (const nlohmann::json& x : *list) {
      if (x != 0 && x != 1)
        fail_load(f.path(), "field \"no_rope_layers\" must hold 0 or 1 per layer, got {}", x.dump());
      c.layer_rope.push_back(x == 1);
    }
    return;
  }
  const int64_t interval = f.integer("no_rope_layer_interval", 4);
  if (interval <= 0) fail_load(f.path(), "field \"no_rope_layer_interval\" must be positive, got {}", interval);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_rope.push_back((i + 1) % interval != 0);
}

// llama.cpp has no key for the NoPE layers; every fourth has none (n_no_rope_layer_step = 4).
bool llamacpp_uses_rope(int64_t layer) { return (layer + 1) % 4 != 0; }

void read_gguf(const GgufFile&, const std::string&, ModelConfig& c) {
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_rope.push_back(llamacpp_uses_rope(i));
}

void write_keys(const ModelConfig& c, const std::string& path, GgufWriter&) {
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (c.uses_rope(i) != llamacpp_uses_rope(i))
      fail_load(path,
                "cannot write smollm3 as GGUF: layer {} {} RoPE, and llama.cpp's smollm3 rotates all but every "
                "fourth layer (no_rope_layers)",
                i, c.uses_rope(i) ? "uses" : "skips");
  if (c.sliding_window > 0)
    fail_load(path, "cannot write smollm3 as GGUF: llama.cpp's smollm3 has no sliding window (use_sliding_window)");
}

// SmolLM3ForCausalLM (HuggingFaceTB/SmolLM3-3B's config.json): Llama's with no_rope_layers and no Llama 3 RoPE
// scaling.
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json no_rope = nlohmann::json::array();
  for (int64_t i = 0; i < p.layers; ++i) no_rope.push_back((i + 1) % p.no_rope_interval != 0 ? 1 : 0);
  nlohmann::json j = test_config_base(p, x, "SmolLM3ForCausalLM", "4.53.0.dev0");
  j.update({{"attention_bias", false},
            {"head_dim", p.hidden / p.heads},
            {"hidden_act", "silu"},
            {"layer_types", test_layer_types(p.layers, [](int64_t) { return false; })},
            {"max_window_layers", p.layers},
            {"mlp_bias", false},
            {"no_rope_layer_interval", p.no_rope_interval},
            {"no_rope_layers", no_rope},
            {"pretraining_tp", 2},
            {"rms_norm_eps", 1e-06},
            {"rope_scaling", nullptr},
            {"rope_theta", 5000000.0},
            {"sliding_window", nullptr},
            {"use_sliding_window", false}});
  return j;
}

constexpr HfModelType kHfTypes[] = {{"smollm3", "SmolLM3ForCausalLM"}};

// HuggingFaceTB/SmolLM3-3B (Llama 3's vocabulary size; every fourth layer NoPE) and a tiny sibling with every second
// layer NoPE (weight_std 0.12: its four layers amplify the bf16 activation rounding more than the 2-3 of the others).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "smollm3-3b", .model_type = "smollm3", .tiny = false, .hidden = 2048, .intermediate = 11008,
     .layers = 36, .heads = 16, .kv_heads = 4, .vocab = 128256, .max_position_embeddings = 65536, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .no_rope_interval = 4, .bos = -1, .config_eos = {128012},
     .generation_eos = {128012}},
    {.name = "tiny-smollm3", .model_type = "smollm3", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 4,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 65536, .tied = true, .embed_std = 0.08,
     .weight_std = 0.12, .no_rope_interval = 2},
};
// clang-format on

}  // namespace

// GGUF q/k rows interleaved: written by llama.cpp's LlamaModel converter.
// clang-format off
extern const Family kSmolLM3Family = {
    .name = "smollm3", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "smollm3",
    .gguf_rope_style = kernels::RopeStyle::kInterleaved, .read_gguf = read_gguf, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "smollm3", .interleave_qk = true, .write_keys = write_keys}, .test_presets = kPresets,
    .test_config = test_config};
// clang-format on

}  // namespace minfer
