// Phi-3 / 3.5: the Llama block (model/families/llama.cpp) whose q/k/v are stored as one matrix and gate/up as another
// (split at load, loaders/weight_check.cpp), with partial rotary embedding, longrope in its RoPE table and a sliding
// window on every layer when set.
#include <cmath>

#include "model/families/family_file.h"

namespace minfer {
namespace {

// longrope's context ratio and attention factor (transformers' _compute_longrope_parameters: original_max_position_
// embeddings is the pretrained context, max_position_embeddings the extended one, attention_factor
// sqrt(1 + ln(ratio) / ln(original)) by default).
void read_hf(const HfFields& f, std::string_view, ModelConfig& c) {
  const double partial = f.number("partial_rotary_factor", 1.0);
  if (!(partial > 0 && partial <= 1)) fail_load(f.path(), "invalid partial_rotary_factor {}", partial);
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

// Its window (which llama.cpp switches off, applied here as transformers applies it) and longrope, whose factors
// llama.cpp's converter stores as the rope_factors_long / rope_factors_short tensors.
void read_gguf(const GgufFile& g, const std::string&, ModelConfig& c) {
  c.sliding_window = g.find_int("phi3.attention.sliding_window").value_or(0);
  if (g.find_tensor("rope_factors_long.weight") == nullptr) return;
  c.rope_scaling.type = "longrope";
  c.rope_scaling.original_max_position_embeddings =
      g.find_int("phi3.rope.scaling.original_context_length").value_or(c.max_position_embeddings);
  c.rope_scaling.attention_factor = g.find_float("phi3.rope.scaling.attn_factor").value_or(1.0);
  for (auto [name, dst] : {std::pair{"rope_factors_long.weight", &c.rope_scaling.long_factor},
                           std::pair{"rope_factors_short.weight", &c.rope_scaling.short_factor}}) {
    const GgufTensorInfo* info = g.find_tensor(name);
    if (info == nullptr) fail_load(g.path(), "missing tensor '{}' (longrope has long and short factors)", name);
    const Tensor t = g.tensor(*info);
    if (t.dtype != DType::F32 || t.rank() != 1)
      fail_load(g.path(), "tensor '{}' must be a vector of f32, got {} {}", name, dtype_name(t.dtype),
                t.shape_string());
    dst->assign(t.as<float>(), t.as<float>() + t.dim(0));
  }
}

// The window, which llama.cpp switches off and minfer applies (the same numbers within it); longrope's factors and
// keys are the exporter's (RoPE scaling is not the family's).
void write_keys(const ModelConfig& c, const std::string&, GgufWriter& w) {
  if (c.sliding_window > 0) w.set_u32("phi3.attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
}

// GGUF's ffn_up is gate and up, not up alone; q, k and v are written apart (llama.cpp reads either form).
constexpr FusedWeight kFused[] = {{"w_gate_up", "w_gate", "w_up"}};

constexpr WeightNameRow kNames[] = {
    {"wqkv", "self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"w_gate_up", "mlp.gate_up_proj.weight", "ffn_up.weight"},
};

// The checkpoint's fused tensors in place of each layer's q/k/v and gate/up.
void test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    const std::string_view n = w.name;
    if (n.ends_with("k_proj.weight") || n.ends_with("v_proj.weight") || n.ends_with("mlp.up_proj.weight")) continue;
    if (n.ends_with("q_proj.weight")) {
      out.push_back({std::string(n.substr(0, n.size() - 13)) + "qkv_proj.weight", {q + 2 * kv, c.hidden_size}});
    } else if (n.ends_with("mlp.gate_proj.weight")) {
      out.push_back(
          {std::string(n.substr(0, n.size() - 16)) + "gate_up_proj.weight", {2 * c.intermediate_size, c.hidden_size}});
    } else {
      out.push_back(std::move(w));
    }
  }
  weights = std::move(out);
}

// Phi3ForCausalLM (microsoft/Phi-3-mini-4k-instruct's config.json). tiny-phi3 adds partial_rotary_factor 0.5 and
// longrope (Phi-3.5-mini's form: original_max_position_embeddings 4096 of 131072, factors per rotated pair).
nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json j = test_config_base(p, x, "Phi3ForCausalLM", "4.40.2");
  j.update({{"attention_bias", false},
            {"embd_pdrop", 0.0},
            {"hidden_act", "silu"},
            {"original_max_position_embeddings", 4096},
            {"pad_token_id", nullptr},
            {"resid_pdrop", 0.0},
            {"rms_norm_eps", 1e-05},
            {"rope_scaling", nullptr},
            {"rope_theta", 10000.0},
            {"sliding_window", x.window(p)}});
  if (p.tiny) {
    j["partial_rotary_factor"] = 0.5;
    j["rope_scaling"] = {
        {"long_factor", {1.0, 1.25, 2.5, 6.0}}, {"short_factor", {1.0, 1.02, 1.1, 1.4}}, {"type", "longrope"}};
  }
  return j;
}

constexpr HfModelType kHfTypes[] = {{"phi3", "Phi3ForCausalLM"}};

// The real shape's 32k SentencePiece vocabulary replaced by a generated one of that size; the tiny sibling has what
// the larger Phi-3 / 3.5 / 4 configs add: GQA, half the head rotated, longrope.
// clang-format off
const TestPreset kPresets[] = {
    {.name = "phi3-mini", .model_type = "phi3", .tiny = false, .hidden = 3072, .intermediate = 8192, .layers = 32,
     .heads = 32, .kv_heads = 32, .vocab = 32064, .max_position_embeddings = 4096, .tied = false, .embed_std = 0.02,
     .weight_std = 0.02, .sliding_window = 2047, .bos = 1, .config_eos = {32000}, .generation_eos = {32000, 32001,
     32007}},
    {.name = "tiny-phi3", .model_type = "phi3", .tiny = true, .hidden = 64, .intermediate = 128, .layers = 2,
     .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 131072, .tied = false, .embed_std = 0.08,
     .weight_std = 0.16, .sliding_window = 2047},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kPhi3Family = {
    .name = "phi3", .hf_model_types = kHfTypes, .read_hf = read_hf, .gguf_arch = "phi3", .read_gguf = read_gguf,
    .layer_names = kNames, .build_graph = build_llama_graph,
    .gguf_export = {.arch = "phi3", .fused = kFused, .write_keys = write_keys},
    .test_presets = kPresets, .test_config = test_config, .test_hf_weights = test_hf_weights};
// clang-format on

}  // namespace minfer
