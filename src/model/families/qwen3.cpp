// Qwen3 and Qwen3-MoE: the Llama block (model/families/llama.cpp) with per-head q/k norms and an explicit head_dim;
// Qwen3-MoE replaces the MLP of its sparse layers with num_experts experts of moe_intermediate_size, of which a
// softmax router picks num_experts_per_tok (renormalised over them with norm_topk_prob). Layers in mlp_only_layers,
// or off the decoder_sparse_step grid, keep a dense MLP.
#include "model/families/family_file.h"

namespace minfer {
namespace {

void read_qwen3_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  c.qk_norm = true;
  read_qwen_window(f, c);
}

// Router aux-loss fields only matter for training and are ignored.
void read_qwen3_moe_hf(const HfFields& f, std::string_view model_type, ModelConfig& c) {
  read_qwen3_hf(f, model_type, c);
  c.num_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.norm_topk_prob = f.boolean("norm_topk_prob", false);
  read_qwen_dense_layers(f, c);
  if (f.integer("shared_expert_intermediate_size", 0) > 0)
    fail_load(f.path(), "unsupported: shared_expert_intermediate_size (shared experts, Qwen2-MoE style)");
}

void read_gguf(const GgufFile&, const std::string&, ModelConfig& c) { c.qk_norm = true; }

// Qwen3ForCausalLM (Qwen/Qwen3-0.6B's config.json).
nlohmann::json qwen3_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "Qwen3ForCausalLM", "4.51.0");
  j.update({{"attention_bias", false},
            {"head_dim", p.head_size()},
            {"hidden_act", "silu"},
            {"max_window_layers", p.max_window_layers},
            {"rms_norm_eps", 1e-06},
            {"rope_scaling", nullptr},
            {"rope_theta", 1000000.0},
            {"sliding_window", nullptr},
            {"use_sliding_window", false}});
  return j;
}

// Qwen3MoeForCausalLM (Qwen/Qwen3-30B-A3B's config.json fields, every layer sparse).
nlohmann::json qwen3_moe_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = qwen3_config(p, x);
  j.update({{"architectures", {"Qwen3MoeForCausalLM"}},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", nlohmann::json::array()},
            {"moe_intermediate_size", p.moe_intermediate},
            {"norm_topk_prob", true},
            {"num_experts", p.experts},
            {"num_experts_per_tok", p.experts_per_tok},
            {"output_router_logits", false},
            {"router_aux_loss_coef", 0.001}});
  return j;
}

constexpr HfModelType kQwen3Types[] = {{"qwen3", "Qwen3ForCausalLM"}};
constexpr HfModelType kQwen3MoeTypes[] = {{"qwen3_moe", "Qwen3MoeForCausalLM"}};

// The router, and in GGUF the experts stacked in one 3-D tensor per projection (split into
// layers.{i}.experts.{j}.* at load); HF names each expert's matrices apart.
constexpr WeightNameRow kQwen3MoeNames[] = {
    {"router", "mlp.gate.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "", "ffn_down_exps.weight"},
};
constexpr HfExpertNames kQwen3MoeExperts = {"mlp.experts.", "gate_proj.weight", "up_proj.weight", "down_proj.weight"};

// tiny-qwen3's head_dim (32) is not hidden / heads (16), as Qwen3's own are not. qwen3-moe-small: 16 experts, top-4,
// hidden 1024, 8 layers (Qwen3-30B-A3B's heads and expert width).
// clang-format off
const TestPreset kQwen3Presets[] = {
    {.name = "qwen3-0.6b", .model_type = "qwen3", .tiny = false, .hidden = 1024, .intermediate = 3072, .layers = 28,
     .heads = 16, .kv_heads = 8, .vocab = 151936, .max_position_embeddings = 40960, .tied = true, .embed_std = 0.02,
     .weight_std = 0.02, .head_dim = 128, .max_window_layers = 28, .bos = 151643, .config_eos = {151645},
     .generation_eos = {151645, 151643}, .qwen_tokenizer = true},
    {.name = "tiny-qwen3", .model_type = "qwen3", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 40960, .tied = true, .embed_std = 0.08,
     .weight_std = 0.16, .head_dim = 32, .max_window_layers = 2, .qwen_tokenizer = true},
};

const TestPreset kQwen3MoePresets[] = {
    {.name = "qwen3-moe-small", .model_type = "qwen3_moe", .tiny = false, .hidden = 1024, .intermediate = 3072,
     .layers = 8, .heads = 16, .kv_heads = 4, .vocab = 151936, .max_position_embeddings = 40960, .tied = true,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 128, .experts = 16, .experts_per_tok = 4,
     .moe_intermediate = 768, .max_window_layers = 8, .bos = 151643, .config_eos = {151645},
     .generation_eos = {151645, 151643}, .qwen_tokenizer = true},
    {.name = "tiny-qwen3-moe", .model_type = "qwen3_moe", .tiny = true, .hidden = 64, .intermediate = 128,
     .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 40960, .tied = true,
     .embed_std = 0.08, .weight_std = 0.16, .head_dim = 32, .experts = 8, .experts_per_tok = 2,
     .moe_intermediate = 32, .max_window_layers = 2, .qwen_tokenizer = true},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kQwen3Family = {
    .name = "qwen3", .hf_model_types = kQwen3Types, .read_hf = read_qwen3_hf, .gguf_arch = "qwen3",
    .read_gguf = read_gguf, .build_graph = build_llama_graph, .gguf_export = {.arch = "qwen3"},
    .test_presets = kQwen3Presets, .test_config = qwen3_config};
// clang-format on

// clang-format off
extern const Family kQwen3MoeFamily = {
    .name = "qwen3moe", .hf_model_types = kQwen3MoeTypes, .read_hf = read_qwen3_moe_hf, .gguf_arch = "qwen3moe",
    .read_gguf = read_gguf, .layer_names = kQwen3MoeNames, .hf_experts = &kQwen3MoeExperts,
    .build_graph = build_llama_graph, .gguf_export = {.arch = "qwen3moe"}, .test_presets = kQwen3MoePresets,
    .test_config = qwen3_moe_config};
// clang-format on

}  // namespace minfer
