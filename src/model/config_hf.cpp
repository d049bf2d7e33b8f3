#include "model/config_hf.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/mapped_file.h"

namespace minfer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Typed access to config.json fields: a present field of the wrong type is an error naming it, an absent or
// null one takes the default.
class Fields {
 public:
  Fields(const json& j, const std::string& path) : j_(j), path_(path) {}

  const json* get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* v = get(key);
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
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail_load(path_, "field \"{}\" must be a number, got {}", key, v->dump());
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail_load(path_, "field \"{}\" must be true or false, got {}", key, v->dump());
    return v->get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail_load(path_, "field \"{}\" must be a string, got {}", key, v->dump());
    return v->get<std::string>();
  }
  // An id or a list of ids (eos_token_id is either).
  std::vector<int32_t> ids(const char* key) const {
    const json* v = get(key);
    std::vector<int32_t> out;
    if (v == nullptr) return out;
    auto one = [&](const json& x) {
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
  const json& j_;
  const std::string& path_;
};

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

// The Hugging Face model types read, with the class each one's config names (checked when given) and the family.
struct HfArchitecture {
  const char* model_type;
  const char* hf_class;
  Architecture arch;
};
constexpr HfArchitecture kHfArchitectures[] = {
    {"llama", "LlamaForCausalLM", Architecture::kLlama},
    {"mistral", "MistralForCausalLM", Architecture::kMistral},
    {"mixtral", "MixtralForCausalLM", Architecture::kMixtral},
    {"qwen2", "Qwen2ForCausalLM", Architecture::kQwen2},
    {"qwen3", "Qwen3ForCausalLM", Architecture::kQwen3},
    {"qwen3_moe", "Qwen3MoeForCausalLM", Architecture::kQwen3Moe},
    {"gemma2", "Gemma2ForCausalLM", Architecture::kGemma2},
    {"gemma3_text", "Gemma3ForCausalLM", Architecture::kGemma3},
    {"phi3", "Phi3ForCausalLM", Architecture::kPhi3},
    {"smollm3", "SmolLM3ForCausalLM", Architecture::kSmolLM3},
    {"olmo2", "Olmo2ForCausalLM", Architecture::kOlmo2},
    {"olmo3", "Olmo3ForCausalLM", Architecture::kOlmo2},
    {"granite", "GraniteForCausalLM", Architecture::kGranite},
    {"gpt_oss", "GptOssForCausalLM", Architecture::kGptOss},
};

std::string supported_architectures() {
  std::string out = "supported:";
  for (const HfArchitecture& a : kHfArchitectures) out += fmt::format(" {} ({}),", a.model_type, a.hf_class);
  out.pop_back();
  return out;
}

// The config's model_type (or, without one, its class) as a row of kHfArchitectures; a class that contradicts the
// model type is refused too.
const HfArchitecture& parse_architecture(const Fields& f, const std::string& path) {
  std::string arch_class;
  if (const json* a = f.get("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      fail_load(path, "field \"architectures\" must be a list of class names, got {}", a->dump());
    arch_class = (*a)[0].get<std::string>();
  }
  const std::string model_type = f.string("model_type", "");
  const HfArchitecture* found = nullptr;
  for (const HfArchitecture& a : kHfArchitectures)
    if (model_type.empty() ? arch_class == a.hf_class : model_type == a.model_type) found = &a;
  if (found == nullptr)
    fail_load(path, "unsupported architecture '{}' ({})", model_type.empty() ? arch_class : model_type,
              supported_architectures());
  if (!arch_class.empty() && arch_class != found->hf_class)
    fail_load(path, "unsupported architecture class '{}' for model_type '{}' ({})", arch_class, model_type,
              supported_architectures());
  return *found;
}

RopeScaling parse_rope_scaling(const json* rs, const std::string& path) {
  RopeScaling out;
  if (rs == nullptr) return out;
  if (!rs->is_object()) fail_load(path, "field \"rope_scaling\" must be an object or null, got {}", rs->dump());
  Fields f(*rs, path);
  // transformers renamed "type" to "rope_type"; both appear in the wild.
  const std::string type = f.string("rope_type", f.string("type", "default"));
  if (type == "default") return out;
  if (type == "longrope" || type == "su") {  // "su": Phi-3's first name for it
    out.type = "longrope";
    auto factors = [&](const char* key) {
      std::vector<float> v;
      const json* a = f.get(key);
      if (a == nullptr || !a->is_array()) fail_load(path, "rope_scaling.{} must be a list of numbers", key);
      for (const json& x : *a) {
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

// Which layers use the sliding window: config.json's layer_types ("sliding_attention" / "full_attention") when
// present, else `sliding(i)` (the family's rule from older config fields).
template <typename Rule>
void read_layer_types(const Fields& f, const std::string& path, ModelConfig& c, Rule sliding) {
  c.layer_sliding.clear();
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array()) fail_load(path, "field \"layer_types\" must be a list, got {}", types->dump());
    for (const json& t : *types) {
      if (t != "sliding_attention" && t != "full_attention")
        fail_load(path, "unsupported layer type {} in \"layer_types\" (sliding_attention, full_attention)", t.dump());
      c.layer_sliding.push_back(t == "sliding_attention");
    }
    return;
  }
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_sliding.push_back(sliding(i));
}

// Sliding windows of the Llama-block families: Mistral's on every layer (sliding_window, null = none); Qwen2's and
// Qwen3's, with use_sliding_window, on the layers from max_window_layers on (transformers' layer_types default).
void read_llama_block_window(const Fields& f, const std::string& path, ModelConfig& c) {
  if (c.arch == Architecture::kMistral) {
    c.sliding_window = f.integer("sliding_window", 0);
    return;
  }
  if (c.arch == Architecture::kMixtral) {
    c.sliding_window = f.integer("sliding_window", 0);
    return;
  }
  if ((c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe ||
       c.arch == Architecture::kSmolLM3) &&
      f.boolean("use_sliding_window", false)) {
    c.sliding_window = f.integer("sliding_window", 0);
    const int64_t first = f.integer("max_window_layers", c.num_layers);
    read_layer_types(f, path, c, [&](int64_t i) { return i >= first; });
  } else if (c.arch == Architecture::kLlama && f.get("sliding_window") != nullptr) {
    fail_load(path, "unsupported: sliding_window on a llama model (LlamaForCausalLM has no sliding window)");
  }
}

// SmolLM3: the Llama block whose layers marked 0 in no_rope_layers attend without positional encoding (NoPE);
// without the list, every no_rope_layer_interval-th layer (transformers' default rule, interval 4).
void read_smollm3_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  if (const json* list = f.get("no_rope_layers")) {
    if (!list->is_array()) fail_load(path, "field \"no_rope_layers\" must be a list of 0/1, got {}", list->dump());
    for (const json& x : *list) {
      if (x != 0 && x != 1) fail_load(path, "field \"no_rope_layers\" must hold 0 or 1 per layer, got {}", x.dump());
      c.layer_rope.push_back(x == 1);
    }
    return;
  }
  const int64_t interval = f.integer("no_rope_layer_interval", 4);
  if (interval <= 0) fail_load(path, "field \"no_rope_layer_interval\" must be positive, got {}", interval);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_rope.push_back((i + 1) % interval != 0);
}

// OLMo 2 / OLMo 3: post norms only and q/k norms over the whole projection; OLMo 3 (model_type olmo3) slides a
// window (4096 by default) on the layers layer_types marks (by default all but every fourth), which rotate with the
// unscaled RoPE (transformers' Olmo3 gives them a rotary embedding of rope_type "default").
void read_olmo_fields(const Fields& f, const std::string& path, ModelConfig& c, bool olmo3) {
  c.qk_norm = true;
  c.qk_norm_full_width = true;
  c.post_norms_only = true;
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-5);  // Olmo2Config's and Olmo3Config's default
  if (!olmo3) return;
  c.sliding_window = f.integer("sliding_window", 4096);
  read_layer_types(f, path, c, [](int64_t i) { return (i + 1) % 4 != 0; });
  c.rope_local_theta = c.rope_theta;
}

// Granite: the Llama block with four multipliers (GraniteConfig's defaults 1): the embeddings', the attention
// scores' (in place of 1/sqrt(head_dim)), each block output's and the logits' divisor.
void read_granite_fields(const Fields& f, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(f.number("embedding_multiplier", 1.0));
  c.attention_scale = f.number("attention_multiplier", 1.0);
  c.residual_multiplier = f.number("residual_multiplier", 1.0);
  c.logits_scaling = f.number("logits_scaling", 1.0);
}

// Phi-3 / 3.5: partial rotary embedding, a sliding window on every layer when set, and longrope's context ratio and
// attention factor (transformers' _compute_longrope_parameters: original_max_position_embeddings is the pretrained
// context, max_position_embeddings the extended one, attention_factor sqrt(1 + ln(ratio) / ln(original)) by default).
void read_phi3_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  const double partial = f.number("partial_rotary_factor", 1.0);
  if (!(partial > 0 && partial <= 1)) fail_load(path, "invalid partial_rotary_factor {}", partial);
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  c.sliding_window = f.integer("sliding_window", 0);
  RopeScaling& s = c.rope_scaling;
  if (s.type != "longrope") return;
  s.original_max_position_embeddings = f.integer("original_max_position_embeddings", c.max_position_embeddings);
  if (s.attention_factor == 0.0) {
    const double ratio =
        static_cast<double>(c.max_position_embeddings) / static_cast<double>(s.original_max_position_embeddings);
    const double log_original = std::log(static_cast<double>(s.original_max_position_embeddings));
    s.attention_factor = ratio <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(ratio) / log_original);
  }
}

// Mixture of experts. Qwen3-MoE: num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob, dense
// layers in mlp_only_layers or off the decoder_sparse_step grid. Mixtral: num_local_experts of intermediate_size,
// always renormalised over the chosen two. Router aux-loss fields only matter for training and are ignored.
void read_moe_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  if (c.arch == Architecture::kMixtral) {
    c.num_experts = f.integer("num_local_experts");
    c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    return;
  }
  c.num_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.norm_topk_prob = f.boolean("norm_topk_prob", false);
  const int64_t step = f.integer("decoder_sparse_step", 1);
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  if (const json* only = f.get("mlp_only_layers")) {
    if (!only->is_array()) fail_load(path, "field \"mlp_only_layers\" must be a list of layer indices");
    for (const json& i : *only) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.num_layers)
        fail_load(path, "field \"mlp_only_layers\" holds {}, not a layer index", i.dump());
      dense[i.get<size_t>()] = true;
    }
  }
  bool any_dense = false;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (step <= 0 || (i + 1) % step != 0) dense[static_cast<size_t>(i)] = true;  // transformers' sparse-step rule
    any_dense = any_dense || dense[static_cast<size_t>(i)];
  }
  if (any_dense) c.layer_dense = dense;
  if (f.integer("shared_expert_intermediate_size", 0) > 0)
    fail_load(path, "unsupported: shared_expert_intermediate_size (shared experts, Qwen2-MoE style)");
}

// gpt-oss (transformers' GptOssConfig and modelling): q/k/v/o biases, per-head attention sinks, a 128-position window
// on the layers layer_types marks (by default every other one from the first), YaRN (the class default when the
// config has no rope_scaling), and num_local_experts experts of intermediate_size with biases, gated by the clamped
// SwiGLU (limit 7, alpha 1.702, fixed in the modelling code) and weighted by a softmax over the chosen experts'
// logits (the same numbers as the renormalised top-k of a full softmax).
void read_gpt_oss_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  c.attention_bias = c.o_bias = c.attention_sinks = true;
  c.num_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 4);
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = c.moe_bias = c.moe_swiglu_oai = true;
  if (const double limit = f.number("swiglu_limit", 7.0); limit != 7.0)
    fail_load(path, "unsupported swiglu_limit {} (gpt-oss's experts clamp at 7)", limit);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-5);
  c.sliding_window = f.integer("sliding_window", 128);
  read_layer_types(f, path, c, [](int64_t i) { return i % 2 == 0; });
  if (f.get("rope_scaling") == nullptr) {
    RopeScaling& s = c.rope_scaling;
    s.type = "yarn";
    s.factor = 32.0;
    s.truncate = false;
    s.original_max_position_embeddings = 4096;
    s.attention_factor = 0.1 * std::log(s.factor) + 1.0;
  }
}

// What Gemma 2 and Gemma 3 share: GELU(tanh) MLP, sandwich norms with (1 + w) weights, sqrt(hidden) embedding
// scale, query_pre_attn_scalar, tied embeddings by default.
void read_gemma_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  c.hidden_act = Activation::kGeluTanh;
  if (const std::string act = f.string("hidden_activation", "gelu_pytorch_tanh"); act != "gelu_pytorch_tanh")
    fail_load(path, "unsupported hidden_activation '{}' (supported: gelu_pytorch_tanh)", act);
  if (f.boolean("use_bidirectional_attention", false))
    fail_load(path, "unsupported: use_bidirectional_attention = true (an encoder; minfer runs causal decoders)");
  c.sandwich_norms = true;
  c.norm_weight_plus_one = true;
  c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  c.attention_scale = 1.0 / std::sqrt(f.number("query_pre_attn_scalar", static_cast<double>(c.head_dim)));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
}

// Gemma 2: soft-capping of scores and logits (Gemma2Config's defaults 50 and 30 when absent, none when null), a
// 4096-position window on every other layer from the first (layer_types when given), one RoPE base for all layers.
void read_gemma2_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  read_gemma_fields(f, path, c);
  c.attn_softcap = f.number_or_none("attn_logit_softcapping", 50.0);
  c.final_softcap = f.number_or_none("final_logit_softcapping", 30.0);
  c.sliding_window = f.integer("sliding_window", 4096);
  read_layer_types(f, path, c, [](int64_t i) { return i % 2 == 0; });
}

// Gemma 3 (text): Gemma's block with q/k norms, optional soft-capping, and local sliding-window layers beside global
// ones, each kind with its own RoPE base (rope_local_base_freq, or transformers 5's rope_parameters per layer type).
void read_gemma3_fields(const Fields& f, const std::string& path, ModelConfig& c) {
  read_gemma_fields(f, path, c);
  c.qk_norm = true;
  c.attn_softcap = f.number("attn_logit_softcapping", 0.0);
  c.final_softcap = f.number("final_logit_softcapping", 0.0);
  c.sliding_window = f.integer("sliding_window", 0);
  c.rope_local_theta = f.number("rope_local_base_freq", 10000.0);
  // Older configs: every pattern-th layer is global (transformers' sliding_window_pattern, default 6).
  const int64_t pattern = f.integer("sliding_window_pattern", f.integer("_sliding_window_pattern", 6));
  read_layer_types(f, path, c, [&](int64_t i) { return pattern <= 0 || (i + 1) % pattern != 0; });
  if (const json* params = f.get("rope_parameters")) {
    if (!params->is_object()) fail_load(path, "field \"rope_parameters\" must be an object, got {}", params->dump());
    const Fields p(*params, path);
    if (const json* full = p.get("full_attention")) {
      c.rope_theta = Fields(*full, path).number("rope_theta", c.rope_theta);
      c.rope_scaling = parse_rope_scaling(full, path);
    }
    if (const json* local = p.get("sliding_attention")) {
      const Fields l(*local, path);
      if (const std::string t = l.string("rope_type", "default"); t != "default")
        fail_load(path, "unsupported rope_parameters.sliding_attention.rope_type '{}' (supported: default)", t);
      c.rope_local_theta = l.number("rope_theta", c.rope_local_theta);
    }
  }
}

DType parse_torch_dtype(const Fields& f, const std::string& path) {
  // Newer transformers write "dtype", older "torch_dtype".
  const std::string name = f.string("torch_dtype", f.string("dtype", "float32"));
  if (name == "float32") return DType::F32;
  if (name == "float16") return DType::F16;
  if (name == "bfloat16") return DType::BF16;
  fail_load(path, "unsupported torch_dtype '{}' (supported: float32, float16, bfloat16)", name);
}

}  // namespace

ModelConfig parse_hf_config(const std::string& config_text, const std::string& config_path,
                            const std::string& generation_config_text, const std::string& generation_path) {
  const json j = parse_object(config_text, config_path);
  const Fields f(j, config_path);
  ModelConfig c;
  const HfArchitecture& architecture = parse_architecture(f, config_path);
  c.arch = architecture.arch;
  const bool gemma = c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3;
  if (const std::string act = f.string("hidden_act", "silu"); act != "silu" && !gemma)
    fail_load(config_path, "unsupported hidden_act '{}' (supported: silu)", act);
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  if (f.get("head_dim") == nullptr && c.num_heads > 0 && c.hidden_size % c.num_heads != 0)
    fail_load(config_path,
              "invalid config: num_attention_heads ({}) does not divide hidden_size ({}) and there is "
              "no head_dim",
              c.num_heads, c.hidden_size);
  c.head_dim = f.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);  // the default of both LlamaConfig and Qwen2Config
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(f.get("rope_scaling"), config_path);
  if (c.rope_scaling.type == "yarn" && c.rope_scaling.original_max_position_embeddings == 0)
    c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  c.rope_style = kernels::RopeStyle::kNeox;  // HF checkpoints store Q/K rows for rotate_half
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  // Qwen2's attention always has q/k/v biases; Llama's only when attention_bias says so.
  c.attention_bias = c.arch == Architecture::kQwen2 ? true : f.boolean("attention_bias", false);
  if (f.boolean("mlp_bias", false)) fail_load(config_path, "unsupported: mlp_bias = true (MLP biases)");
  c.qk_norm = c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe;
  if (c.arch == Architecture::kGemma2) {
    read_gemma2_fields(f, config_path, c);
  } else if (c.arch == Architecture::kGemma3) {
    read_gemma3_fields(f, config_path, c);
  } else if (c.arch == Architecture::kPhi3) {
    read_phi3_fields(f, config_path, c);
  } else if (c.arch == Architecture::kOlmo2) {
    read_olmo_fields(f, config_path, c, std::string_view(architecture.model_type) == "olmo3");
  } else if (c.arch == Architecture::kGptOss) {
    read_gpt_oss_fields(f, config_path, c);
  } else {
    if (c.arch == Architecture::kQwen3Moe || c.arch == Architecture::kMixtral) read_moe_fields(f, config_path, c);
    if (c.arch == Architecture::kSmolLM3) read_smollm3_fields(f, config_path, c);
    if (c.arch == Architecture::kGranite) read_granite_fields(f, c);
    read_llama_block_window(f, config_path, c);
  }
  c.dtype = parse_torch_dtype(f, config_path);
  const std::vector<int32_t> bos = f.ids("bos_token_id");
  if (bos.size() > 1) fail_load(config_path, "field \"bos_token_id\" must be a single token id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = f.ids("eos_token_id");

  if (!generation_config_text.empty()) {
    const json g = parse_object(generation_config_text, generation_path);
    for (int32_t id : Fields(g, generation_path).ids("eos_token_id"))
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
