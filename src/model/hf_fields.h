// Typed access to a Hugging Face config.json (HfFields) and the readers of fields several families share: RoPE
// scaling, per-layer attention types, Qwen-style sliding windows. The family files (model/families/) read their own
// fields with these; config_hf.cpp reads the fields every family has.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model_config.h"

namespace minfer {

// Typed access to config.json fields: a present field of the wrong type is an error naming it, an absent or
// null one takes the default.
class HfFields {
 public:
  HfFields(const nlohmann::json& j, const std::string& path) : j_(j), path_(path) {}

  const std::string& path() const { return path_; }

  const nlohmann::json* get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) {
      if (!fallback) fail_load(path_, "missing field \"{}\"", key);
      return *fallback;
    }
    // Some exporters write whole numbers as floats (32768.0); accept those, nothing else.
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::abs(d) < 0x1p62 && d == std::trunc(d)) return static_cast<int64_t>(d);
    }
    if (!v->is_number_integer()) fail_load(path_, "field \"{}\" must be an integer, got {}", key, v->dump());
    return v->get<int64_t>();
  }
  // A number whose explicit null means none (0) while its absence means the class default: Gemma2Config's
  // soft-capping fields default to 30 and 50, and a checkpoint switches them off with null.
  double number_or_none(const char* key, double absent) const {
    const auto it = j_.find(key);
    if (it == j_.end()) return absent;
    return it->is_null() ? 0.0 : number(key, 0.0);
  }
  double number(const char* key, double fallback) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail_load(path_, "field \"{}\" must be a number, got {}", key, v->dump());
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail_load(path_, "field \"{}\" must be true or false, got {}", key, v->dump());
    return v->get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail_load(path_, "field \"{}\" must be a string, got {}", key, v->dump());
    return v->get<std::string>();
  }
  // An id or a list of ids (eos_token_id is either).
  std::vector<int32_t> ids(const char* key) const {
    const nlohmann::json* v = get(key);
    std::vector<int32_t> out;
    if (v == nullptr) return out;
    auto one = [&](const nlohmann::json& x) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
        fail_load(path_, "field \"{}\" must be a token id or a list of token ids, got {}", key, v->dump());
      out.push_back(static_cast<int32_t>(x.get<int64_t>()));
    };
    if (v->is_array()) {
      for (const auto& x : *v) one(x);
    } else {
      one(*v);
    }
    return out;
  }

 private:
  const nlohmann::json& j_;
  const std::string& path_;
};

// The "rope_scaling" object (or transformers 5's per-layer-type rope_parameters entry); nullptr: none.
RopeScaling parse_rope_scaling(const nlohmann::json* rope_scaling, const std::string& path);

// Which layers use the sliding window: config.json's layer_types ("sliding_attention" / "full_attention") when
// present, else `sliding(i)` (the family's rule from older config fields).
void read_layer_types(const HfFields& f, ModelConfig& c, const std::function<bool(int64_t)>& sliding);

// Qwen2 / Qwen3 / SmolLM3: with use_sliding_window, a window on the layers from max_window_layers on
// (transformers' layer_types default).
void read_qwen_window(const HfFields& f, ModelConfig& c);
// Qwen3-MoE / Qwen3-Next: the layers that keep a dense MLP (ModelConfig::layer_dense): mlp_only_layers, and every
// layer off the decoder_sparse_step grid.
void read_qwen_dense_layers(const HfFields& f, ModelConfig& c);

}  // namespace minfer
