// Granite 4.0-H's pieces beside its family file (granite_hybrid.cpp): names, GGUF keys, the weights' splits at load and
// the test-model presets (granite_hybrid_weights.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model/families/family.h"
#include "model/model_weights.h"

namespace minfer {

extern const std::span<const WeightNameRow> kGraniteHybridNames;
extern const std::span<const HfModelType> kGraniteHybridTypes;
extern const HfExpertNames kGraniteHybridExperts;
extern const std::span<const TestPreset> kGraniteHybridPresets;
void read_granite_hybrid_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c);
void adapt_granite_hybrid_weights(ModelWeights& w);
nlohmann::json granite_hybrid_test_config(const TestPreset& p, const TestConfigContext& x);
void granite_hybrid_test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights);

}  // namespace minfer
