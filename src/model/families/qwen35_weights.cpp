// Qwen3.5's weights at load (the gate rows of q_proj, the delta rule's conv kernel and decay) and its test-model
// presets.

#include "model/families/family_file.h"
#include "model/families/qwen35.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

// Every second block of `block` rows, starting with block `parity`: the query (0) or gate (1) rows of a q_proj that
// interleaves them per head.
Tensor every_other_block(const Tensor& t, int64_t block, int64_t parity) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t b = parity * block; b < t.dim(0); b += 2 * block) ranges.emplace_back(b, b + block);
  return gather_row_ranges(t, ranges);
}

void split_query_gate(ModelWeights& w, const std::string& p) {
  const ModelConfig& c = w.config;
  auto it = w.tensors.find(p + "wq");
  if (it == w.tensors.end()) return;  // check_weights names it
  const Tensor wq = it->second;
  if (wq.rank() != 2 || wq.dim(0) != 2 * c.num_heads * c.head_dim || wq.quant)
    fail_load(w.path, "tensor '{}' has shape {}, expected [{}, {}] (query and gate rows per head)",
              checkpoint_name(w, p + "wq"), wq.shape_string(), 2 * c.num_heads * c.head_dim, c.hidden_size);
  w.tensors[p + "wq"] = every_other_block(wq, c.head_dim, 0);
  w.tensors[p + "wq_gate"] = every_other_block(wq, c.head_dim, 1);
}

void adapt_hf_delta_rule(ModelWeights& w, const std::string& p) {
  squeeze_conv_kernel(w, p + "ssm_conv");
  decay_from_a_log(w, p + "ssm_a");
}

// transformers 5's stacked experts.gate_up_proj [experts, 2 width, hidden] (each expert's gate rows, then its up rows)
// into each expert's matrices; GGUF's 1-D shared-expert gate as the [1, hidden] matrix it multiplies by.
void adapt_moe(ModelWeights& w, const std::string& p) {
  split_stacked_gate_up(w, p, "mlp.experts.gate_up_proj");
  if (auto it = w.tensors.find(p + "shared_gate"); it != w.tensors.end() && it->second.rank() == 1)
    it->second.shape = {1, it->second.dim(0)};
}

// Qwen3.5's text config (Qwen/Qwen3.5-0.8B's config.json text_config fields), inside the ConditionalGeneration
// wrapper it ships in.
nlohmann::json text_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json t = test_config_base(p, x, "Qwen3_5ForCausalLM", "5.25.0");
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < p.layers; ++i)
    types.push_back((i + 1) % p.full_attention_interval != 0 ? "linear_attention" : "full_attention");
  t.erase("architectures");
  t.update({{"model_type", "qwen3_5_text"},
            {"attention_bias", false},
            {"attn_output_gate", true},
            {"full_attention_interval", p.full_attention_interval},
            {"head_dim", p.head_size()},
            {"hidden_act", "silu"},
            {"layer_types", types},
            {"linear_conv_kernel_dim", 4},
            {"linear_key_head_dim", p.linear_k_dim},
            {"linear_num_key_heads", p.linear_k_heads},
            {"linear_num_value_heads", p.linear_v_heads},
            {"linear_value_head_dim", p.linear_v_dim},
            {"mtp_num_hidden_layers", 0},
            {"rms_norm_eps", 1e-06},
            {"rope_parameters",
             {{"mrope_interleaved", true},
              {"mrope_section", {11, 11, 10}},
              {"partial_rotary_factor", 0.25},
              {"rope_theta", 10000000},
              {"rope_type", "default"}}}});
  return t;
}

// tiny-qwen3.5: three delta-rule layers and an attention layer, 4 value heads over 2 key heads (the grouping the
// real ones have), head_dim 32 with 8 rotary dims.
// clang-format off
const TestPreset kPresets[] = {
    {.name = "qwen3.5-0.8b", .model_type = "qwen3_5", .tiny = false, .hidden = 1024, .intermediate = 3584,
     .layers = 24, .heads = 8, .kv_heads = 2, .vocab = 248320, .max_position_embeddings = 262144, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 256, .linear_k_heads = 16, .linear_v_heads = 16,
     .linear_k_dim = 128, .linear_v_dim = 128, .full_attention_interval = 4, .bos = 248044, .config_eos = {248044},
     .generation_eos = {248046, 248044}, .qwen_tokenizer = true},
    {.name = "qwen3.5-9b", .model_type = "qwen3_5", .tiny = false, .hidden = 4096, .intermediate = 12288,
     .layers = 32, .heads = 16, .kv_heads = 4, .vocab = 248320, .max_position_embeddings = 262144, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 256, .linear_k_heads = 16, .linear_v_heads = 32,
     .linear_k_dim = 128, .linear_v_dim = 128, .full_attention_interval = 4, .bos = 248044, .config_eos = {248044},
     .generation_eos = {248046, 248044}, .qwen_tokenizer = true},
    {.name = "tiny-qwen3.5", .model_type = "qwen3_5", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 4,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 262144, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .head_dim = 32, .linear_k_heads = 2, .linear_v_heads = 4, .linear_k_dim = 16,
     .linear_v_dim = 16, .full_attention_interval = 4, .qwen_tokenizer = true},
};
// clang-format on

// qwen3.6-35b-a3b: Qwen3.5-35B-A3B's shape (Qwen3.6 shares it; use --layers for a slice); tiny-qwen3.5-moe: 8 experts,
// top 2, and a shared expert.
// clang-format off
const TestPreset kMoePresets[] = {
    {.name = "qwen3.6-35b-a3b", .model_type = "qwen3_5_moe", .tiny = false, .hidden = 2048, .intermediate = 512,
     .layers = 40, .heads = 16, .kv_heads = 2, .vocab = 248320, .max_position_embeddings = 262144, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 256, .experts = 256, .experts_per_tok = 8,
     .moe_intermediate = 512, .linear_k_heads = 16, .linear_v_heads = 32, .linear_k_dim = 128, .linear_v_dim = 128,
     .full_attention_interval = 4, .bos = 248044, .config_eos = {248044}, .generation_eos = {248046, 248044},
     .qwen_tokenizer = true},
    {.name = "tiny-qwen3.5-moe", .model_type = "qwen3_5_moe", .tiny = true, .hidden = 64, .intermediate = 64,
     .layers = 4, .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 262144, .tied = true,
     .embed_std = 0.08, .weight_std = 0.16, .head_dim = 32, .experts = 8, .experts_per_tok = 2, .moe_intermediate = 32,
     .linear_k_heads = 2, .linear_v_heads = 4, .linear_k_dim = 16, .linear_v_dim = 16, .full_attention_interval = 4,
     .qwen_tokenizer = true},
};
// clang-format on

}  // namespace

const std::span<const TestPreset> kQwen35Presets = kPresets;
const std::span<const TestPreset> kQwen35MoePresets = kMoePresets;

// Qwen3_5MoeForConditionalGeneration: the dense text config plus the experts' fields (the shared expert as wide as
// `intermediate`).
nlohmann::json qwen35_moe_test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = qwen35_test_config(p, x);
  j["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
  j["model_type"] = "qwen3_5_moe";
  nlohmann::json& t = j["text_config"];
  t.erase("intermediate_size");
  t.update({{"model_type", "qwen3_5_moe_text"},
            {"moe_intermediate_size", p.moe_intermediate},
            {"num_experts", p.experts},
            {"num_experts_per_tok", p.experts_per_tok},
            {"router_aux_loss_coef", 0.001},
            {"shared_expert_intermediate_size", p.intermediate}});
  return j;
}

nlohmann::json qwen35_test_config(const TestPreset& p, const TestConfigContext& x) {
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
          {"model_type", "qwen3_5"},
          {"text_config", text_config(p, x)},
          {"tie_word_embeddings", p.tied},
          {"transformers_version", "5.25.0"}};
}

void qwen35_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    if (w.name.ends_with(".q_proj_gate.weight")) continue;
    if (w.name.ends_with(".self_attn.q_proj.weight")) w.shape[0] *= 2;
    if (w.name.ends_with(".linear_attn.conv1d.weight")) w.shape = {w.shape[0], 1, w.shape[1]};
    out.push_back(std::move(w));
  }
  (void)c;
  weights = std::move(out);
}

void adapt_qwen35_weights(ModelWeights& w) {
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (!w.config.is_recurrent(i) && w.config.attn_output_gate) split_query_gate(w, p);
    if (w.format == CheckpointFormat::kHuggingFace) adapt_hf_delta_rule(w, p);
    if (w.config.is_moe(i)) adapt_moe(w, p);
  }
  for (int64_t j = 0; j < w.config.mtp_layers; ++j) {  // the MTP blocks: gated attention and the model's FFN
    const std::string p = "mtp." + std::to_string(j) + ".";
    if (w.config.attn_output_gate) split_query_gate(w, p);
    if (w.config.num_experts > 0) adapt_moe(w, p);
  }
}

}  // namespace minfer
