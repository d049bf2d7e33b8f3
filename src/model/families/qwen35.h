// Qwen3.5's pieces beside its family file (qwen35.cpp): the weight adaptation at load and the test-model presets
// (qwen35_weights.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "model/families/family.h"
#include "model/model_weights.h"

namespace minfer {

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
