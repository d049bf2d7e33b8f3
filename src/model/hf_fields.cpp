#include "model/hf_fields.h"

namespace minfer {

using json = nlohmann::json;

RopeScaling parse_rope_scaling(const nlohmann::json* rs, const std::string& path) {
  RopeScaling out;
  if (rs == nullptr) return out;
  if (!rs->is_object()) fail_load(path, "field \"rope_scaling\" must be an object or null, got {}", rs->dump());
  const HfFields f(*rs, path);
  // transformers renamed "type" to "rope_type"; both appear in the wild.
  const std::string type = f.string("rope_type", f.string("type", "default"));
  if (type == "default") return out;
  if (type == "longrope" || type == "su") {  // "su": Phi-3's first name for it
    out.type = "longrope";
    auto factors = [&](const char* key) {
      std::vector<float> v;
      const nlohmann::json* a = f.get(key);
      if (a == nullptr || !a->is_array()) fail_load(path, "rope_scaling.{} must be a list of numbers", key);
      for (const nlohmann::json& x : *a) {
        if (!x.is_number()) fail_load(path, "rope_scaling.{} must be a list of numbers, got {}", key, x.dump());
        v.push_back(x.get<float>());
      }
      return v;
    };
    out.long_factor = factors("long_factor");
    out.short_factor = factors("short_factor");
    out.attention_factor = f.number("attention_factor", 0.0);  // 0: from the context ratio (read_phi3_fields)
    return out;
  }
  if (type != "linear" && type != "llama3" && type != "yarn")
    fail_load(path, "unsupported rope_scaling type '{}' (supported: default, linear, llama3, longrope, yarn)", type);
  out.type = type;
  out.factor = f.number("factor", 0.0);
  if (type == "yarn") {
    // original_max_position_embeddings 0: the model's max_position_embeddings (resolved by parse_hf_config).
    out.original_max_position_embeddings = f.integer("original_max_position_embeddings", 0);
    out.beta_fast = f.number("beta_fast", 32.0);
    out.beta_slow = f.number("beta_slow", 1.0);
    out.truncate = f.boolean("truncate", true);
    // cos / sin scale: given, or the paper's 0.1 ln(factor) + 1 (as a ratio with mscale / mscale_all_dim, DeepSeek's
    // form, when both are set).
    auto mscale = [&](double m) { return out.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(out.factor) + 1.0; };
    const double m = f.number("mscale", 0.0), m_all = f.number("mscale_all_dim", 0.0);
    out.attention_factor =
        f.number("attention_factor", m != 0.0 && m_all != 0.0 ? mscale(m) / mscale(m_all) : mscale(1.0));
    return out;
  }
  if (type == "llama3") {
    out.low_freq_factor = f.number("low_freq_factor", 1.0);
    out.high_freq_factor = f.number("high_freq_factor", 4.0);
    out.original_max_position_embeddings = f.integer("original_max_position_embeddings", 8192);
  }
  return out;
}

void read_layer_types(const HfFields& f, ModelConfig& c, const std::function<bool(int64_t)>& sliding) {
  c.layer_sliding.clear();
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array()) fail_load(f.path(), "field \"layer_types\" must be a list, got {}", types->dump());
    for (const json& t : *types) {
      if (t != "sliding_attention" && t != "full_attention")
        fail_load(f.path(), "unsupported layer type {} in \"layer_types\" (sliding_attention, full_attention)",
                  t.dump());
      c.layer_sliding.push_back(t == "sliding_attention");
    }
    return;
  }
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_sliding.push_back(sliding(i));
}

// The dense layers: mlp_only_layers, and every layer i with (i + 1) % decoder_sparse_step != 0 (transformers' rule).
void read_qwen_dense_layers(const HfFields& f, ModelConfig& c) {
  const int64_t step = f.integer("decoder_sparse_step", 1);
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  if (const nlohmann::json* only = f.get("mlp_only_layers")) {
    if (!only->is_array()) fail_load(f.path(), "field \"mlp_only_layers\" must be a list of layer indices");
    for (const nlohmann::json& i : *only) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.num_layers)
        fail_load(f.path(), "field \"mlp_only_layers\" holds {}, not a layer index", i.dump());
      dense[i.get<size_t>()] = true;
    }
  }
  bool any_dense = false;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (step <= 0 || (i + 1) % step != 0) dense[static_cast<size_t>(i)] = true;
    any_dense = any_dense || dense[static_cast<size_t>(i)];
  }
  if (any_dense) c.layer_dense = dense;
}

void read_qwen_window(const HfFields& f, ModelConfig& c) {
  if (!f.boolean("use_sliding_window", false)) return;
  c.sliding_window = f.integer("sliding_window", 0);
  const int64_t first = f.integer("max_window_layers", c.num_layers);
  read_layer_types(f, c, [&](int64_t i) { return i >= first; });
}

}  // namespace minfer
