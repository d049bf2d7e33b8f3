// Granite 4.0-H's weight names, its GGUF keys, the splits and reshapes at load (Mamba2's fused in_proj, the stacked
// experts, the shared MLP's fused input, A_log), and its test-model presets.
#include "model/families/family_file.h"
#include "model/families/granite_hybrid.h"
#include "model/families/mamba2.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

// Rows [begin, begin + n) of a 2-D weight, named `name` (a view).
void take_rows(ModelWeights& w, const Tensor& whole, int64_t begin, int64_t n, const std::string& name) {
  w.tensors[name] = row_slice(whole, begin, begin + n);
}

// HF's stacked experts: input_linear [experts, 2 width, hidden] (gate rows, then up rows) into each expert's; the
// shared MLP's input_linear [2 width, hidden] into gate and up (or the dense layer's, without experts).
void split_experts(ModelWeights& w, const std::string& p) {
  const ModelConfig& c = w.config;
  split_stacked_gate_up(w, p, "block_sparse_moe.input_linear.weight");
  if (auto it = w.tensors.find(p + "shared.w_gate_up"); it != w.tensors.end()) {
    const Tensor in = it->second;
    const int64_t width = in.dim(0) / 2;
    const std::string to = c.num_experts > 0 ? p + "shared." : p;
    take_rows(w, in, 0, width, to + "w_gate");
    take_rows(w, in, width, width, to + "w_up");
    w.tensors.erase(it);
  }
  if (auto it = w.tensors.find(p + "shared.w_down"); it != w.tensors.end() && c.num_experts == 0) {
    w.tensors[p + "w_down"] = it->second;
    w.tensors.erase(it);
  }
}

// tiny-granite-4.0-h's vocabulary is padded to 648 (llama.cpp's converter pads Granite 4.0-H's to a multiple of 8).
// clang-format off
const TestPreset kPresets[] = {
    {.name = "granite-4.0-h-tiny", .model_type = "granitemoehybrid", .tiny = false, .hidden = 1536,
     .intermediate = 1024, .layers = 40, .heads = 12, .kv_heads = 4, .vocab = 100352,
     .max_position_embeddings = 131072, .tied = true, .embed_std = 0.02, .weight_std = 0.02, .experts = 64,
     .experts_per_tok = 6, .moe_intermediate = 512, .bos = 100257, .config_eos = {100257},
     .generation_eos = {100257}},
    {.name = "tiny-granite-4.0-h", .model_type = "granitemoehybrid", .tiny = true, .hidden = 64, .intermediate = 32,
     .layers = 4, .heads = 4, .kv_heads = 2, .vocab = 648, .max_position_embeddings = 131072, .tied = true,
     .embed_std = 0.08, .weight_std = 0.16, .experts = 4, .experts_per_tok = 2, .moe_intermediate = 48},
};
// clang-format on

}  // namespace

const std::span<const TestPreset> kGraniteHybridPresets = kPresets;

// Mamba2's in_proj and conv, the experts' and the shared MLP's fused inputs; the router; the multipliers' keys.
const WeightNameRow kGraniteHybridNameRows[] = {
    {"ssm_in", "mamba.in_proj.weight", "ssm_in.weight"},
    {"ssm_conv", "mamba.conv1d.weight", "ssm_conv1d.weight"},
    {"ssm_conv_bias", "mamba.conv1d.bias", "ssm_conv1d.bias"},
    {"ssm_dt_bias", "mamba.dt_bias", "ssm_dt.bias"},
    {"ssm_a", "mamba.A_log", "ssm_a"},
    {"ssm_d", "mamba.D", "ssm_d"},
    {"ssm_norm_gated", "mamba.norm.weight", "ssm_norm.weight"},
    {"ssm_out", "mamba.out_proj.weight", "ssm_out.weight"},
    {"router", "block_sparse_moe.router.layer.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate_up", "block_sparse_moe.input_linear.weight", ""},
    {"experts.w_down", "block_sparse_moe.output_linear.weight", "ffn_down_exps.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"shared.w_gate_up", "shared_mlp.input_linear.weight", ""},
    {"shared.w_down", "shared_mlp.output_linear.weight", "ffn_down_shexp.weight"},
    {"shared.w_gate", "shared_mlp.gate.weight", "ffn_gate_shexp.weight"},
    {"shared.w_up", "shared_mlp.up.weight", "ffn_up_shexp.weight"},
    // Only names for the test-model writer, which writes the fused tensors (granite_hybrid_test_hf_weights), as it
    // does for the shared MLP's gate and up above and the per-expert names below.
    {"ssm_in_z", "mamba.in_proj_z.weight", ""},
    {"ssm_in_xbc", "mamba.in_proj_xbc.weight", ""},
    {"ssm_in_dt", "mamba.in_proj_dt.weight", ""},
};
const std::span<const WeightNameRow> kGraniteHybridNames = kGraniteHybridNameRows;
const HfExpertNames kGraniteHybridExperts = {"block_sparse_moe.experts.", "gate.weight", "up.weight", "down.weight"};

const HfModelType kGraniteHybridTypeRows[] = {{"granitemoehybrid", "GraniteMoeHybridForCausalLM"}};
const std::span<const HfModelType> kGraniteHybridTypes = kGraniteHybridTypeRows;

void read_granite_hybrid_gguf(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(g.find_float(a + ".embedding_scale").value_or(0.0));
  c.attention_scale = g.find_float(a + ".attention.scale").value_or(0.0);
  c.residual_multiplier = g.find_float(a + ".residual_scale").value_or(1.0);
  c.logits_scaling = g.find_float(a + ".logit_scale").value_or(1.0);
  if (!g.find_int(a + ".rope.scaling.finetuned").value_or(1))
    c.layer_rope.assign(static_cast<size_t>(c.num_layers), false);
  read_mamba2_gguf(g, a, c.mamba);
  const std::string kv_key = a + ".attention.head_count_kv";
  const GgufValue* kv = g.find(kv_key);
  if (kv == nullptr || kv->type != GgufType::ARRAY)
    fail_load(g.path(), "metadata '{}' must list each layer's KV heads (0 for a Mamba2 layer)", kv_key);
  c.layer_mixers.clear();
  for (int64_t n : g.get_int_array(kv_key))
    c.layer_mixers.push_back(n == 0 ? LayerMixer::kMamba2 : LayerMixer::kAttention);
  if (c.num_experts > 0) c.shared_expert_gated = false;
  if (c.num_experts == 0 && c.shared_expert_intermediate_size > 0)
    c.intermediate_size = c.shared_expert_intermediate_size;
}

void adapt_granite_hybrid_weights(ModelWeights& w) {
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (w.config.is_recurrent(i)) adapt_mamba2_weights(w, p);
    split_experts(w, p);
  }
}

// GraniteMoeHybridForCausalLM (ibm-granite/granite-4.0-h-tiny's config.json fields: NoPE attention on a few layers,
// Mamba2 on the rest, experts and a shared MLP); tiny-granite-4.0-h: layers mamba, mamba, attention, mamba.
nlohmann::json granite_hybrid_test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "GraniteMoeHybridForCausalLM", "5.25.0");
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < p.layers; ++i)
    types.push_back(p.tiny ? (i == 2 ? "attention" : "mamba") : (i % 10 == 5 ? "attention" : "mamba"));
  j.update({{"attention_multiplier", p.tiny ? 0.125 : 0.0078125},
            {"embedding_multiplier", p.tiny ? 2.0 : 12.0},
            {"intermediate_size", p.moe_intermediate},
            {"layer_types", types},
            {"logits_scaling", p.tiny ? 2.0 : 6.0},
            {"mamba_chunk_size", 256},
            {"mamba_conv_bias", true},
            {"mamba_d_conv", 4},
            {"mamba_d_head", p.tiny ? 16 : 64},
            {"mamba_d_state", p.tiny ? 16 : 128},
            {"mamba_expand", 2},
            {"mamba_n_groups", 1},
            {"mamba_n_heads", p.tiny ? 8 : 48},
            {"mamba_proj_bias", false},
            {"num_experts_per_tok", p.experts_per_tok},
            {"num_local_experts", p.experts},
            {"position_embedding_type", "nope"},
            {"residual_multiplier", p.tiny ? 0.5 : 0.22},
            {"rms_norm_eps", 1e-05},
            {"shared_intermediate_size", p.intermediate}});
  return j;
}

void granite_hybrid_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  std::vector<HfTestWeight> out;
  const int64_t h = c.hidden_size, ne = c.num_experts, ff = c.moe_intermediate_size;
  for (HfTestWeight& w : weights) {
    const std::string& n = w.name;
    if (n.ends_with(".mamba.in_proj_xbc.weight") || n.ends_with(".mamba.in_proj_dt.weight")) continue;
    if (n.find(".block_sparse_moe.") != std::string::npos && n.find(".router.") == std::string::npos) continue;
    if (n.find("shared_mlp.") != std::string::npos && !n.ends_with("output_linear.weight")) continue;
    if (n.ends_with(".mamba.in_proj_z.weight"))
      w = {n.substr(0, n.size() - 16) + "in_proj.weight",
           {c.mamba.inner() + c.mamba.conv_channels() + c.mamba.heads, h}};
    if (n.ends_with(".mamba.conv1d.weight")) w.shape = {w.shape[0], 1, w.shape[1]};
    out.push_back(std::move(w));
    if (!out.back().name.ends_with(".block_sparse_moe.router.layer.weight")) continue;
    const std::string x = out.back().name.substr(0, out.back().name.size() - 19);
    out.push_back({x + "input_linear.weight", {ne, 2 * ff, h}});
    out.push_back({x + "output_linear.weight", {ne, h, ff}});
    const std::string layer = x.substr(0, x.size() - 17);
    out.push_back({layer + "shared_mlp.input_linear.weight", {2 * c.shared_expert_intermediate_size, h}});
  }
  weights = std::move(out);
}

}  // namespace minfer
