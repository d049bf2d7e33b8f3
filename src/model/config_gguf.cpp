#include "model/config_gguf.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace minfer {
namespace {

// A special-token id from tokenizer.ggml.*, or -1 when absent or unset (llama.cpp writes 0xffffffff for "none").
int64_t special_id(const GgufFile& g, const char* key, int64_t vocab) {
  const auto v = g.find_int(key);
  return v && *v >= 0 && *v < vocab ? *v : -1;
}

// Which layers slide, as llama.cpp's load_swa_pattern reads `key`: an array of per-layer flags, or a period (else
// `period`) whose last layer in each run is global.
void read_window_pattern(const GgufFile& g, const std::string& key, int64_t period, ModelConfig& c) {
  const GgufValue* pattern = g.find(key);
  if (pattern != nullptr && pattern->type == GgufType::ARRAY) {
    for (int64_t flag : g.get_int_array(key)) c.layer_sliding.push_back(flag != 0);
    return;
  }
  period = g.find_int(key).value_or(period);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_sliding.push_back(period == 0 || i % period < period - 1);
}

// gpt-oss as llama.cpp reads it (src/models/openai-moe.cpp): q/k/v/o biases, sinks, a window on every other layer
// from the first (pattern 2), its experts (biased, clamped SwiGLU, softmax over the chosen ones), and the model's
// one RoPE (YaRN-scaled) on every layer.
void read_gpt_oss_metadata(const GgufFile& g, ModelConfig& c) {
  c.attention_bias = c.o_bias = c.attention_sinks = true;
  c.moe_bias = c.moe_swiglu_oai = true;
  c.sliding_window = g.get_int("gpt-oss.attention.sliding_window");
  read_window_pattern(g, "gpt-oss.attention.sliding_window_pattern", 2, c);
  if (const auto swa_base = g.find_float("gpt-oss.rope.freq_base_swa"); swa_base && *swa_base != c.rope_theta)
    fail_load(g.path(), "unsupported: gpt-oss.rope.freq_base_swa ({}) differs from the RoPE base ({})", *swa_base,
              c.rope_theta);
}

// Gemma 2 and Gemma 3 as llama.cpp reads them (src/models/gemma2.cpp, gemma3.cpp): norms stored as 1 + w already,
// the window and its layer pattern (an array of per-layer flags, or a period whose last layer is global: 2 for
// Gemma 2, 6 for Gemma 3), and llama.cpp's attention scale: 1/sqrt(head_dim), except for the 27B models (46 and 62
// layers), which scale by 1/sqrt(hidden / heads), as their query_pre_attn_scalar says. Gemma 2 always soft-caps
// (50 and 30 unless the file says otherwise) and has a 4096-position window by default; Gemma 3 soft-caps logits
// when the file says so and rotates its local layers with their own base (10000 by default).
void read_gemma_metadata(const GgufFile& g, ModelConfig& c) {
  const bool gemma2 = c.arch == Architecture::kGemma2;
  const std::string a = gemma2 ? "gemma2." : "gemma3.";
  c.hidden_act = Activation::kGeluTanh;
  c.qk_norm = !gemma2;
  c.sandwich_norms = true;
  c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  const bool is_27b = c.num_layers == (gemma2 ? 46 : 62);
  c.attention_scale = is_27b ? 1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads))
                             : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.attn_softcap = gemma2 ? g.find_float(a + "attn_logit_softcapping").value_or(50.0) : 0.0;
  c.final_softcap = g.find_float(a + "final_logit_softcapping").value_or(gemma2 ? 30.0 : 0.0);
  c.sliding_window = g.find_int(a + "attention.sliding_window").value_or(gemma2 ? 4096 : 0);
  if (c.sliding_window <= 0) return;
  if (!gemma2) c.rope_local_theta = g.find_float(a + "rope.freq_base_swa").value_or(10000.0);
  read_window_pattern(g, a + "attention.sliding_window_pattern", gemma2 ? 2 : 6, c);
}

// OLMo 3 as llama.cpp reads it (src/models/olmo2.cpp): a window when the file has one, on the layers of its pattern
// (an array of flags, or a period whose last layer is global, 4 by default), rotating without the RoPE scaling and
// with rope.freq_base_swa when given (else the model's base).
void read_olmo3_window(const GgufFile& g, ModelConfig& c) {
  c.sliding_window = g.find_int("olmo2.attention.sliding_window").value_or(0);
  if (c.sliding_window <= 0) return;
  c.rope_local_theta = g.find_float("olmo2.rope.freq_base_swa").value_or(c.rope_theta);
  read_window_pattern(g, "olmo2.attention.sliding_window_pattern", 4, c);
}

// Phi-3: its window (which llama.cpp switches off, applied here as transformers applies it) and longrope, whose
// factors arrive as the rope_factors_long / rope_factors_short tensors (see the loader).
void read_phi3_metadata(const GgufFile& g, ModelConfig& c) {
  c.sliding_window = g.find_int("phi3.attention.sliding_window").value_or(0);
  if (g.find_tensor("rope_factors_long.weight") == nullptr) return;
  c.rope_scaling.type = "longrope";
  c.rope_scaling.original_max_position_embeddings =
      g.find_int("phi3.rope.scaling.original_context_length").value_or(c.max_position_embeddings);
  c.rope_scaling.attention_factor = g.find_float("phi3.rope.scaling.attn_factor").value_or(1.0);
  // llama.cpp's converter stores the config's long_factor / short_factor as these tensors.
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

}  // namespace

ModelConfig read_gguf_config(const GgufFile& g) {
  const std::string& path = g.path();
  const std::string arch = g.get_string("general.architecture");
  ModelConfig c;
  if (arch == "llama") {
    c.arch = Architecture::kLlama;
    c.rope_style = kernels::RopeStyle::kInterleaved;
  } else if (arch == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.rope_style = kernels::RopeStyle::kNeox;
  } else if (arch == "qwen3") {
    c.arch = Architecture::kQwen3;
    c.rope_style = kernels::RopeStyle::kNeox;
    c.qk_norm = true;
  } else if (arch == "smollm3") {
    c.arch = Architecture::kSmolLM3;  // written by llama.cpp's LlamaModel converter: q/k rows interleaved
    c.rope_style = kernels::RopeStyle::kInterleaved;
  } else if (arch == "granite") {  // written by llama.cpp's LlamaModel converter: q/k rows interleaved
    c.arch = Architecture::kGranite;
    c.rope_style = kernels::RopeStyle::kInterleaved;
  } else if (arch == "olmo2") {  // OLMo 2 and OLMo 3
    c.arch = Architecture::kOlmo2;
    c.rope_style = kernels::RopeStyle::kNeox;
    c.qk_norm = c.qk_norm_full_width = c.post_norms_only = true;
  } else if (arch == "gemma2") {
    c.arch = Architecture::kGemma2;
    c.rope_style = kernels::RopeStyle::kNeox;
  } else if (arch == "gemma3") {
    c.arch = Architecture::kGemma3;
    c.rope_style = kernels::RopeStyle::kNeox;
  } else if (arch == "phi3") {
    c.arch = Architecture::kPhi3;
    c.rope_style = kernels::RopeStyle::kNeox;
  } else if (arch == "gpt-oss") {
    c.arch = Architecture::kGptOss;
    c.rope_style = kernels::RopeStyle::kNeox;
  } else if (arch == "qwen3moe") {
    c.arch = Architecture::kQwen3Moe;
    c.rope_style = kernels::RopeStyle::kNeox;
    c.qk_norm = true;
  } else {
    fail_load(path,
              "unsupported architecture '{}' (general.architecture; supported: llama, qwen2, qwen3, qwen3moe, "
              "gemma2, gemma3, phi3, smollm3, olmo2, granite, gpt-oss)",
              arch);
  }
  auto key = [&](const char* suffix) { return arch + "." + suffix; };

  c.hidden_size = g.get_int(key("embedding_length"));
  c.num_layers = g.get_int(key("block_count"));
  c.intermediate_size = g.get_int(key("feed_forward_length"));
  c.num_heads = g.get_int(key("attention.head_count"));
  c.num_kv_heads = g.find_int(key("attention.head_count_kv")).value_or(c.num_heads);
  if (c.num_heads <= 0) fail_load(path, "invalid metadata: {} = {}", key("attention.head_count"), c.num_heads);
  c.head_dim = g.find_int(key("attention.key_length")).value_or(c.hidden_size / c.num_heads);
  if (const auto vlen = g.find_int(key("attention.value_length")); vlen && *vlen != c.head_dim)
    fail_load(path, "unsupported: {} ({}) differs from the key length ({})", key("attention.value_length"), *vlen,
              c.head_dim);
  if (const auto rot = g.find_int(key("rope.dimension_count")); rot && *rot != c.head_dim) c.rotary_dim = *rot;
  c.max_position_embeddings = g.find_int(key("context_length")).value_or(2048);
  c.rms_norm_eps = g.find_float(key("attention.layer_norm_rms_epsilon")).value_or(1e-5);
  c.rope_theta = g.find_float(key("rope.freq_base")).value_or(10000.0);

  // Linear scaling is in metadata; Llama 3 scaling arrives as the rope_freqs.weight tensor (see the loader).
  const std::string scaling = g.find_string(key("rope.scaling.type")).value_or("none");
  if (scaling == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = g.get_float(key("rope.scaling.factor"));
  } else if (scaling == "yarn") {
    // llama.cpp's converter writes the factor, the original context and, when the config has them, the betas and
    // the attention factor (else transformers' default, 0.1 ln(factor) + 1, which llama.cpp computes too).
    RopeScaling& s = c.rope_scaling;
    s.type = "yarn";
    s.factor = g.get_float(key("rope.scaling.factor"));
    s.original_max_position_embeddings =
        g.find_int(key("rope.scaling.original_context_length")).value_or(c.max_position_embeddings);
    s.beta_fast = g.find_float(key("rope.scaling.yarn_beta_fast")).value_or(32.0);
    s.beta_slow = g.find_float(key("rope.scaling.yarn_beta_slow")).value_or(1.0);
    s.attention_factor = g.find_float(key("rope.scaling.yarn_attn_factor"))
                             .value_or(s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0);
  } else if (scaling != "none") {
    fail_load(path, "unsupported {} '{}' (supported: none, linear, yarn)", key("rope.scaling.type"), scaling);
  }
  if (const auto lin = g.find_float(key("rope.scale_linear")); lin && *lin != 1.0) {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = *lin;
  }

  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (g.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int64_t>(g.find("tokenizer.ggml.tokens")->array_count);
  } else if (const auto n = g.find_int(key("vocab_size"))) {
    c.vocab_size = *n;
  } else if (embd != nullptr) {
    c.vocab_size = embd->shape.front();
  } else {
    fail_load(path, "missing tensor 'token_embd.weight'");
  }
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = c.arch == Architecture::kQwen2 || g.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3) read_gemma_metadata(g, c);
  if (c.arch == Architecture::kPhi3) read_phi3_metadata(g, c);
  if (c.arch == Architecture::kOlmo2) read_olmo3_window(g, c);
  if (c.arch == Architecture::kGptOss) read_gpt_oss_metadata(g, c);
  if (c.arch == Architecture::kGranite) {
    // llama.cpp's keys (src/models/granite.cpp): an attention scale of 0 or none means 1/sqrt(head_dim).
    c.embedding_scale = static_cast<float>(g.find_float(key("embedding_scale")).value_or(0.0));
    c.attention_scale = g.find_float(key("attention.scale")).value_or(0.0);
    c.residual_multiplier = g.find_float(key("residual_scale")).value_or(1.0);
    c.logits_scaling = g.get_float(key("logit_scale"));
  }
  // SmolLM3: llama.cpp has no key for the NoPE layers; every fourth has none (n_no_rope_layer_step = 4).
  if (c.arch == Architecture::kSmolLM3)
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_rope.push_back((i + 1) % 4 != 0);
  // Experts: Qwen3-MoE, and Mixtral, which llama.cpp's converter writes as llama with an expert count. llama.cpp
  // renormalises the chosen experts' probabilities for both (src/models/qwen3moe.cpp, llama.cpp), as Mixtral and
  // Qwen3-MoE's released configs (norm_topk_prob true) do.
  if (const auto experts = g.find_int(key("expert_count")); experts && *experts > 0) {
    if (c.arch == Architecture::kLlama) c.arch = Architecture::kMixtral;
    c.num_experts = *experts;
    c.num_experts_per_tok = g.get_int(key("expert_used_count"));
    c.moe_intermediate_size = g.find_int(key("expert_feed_forward_length")).value_or(c.intermediate_size);
    c.norm_topk_prob = true;
    if (g.find_int(key("expert_shared_count")).value_or(0) > 0)
      fail_load(path, "unsupported: {} > 0 (shared experts)", key("expert_shared_count"));
  }

  c.bos_token_id = static_cast<int32_t>(special_id(g, "tokenizer.ggml.bos_token_id", c.vocab_size));
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = static_cast<int32_t>(special_id(g, k, c.vocab_size));
    if (id >= 0 && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(id);
  }
  // The dtype of the weights proper; norms are f32 in every GGUF.
  if (const GgufTensorInfo* q = g.find_tensor("blk.0.attn_q.weight")) c.dtype = g.tensor(*q).dtype;
  c.validate(path);
  return c;
}

}  // namespace minfer
