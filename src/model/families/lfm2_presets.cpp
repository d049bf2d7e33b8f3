// LFM2's test-model presets: LiquidAI/LFM2-1.2B's shape and a tiny sibling, their config.json, and in_proj / the
// conv kernel written as the checkpoint stores them.
#include <algorithm>
#include <vector>

#include "model/families/family_file.h"

namespace minfer {
namespace {

// The attention layers of LFM2-1.2B and LFM2-8B-A1B (their config.json layer_types), and the tiny ones' third of
// four.
bool attends(const TestPreset& p, int64_t i) {
  if (p.tiny) return i == 2;
  const std::vector<int64_t> layers =
      p.experts > 0 ? std::vector<int64_t>{2, 6, 10, 14, 18, 21} : std::vector<int64_t>{2, 5, 8, 10, 12, 14};
  return std::find(layers.begin(), layers.end(), i) != layers.end();
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

// lfm2-8b-a1b: LiquidAI/LFM2-8B-A1B's shape (two dense layers, then 32 experts, top 4); tiny-lfm2-moe: one dense layer,
// then 8 experts, top 2.
const TestPreset kMoePresets[] = {
    {.name = "lfm2-8b-a1b", .model_type = "lfm2_moe", .tiny = false, .hidden = 2048, .intermediate = 7168,
     .layers = 24, .heads = 32, .kv_heads = 8, .vocab = 65536, .max_position_embeddings = 128000, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .experts = 32, .experts_per_tok = 4, .moe_intermediate = 1792, .bos = 1,
     .config_eos = {7}, .generation_eos = {7}},
    {.name = "tiny-lfm2-moe", .model_type = "lfm2_moe", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 4,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 128000, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .experts = 8, .experts_per_tok = 2, .moe_intermediate = 32},
};
// clang-format on

}  // namespace

extern const std::span<const TestPreset> kLfm2Presets = kPresets;
extern const std::span<const TestPreset> kLfm2MoePresets = kMoePresets;

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

// Lfm2MoeForCausalLM (LiquidAI/LFM2-8B-A1B's config.json fields; intermediate_size is the dense layers' width as is).
nlohmann::json lfm2_moe_test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = lfm2_test_config(p, x);
  for (const char* k : {"block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of"}) j.erase(k);
  j.update({{"architectures", {"Lfm2MoeForCausalLM"}},
            {"model_type", "lfm2_moe"},
            {"moe_intermediate_size", p.moe_intermediate},
            {"norm_topk_prob", true},
            {"num_dense_layers", p.tiny ? 1 : 2},
            {"num_experts", p.experts},
            {"num_experts_per_tok", p.experts_per_tok},
            {"routed_scaling_factor", 1.0},
            {"use_expert_bias", true}});
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
