#include "model/config_gguf.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/families/family.h"

namespace minfer {
namespace {

// A special-token id from tokenizer.ggml.*, or -1 when absent or unset (llama.cpp writes 0xffffffff for "none").
int64_t special_id(const GgufFile& g, const char* key, int64_t vocab) {
  const auto v = g.find_int(key);
  return v && *v >= 0 && *v < vocab ? *v : -1;
}

const Family& find_family(const GgufFile& g, const std::string& arch) {
  std::string supported;
  for (const Family* family : families()) {
    if (family->gguf_arch == nullptr) continue;
    if (arch == family->gguf_arch) return *family;
    supported += (supported.empty() ? "" : ", ") + std::string(family->gguf_arch);
  }
  fail_load(g.path(), "unsupported architecture '{}' (general.architecture; supported: {})", arch, supported);
}

// The hyper-parameters every architecture has, under "<arch>.".
void read_shape_keys(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  c.hidden_size = g.get_int(key("embedding_length"));
  c.num_layers = g.get_int(key("block_count"));
  // Optional only for MoE models (read_expert_keys): llama.cpp's converter writes none for a config without
  // intermediate_size (Qwen3.5-MoE's).
  // A per-layer list (Nemotron-H: 0 for its layers without an MLP) gives the widest; the family reads the list.
  const std::string ff_key = key("feed_forward_length");
  if (const GgufValue* ff = g.find(ff_key); ff != nullptr && ff->type == GgufType::ARRAY) {
    c.intermediate_size = 0;
    for (int64_t n : g.get_int_array(ff_key)) c.intermediate_size = std::max(c.intermediate_size, n);
  } else {
    c.intermediate_size = g.find_int(ff_key).value_or(0);
  }
  c.num_heads = g.get_int(key("attention.head_count"));
  // A per-layer list (LFM2: 0 for its convolution layers) gives the attention layers' count; the family reads the
  // list itself.
  const std::string kv_key = key("attention.head_count_kv");
  if (const GgufValue* kv = g.find(kv_key); kv != nullptr && kv->type == GgufType::ARRAY) {
    c.num_kv_heads = 0;
    for (int64_t n : g.get_int_array(kv_key)) c.num_kv_heads = std::max(c.num_kv_heads, n);
  } else {
    c.num_kv_heads = g.find_int(kv_key).value_or(c.num_heads);
  }
  if (c.num_heads <= 0) fail_load(g.path(), "invalid metadata: {} = {}", key("attention.head_count"), c.num_heads);
  c.head_dim = g.find_int(key("attention.key_length")).value_or(c.hidden_size / c.num_heads);
  if (const auto vlen = g.find_int(key("attention.value_length")); vlen && *vlen != c.head_dim)
    fail_load(g.path(), "unsupported: {} ({}) differs from the key length ({})", key("attention.value_length"), *vlen,
              c.head_dim);
  if (const auto rot = g.find_int(key("rope.dimension_count")); rot && *rot != c.head_dim) c.rotary_dim = *rot;
  c.max_position_embeddings = g.find_int(key("context_length")).value_or(2048);
  c.rms_norm_eps = g.find_float(key("attention.layer_norm_rms_epsilon")).value_or(1e-5);
  c.rope_theta = g.find_float(key("rope.freq_base")).value_or(10000.0);
}

// Linear scaling and YaRN are in metadata; Llama 3 scaling arrives as the rope_freqs.weight tensor (see the loader).
void read_rope_scaling_keys(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  const std::string scaling = g.find_string(key("rope.scaling.type")).value_or("none");
  RopeScaling& s = c.rope_scaling;
  if (scaling == "linear") {
    s.type = "linear";
    s.factor = g.get_float(key("rope.scaling.factor"));
  } else if (scaling == "yarn") {
    // llama.cpp's converter writes the factor, the original context and, when the config has them, the betas and
    // the attention factor (else transformers' default, 0.1 ln(factor) + 1, which llama.cpp computes too).
    s.type = "yarn";
    s.factor = g.get_float(key("rope.scaling.factor"));
    s.original_max_position_embeddings =
        g.find_int(key("rope.scaling.original_context_length")).value_or(c.max_position_embeddings);
    s.beta_fast = g.find_float(key("rope.scaling.yarn_beta_fast")).value_or(32.0);
    s.beta_slow = g.find_float(key("rope.scaling.yarn_beta_slow")).value_or(1.0);
    s.attention_factor = g.find_float(key("rope.scaling.yarn_attn_factor"))
                             .value_or(s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0);
  } else if (scaling != "none") {
    fail_load(g.path(), "unsupported {} '{}' (supported: none, linear, yarn)", key("rope.scaling.type"), scaling);
  }
  if (const auto lin = g.find_float(key("rope.scale_linear")); lin && *lin != 1.0) {
    s.type = "linear";
    s.factor = *lin;
  }
}

// Experts, under the same keys for every architecture that has them. llama.cpp renormalises the chosen experts'
// probabilities for each (src/models/qwen3moe.cpp, llama.cpp), as the released configs (norm_topk_prob) do.
void read_expert_keys(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  const auto experts = g.find_int(arch + ".expert_count");
  if (!experts || *experts <= 0) return;
  c.num_experts = *experts;
  c.num_experts_per_tok = g.get_int(arch + ".expert_used_count");
  c.moe_intermediate_size = g.find_int(arch + ".expert_feed_forward_length").value_or(c.intermediate_size);
  c.norm_topk_prob = true;
  c.shared_expert_intermediate_size = g.find_int(arch + ".expert_shared_feed_forward_length").value_or(0);
  if (c.shared_expert_intermediate_size == 0 && g.find_int(arch + ".expert_shared_count").value_or(0) > 0)
    c.shared_expert_intermediate_size = c.moe_intermediate_size;
  // No feed_forward_length (Qwen3.5-MoE): no dense MLP, every layer's is the experts' (as its HF config reads).
  if (c.intermediate_size == 0) c.intermediate_size = c.moe_intermediate_size;
}

// Vocabulary size from tokenizer.ggml.tokens (else {arch}.vocab_size, else the embedding's rows) and the special ids.
void read_vocab_keys(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  if (g.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int64_t>(g.find("tokenizer.ggml.tokens")->array_count);
  } else if (const auto n = g.find_int(arch + ".vocab_size")) {
    c.vocab_size = *n;
  } else if (const GgufTensorInfo* embd = g.find_tensor("token_embd.weight")) {
    c.vocab_size = embd->shape.front();
  } else {
    fail_load(g.path(), "missing tensor 'token_embd.weight'");
  }
  c.bos_token_id = static_cast<int32_t>(special_id(g, "tokenizer.ggml.bos_token_id", c.vocab_size));
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const auto id = static_cast<int32_t>(special_id(g, k, c.vocab_size));
    if (id >= 0 && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(id);
  }
}

}  // namespace

void read_window_pattern(const GgufFile& g, const std::string& key, int64_t period, ModelConfig& c) {
  const GgufValue* pattern = g.find(key);
  if (pattern != nullptr && pattern->type == GgufType::ARRAY) {
    for (int64_t flag : g.get_int_array(key)) c.layer_sliding.push_back(flag != 0);
    return;
  }
  period = g.find_int(key).value_or(period);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_sliding.push_back(period == 0 || i % period < period - 1);
}

void write_window_keys(const ModelConfig& c, const std::string& arch, GgufWriter& w) {
  w.set_u32(arch + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  std::vector<bool> pattern;
  for (int64_t i = 0; i < c.num_layers; ++i) pattern.push_back(c.is_sliding(i));
  w.set_bool_array(arch + ".attention.sliding_window_pattern", pattern);
}

ModelConfig read_gguf_config(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  const Family& family = find_family(g, arch);
  ModelConfig c;
  c.arch = family.name;
  c.rope_style = family.gguf_rope_style;
  read_shape_keys(g, arch, c);
  read_rope_scaling_keys(g, arch, c);
  read_vocab_keys(g, arch, c);
  read_expert_keys(g, arch, c);
  if (c.intermediate_size == 0) fail_load(g.path(), "missing metadata '{}.feed_forward_length'", arch);
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (family.read_gguf) family.read_gguf(g, arch, c);
  if (c.shared_expert_intermediate_size > 0 && !family.shared_experts)
    fail_load(g.path(), "unsupported: shared experts ({}.expert_shared_feed_forward_length) in a {} model", arch,
              family.name);
  // The dtype of the weights proper; norms are f32 in every GGUF.
  if (const GgufTensorInfo* q = g.find_tensor("blk.0.attn_q.weight")) c.dtype = g.tensor(*q).dtype;
  c.validate(g.path());
  return c;
}

}  // namespace minfer
