#include "model/families/test_config.h"

namespace minfer {

using json = nlohmann::json;

json id_or_list(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

json test_config_base(const TestPreset& p, const TestConfigContext& x, const char* hf_class,
                      const char* transformers_version) {
  return {{"architectures", {hf_class}},
          {"attention_dropout", 0.0},
          {"bos_token_id", x.bos >= 0 ? json(x.bos) : json(nullptr)},
          {"eos_token_id", id_or_list(x.config_eos)},
          {"hidden_size", p.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", p.intermediate},
          {"max_position_embeddings", p.max_position_embeddings},
          {"model_type", p.model_type},
          {"num_attention_heads", p.heads},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"tie_word_embeddings", p.tied},
          {"torch_dtype", x.dtype == DType::BF16 ? "bfloat16" : "float32"},
          {"transformers_version", transformers_version},
          {"use_cache", true},
          {"vocab_size", x.vocab}};
}

json test_layer_types(int64_t layers, const std::function<bool(int64_t)>& sliding) {
  json out = json::array();
  for (int64_t i = 0; i < layers; ++i) out.push_back(sliding(i) ? "sliding_attention" : "full_attention");
  return out;
}

}  // namespace minfer
