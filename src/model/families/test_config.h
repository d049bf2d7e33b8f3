// Pieces of the config.json files the test-model presets write (model/families/*.cpp, Family::test_config): the
// fields every family's config has, and the per-layer lists some add. nlohmann::json keeps keys sorted, as
// transformers writes them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "model/families/family.h"

namespace minfer {

// An id, a list of ids, or null when there are none (eos_token_id's forms).
nlohmann::json id_or_list(const std::vector<int64_t>& ids);

// architectures, model_type, shapes, special ids, tie_word_embeddings, torch_dtype, transformers_version, use_cache
// and vocab_size: what every family's config.json states alike.
nlohmann::json test_config_base(const TestPreset& p, const TestConfigContext& x, const char* hf_class,
                                const char* transformers_version);

// layer_types: "sliding_attention" where `sliding(i)`, else "full_attention".
nlohmann::json test_layer_types(int64_t layers, const std::function<bool(int64_t)>& sliding);

}  // namespace minfer
