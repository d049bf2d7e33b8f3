// LFM2's test-model presets: LiquidAI/LFM2-1.2B's shape and a tiny sibling, their config.json, and in_proj / the
// conv kernel written as the checkpoint stores them.
#include "model/families/family_file.h"

namespace minfer {
namespace {

// The attention layers of LFM2-1.2B (its config.json layer_types), and tiny-lfm2's third of four.
bool attends(const TestPreset& p, int64_t i) {
  if (p.tiny) return i == 2;
  for (int64_t a : {2, 5, 8, 10, 12, 14})
    if (i == a) return true;
  return false;
}

// clang-format off
const TestPreset kPresets[] = {
    {.name = "lfm2-1.2b", .model_type = "lfm2", .tiny = false, .hidden = 2048, .intermediate = 12288, .layers = 16,
     .heads = 32, .kv_heads = 8, .vocab = 65536, .max_position_embeddings = 128000, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .bos = 1, .config_eos = {7}, .generation_eos = {7}},
    {.name = "tiny-lfm2", .model_type = "lfm2", .tiny = true, .hidden = 64, .intermediate = 192, .layers = 4,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 128000, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16},
};
// clang-format on

}  // namespace

extern const std::span<const TestPreset> kLfm2Presets = kPresets;

// Lfm2ForCausalLM (LiquidAI/LFM2-1.2B's config.json fields; the MLP's width is adjusted from intermediate_size).
nlohmann::json lfm2_test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "Lfm2ForCausalLM", "5.25.0");
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < p.layers; ++i) types.push_back(attends(p, i) ? "full_attention" : "conv");
  j.update({{"block_auto_adjust_ff_dim", true},
            {"block_ffn_dim_multiplier", 1.0},
            {"block_multiple_of", p.tiny ? 16 : 256},
            {"conv_L_cache", 3},
            {"conv_bias", false},
            {"layer_types", types},
            {"norm_eps", 1e-05},
            {"rope_parameters", {{"rope_theta", 1000000.0}, {"rope_type", "default"}}}});
  return j;
}

void lfm2_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    if (w.name.ends_with(".conv.in_proj_c.weight") || w.name.ends_with(".conv.in_proj_x.weight")) continue;
    if (w.name.ends_with(".conv.in_proj_b.weight"))
      w = {w.name.substr(0, w.name.size() - 16) + "in_proj.weight", {3 * c.hidden_size, c.hidden_size}};
    if (w.name.ends_with(".conv.conv.weight")) w.shape = {w.shape[0], 1, w.shape[1]};
    out.push_back(std::move(w));
  }
  weights = std::move(out);
}

}  // namespace minfer
