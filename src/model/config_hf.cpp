#include "model/config_hf.h"

#include <algorithm>
#include <filesystem>

#include "base/mapped_file.h"
#include "model/families/family.h"
#include "model/hf_fields.h"

namespace minfer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

json parse_object(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail_load(path, "invalid JSON: {}", e.what());
  }
  if (!j.is_object()) fail_load(path, "invalid config: the JSON is not an object");
  return j;
}

std::string supported_architectures() {
  std::string out = "supported:";
  for (const Family* family : families())
    for (const HfModelType& t : family->hf_model_types) out += fmt::format(" {} ({}),", t.model_type, t.hf_class);
  out.pop_back();
  return out;
}

// The family of the config's model_type (or, without one, of its class) and the model type it matched; a class that
// contradicts the model type is refused too.
std::pair<const Family*, const HfModelType*> find_family(const HfFields& f) {
  std::string arch_class;
  if (const json* a = f.get("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      fail_load(f.path(), "field \"architectures\" must be a list of class names, got {}", a->dump());
    arch_class = (*a)[0].get<std::string>();
  }
  const std::string model_type = f.string("model_type", "");
  for (const Family* family : families()) {
    for (const HfModelType& t : family->hf_model_types) {
      if (model_type.empty() ? arch_class != t.hf_class : model_type != t.model_type) continue;
      if (!arch_class.empty() && arch_class != t.hf_class)
        fail_load(f.path(), "unsupported architecture class '{}' for model_type '{}' ({})", arch_class, model_type,
                  supported_architectures());
      return {family, &t};
    }
  }
  fail_load(f.path(), "unsupported architecture '{}' ({})", model_type.empty() ? arch_class : model_type,
            supported_architectures());
}

// A multimodal config (Qwen3.5's Qwen3_5ForConditionalGeneration) keeps the language model's fields in text_config:
// those, over the top level's (tie_word_embeddings and the special ids may sit there), without the vision tower's.
json with_text_config(const json& top, const std::string& path) {
  const auto text = top.find("text_config");
  if (text == top.end() || text->is_null()) return top;
  if (!text->is_object()) fail_load(path, "field \"text_config\" must be an object, got {}", text->dump());
  json merged = top;
  merged.erase("text_config");
  merged.erase("vision_config");
  for (const auto& [key, value] : text->items())
    if (key != "model_type" && key != "architectures") merged[key] = value;
  return merged;
}

DType parse_torch_dtype(const HfFields& f) {
  // Newer transformers write "dtype", older "torch_dtype".
  const std::string name = f.string("torch_dtype", f.string("dtype", "float32"));
  if (name == "float32") return DType::F32;
  if (name == "float16") return DType::F16;
  if (name == "bfloat16") return DType::BF16;
  fail_load(f.path(), "unsupported torch_dtype '{}' (supported: float32, float16, bfloat16)", name);
}

// The fields every family has: shapes, norms' epsilon, RoPE, tied embeddings, biases.
void read_common_fields(const HfFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  // LFM2's config.json names it block_ff_dim (which transformers prefers when both are there); a model whose every
  // MLP is experts may have none (Qwen3.5-MoE: the family sets it).
  c.intermediate_size = f.integer(f.get("block_ff_dim") ? "block_ff_dim" : "intermediate_size",
                                  f.get("moe_intermediate_size") ? std::optional<int64_t>(0) : std::nullopt);
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  if (f.get("head_dim") == nullptr && c.num_heads > 0 && c.hidden_size % c.num_heads != 0)
    fail_load(f.path(),
              "invalid config: num_attention_heads ({}) does not divide hidden_size ({}) and there is no head_dim",
              c.num_heads, c.hidden_size);
  c.head_dim = f.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);  // the default of both LlamaConfig and Qwen2Config
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(f.get("rope_scaling"), f.path());
  if (c.rope_scaling.type == "yarn" && c.rope_scaling.original_max_position_embeddings == 0)
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  c.rope_style = kernels::RopeStyle::kNeox;  // HF checkpoints store Q/K rows for rotate_half
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_bias = f.boolean("attention_bias", false);
  if (f.boolean("mlp_bias", false)) fail_load(f.path(), "unsupported: mlp_bias = true (MLP biases)");
}

void read_special_ids(const HfFields& f, ModelConfig& c) {
  const std::vector<int32_t> bos = f.ids("bos_token_id");
  if (bos.size() > 1) fail_load(f.path(), "field \"bos_token_id\" must be a single token id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = f.ids("eos_token_id");
}

}  // namespace

ModelConfig parse_hf_config(const std::string& config_text, const std::string& config_path,
                            const std::string& generation_config_text, const std::string& generation_path) {
  const json top = parse_object(config_text, config_path);
  const auto [family, model_type] = find_family(HfFields(top, config_path));
  const json j = with_text_config(top, config_path);
  const HfFields f(j, config_path);
  ModelConfig c;
  c.arch = family->name;
  read_common_fields(f, c);
  if (family->read_hf) family->read_hf(f, model_type->model_type, c);
  // A family with another activation reads its own field and sets hidden_act.
  if (const std::string act = f.string("hidden_act", "silu"); act != "silu" && c.hidden_act == Activation::kSilu)
    fail_load(config_path, "unsupported hidden_act '{}' (supported: silu)", act);
  c.dtype = parse_torch_dtype(f);
  read_special_ids(f, c);
  if (!generation_config_text.empty()) {
    const json g = parse_object(generation_config_text, generation_path);
    for (int32_t id : HfFields(g, generation_path).ids("eos_token_id"))
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
        c.eos_token_ids.push_back(id);
  }
  c.validate(config_path);
  return c;
}

ModelConfig read_hf_config(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::is_regular_file(config_path))
    fail_load(dir, "missing config.json (a Hugging Face model directory needs config.json beside its .safetensors)");
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  const std::string gen_text = fs::is_regular_file(gen_path) ? read_text_file(gen_path) : "";
  return parse_hf_config(read_text_file(config_path), config_path, gen_text, gen_path);
}

}  // namespace minfer
