// Qwen3.5's pieces beside its family file (qwen35.cpp): the weight adaptation at load and the test-model presets
// (qwen35_weights.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "model/families/family.h"
#include "model/model_weights.h"

namespace minfer {

// What Qwen3-Next (qwen3next.cpp) shares: the graph, the MoE config readers and the weight names.
graph::Graph build_qwen35_graph(const ModelWeights& weights);
void read_qwen35_moe_hf(const HfFields& f, std::string_view model_type, ModelConfig& c);
void read_qwen35_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c);

// The delta rule's weights; HF's conv1d.weight is [channels, 1, kernel] and A_log is stored for -exp (both adapted
// at load, adapt_qwen35_weights); GGUF stores ssm_a = -exp(A_log) and the value heads tiled.
inline constexpr WeightNameRow kQwen35Names[] = {
    {"ssm_in_qkv", "linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"ssm_in_z", "linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"ssm_in_b", "linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"ssm_in_a", "linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"ssm_conv", "linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"ssm_a", "linear_attn.A_log", "ssm_a"},
    {"ssm_dt_bias", "linear_attn.dt_bias", "ssm_dt.bias"},
    {"ssm_norm_gated", "linear_attn.norm.weight", "ssm_norm.weight"},
    {"ssm_out", "linear_attn.out_proj.weight", "ssm_out.weight"},
    // Only a name for the test-model writer, which folds it back into q_proj (qwen35_test_hf_weights).
    {"wq_gate", "self_attn.q_proj_gate.weight", ""},
    {"ffn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
};

// The MoE layers' router, experts (HF: one tensor per expert, or transformers 5's stacked gate_up_proj / down_proj;
// GGUF: stacked per projection) and the shared expert with its gate.
inline constexpr WeightNameRow kQwen35MoeRows[] = {
    {"router", "mlp.gate.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"experts.w_gate_up", "mlp.experts.gate_up_proj", ""},
    {"shared.w_gate", "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"shared.w_up", "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"shared.w_down", "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"shared_gate", "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};
inline constexpr HfExpertNames kQwen35Experts = {"mlp.experts.", "gate_proj.weight", "up_proj.weight",
                                                 "down_proj.weight"};

// The dense rows and the MoE rows, for the MoE family's table.
inline constexpr auto kQwen35MoeNames = concat_names(kQwen35Names, kQwen35MoeRows);

extern const std::span<const TestPreset> kQwen35Presets;
extern const std::span<const TestPreset> kQwen35MoePresets;
nlohmann::json qwen35_test_config(const TestPreset& p, const TestConfigContext& x);
nlohmann::json qwen35_moe_test_config(const TestPreset& p, const TestConfigContext& x);
// q_proj as the checkpoint stores it ([2 heads head_dim, hidden], query and gate per head) and the conv kernel as
// [channels, 1, kernel].
void qwen35_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights);
// Splits each attention layer's wq into its query rows (wq) and gate rows (wq_gate); from HF, also conv1d
// [channels, 1, kernel] -> [channels, kernel] and A_log -> -exp(A_log) (what GGUF stores as ssm_a).
void adapt_qwen35_weights(ModelWeights& w);

}  // namespace minfer
