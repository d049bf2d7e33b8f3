// A model family is one registration (model/families/<family>.cpp): the Hugging Face model types and the GGUF
// architecture it reads, its config traits from each, its weight names, how `minfer quantize` writes it as GGUF, its
// graph builder and its test-model presets. The config readers, the loaders, the GGUF exporter, the graph compiler
// and the test-model writer look a family up here instead of switching on it, so adding a family touches its own
// file and one line of the registry (families/registry.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"

namespace minfer {

class GgufFile;
class GgufWriter;
class HfFields;
struct ModelWeights;
namespace graph {
class Graph;
}

// One weight's canonical name (model/model_weights.h) and its names in Hugging Face and GGUF checkpoints; "" where a
// format has no such tensor. Layer rows are relative to "layers.{i}." / "model.layers.{i}." / "blk.{i}.".
struct WeightNameRow {
  const char* canonical;
  const char* hf;
  const char* gguf;
};

// Tables of rows as one (a family that extends another's table).
template <size_t... N>
constexpr std::array<WeightNameRow, (N + ...)> concat_names(const WeightNameRow (&... tables)[N]) {
  std::array<WeightNameRow, (N + ...)> all{};
  size_t at = 0;
  ((std::copy(tables, tables + N, all.begin() + static_cast<std::ptrdiff_t>(at)), at += N), ...);
  return all;
}

// Hugging Face names of each expert's matrices: "<prefix><j>.<gate|up|down>" after the layer prefix.
struct HfExpertNames {
  const char* prefix;
  const char* gate;
  const char* up;
  const char* down;
};

// A config.json model_type and the class its "architectures" names.
struct HfModelType {
  const char* model_type;
  const char* hf_class;
};

// A test-model preset (`minfer make-test-model --preset`): a real model's shape, or a tiny sibling with random
// weights. Only the fields a family's config writer reads matter for it.
struct TestPreset {
  const char* name;
  const char* model_type;
  bool tiny;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab;  // vocab 0: the tokenizer's size
  int64_t max_position_embeddings;
  bool tied;
  // Std of the random embedding and of the other matrices. The real shapes use HF's initializer_range. The tiny
  // ones need about unit gain per layer (std ~ 1 / sqrt(hidden)), else greedy decoding of their 2-3 layers locks
  // onto one repeated token.
  double embed_std, weight_std;
  int64_t head_dim = 0;        // 0: hidden / heads
  int64_t sliding_window = 0;  // the window of the sliding layers
  int64_t sliding_period = 0;  // every sliding_period-th layer global (Gemma's local / global layers)
  int64_t experts = 0, experts_per_tok = 0, moe_intermediate = 0;
  int64_t no_rope_interval = 0;   // SmolLM3: every no_rope_interval-th layer has no positional encoding
  int64_t max_window_layers = 0;  // Qwen2 / Qwen3
  // Gated DeltaNet layers (Qwen3.5): key / value heads and their widths; every full_attention_interval-th layer
  // attends.
  int64_t linear_k_heads = 0, linear_v_heads = 0, linear_k_dim = 0, linear_v_dim = 0;
  int64_t full_attention_interval = 0;
  // The real model's special-token ids (unused by tiny presets, which take the generated tokenizer's).
  int64_t bos = -1;
  std::vector<int64_t> config_eos = {};
  std::vector<int64_t> generation_eos = {};
  bool qwen_tokenizer = false;  // generate a Qwen2-style tokenizer (ChatML specials) rather than a Llama 3-style one

  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden / heads; }
};

// What a family's test config writer gets besides the preset.
struct TestConfigContext {
  int64_t vocab = 0;
  int64_t bos = -1;
  std::vector<int64_t> config_eos;
  DType dtype = DType::F32;
  int64_t sliding_window = 0;  // --sliding-window: replaces the preset's window when > 0
  int64_t window(const TestPreset& p) const { return sliding_window > 0 ? sliding_window : p.sliding_window; }
};

// A weight the test-model writer generates: its Hugging Face name and shape.
struct HfTestWeight {
  std::string name;
  std::vector<int64_t> shape;
};

// A projection llama.cpp stores as one tensor that minfer splits at load: per layer, `first`'s rows then `second`'s
// (two canonical weights of equal shape) written as `fused`.
struct FusedWeight {
  const char* fused;
  const char* first;
  const char* second;
};

// How `minfer quantize` writes the family as a GGUF file llama.cpp loads.
struct GgufExport {
  // general.architecture written; nullptr: the family is refused before any file is written, with `refusal`.
  const char* arch = nullptr;
  const char* refusal = nullptr;
  // llama.cpp's LlamaModel converter permutes q/k rows into Meta's interleaved RoPE order; the reader expects it.
  bool interleave_qk = false;
  // YaRN that does not truncate its ramp (gpt-oss) written anyway, to run as llama.cpp runs it: rounded outwards, as
  // llama.cpp's converter writes it too (the ramp's ends move by under one dimension).
  bool yarn_as_llamacpp = false;
  std::span<const FusedWeight> fused = {};
  // Keys beyond the common ones ("<arch>.*"); throws LoadError naming the field when the config cannot be written
  // in a form llama.cpp reads the same way.
  void (*write_keys)(const ModelConfig&, const std::string& path, GgufWriter&) = nullptr;
};

struct Family {
  const char* name;  // ModelConfig::arch, logs and errors
  std::span<const HfModelType> hf_model_types;
  // Traits from config.json after the fields every family shares (config_hf.cpp); model_type as the config gives it.
  void (*read_hf)(const HfFields&, std::string_view model_type, ModelConfig&) = nullptr;
  const char* gguf_arch = nullptr;  // the general.architecture read; nullptr: none
  kernels::RopeStyle gguf_rope_style = kernels::RopeStyle::kNeox;
  // Traits from GGUF metadata after the common keys (config_gguf.cpp); `arch` is the key prefix.
  void (*read_gguf)(const GgufFile&, const std::string& arch, ModelConfig&) = nullptr;
  // Weight names looked up before the table every family shares (loaders/weight_names.cpp): per layer, and of the
  // model-wide weights (their rows name the whole tensor, e.g. LFM2's final norm "model.embedding_norm.weight").
  std::span<const WeightNameRow> layer_names = {};
  std::span<const WeightNameRow> global_names = {};
  const HfExpertNames* hf_experts = nullptr;
  graph::Graph (*build_graph)(const ModelWeights&) = nullptr;
  GgufExport gguf_export = {};
  // A chat template for files that carry none (Gemma GGUFs converted without theirs).
  std::string_view fallback_chat_template = {};
  std::span<const TestPreset> test_presets = {};
  nlohmann::json (*test_config)(const TestPreset&, const TestConfigContext&) = nullptr;
  // The HF tensors of a test model whose checkpoint stores some weights fused or stacked (Phi-3, gpt-oss): rewrites
  // `weights` (one per canonical weight, in HF names) into the checkpoint's own; nullptr: one tensor per weight.
  void (*test_hf_weights)(const ModelConfig&, std::vector<HfTestWeight>& weights) = nullptr;
  // Where a multimodal checkpoint keeps its text model instead of "model." (Qwen3.5: "model.language_model."); the
  // loader reads both, the test-model writer writes this one.
  const char* hf_text_prefix = nullptr;
  // Brings the loaded weights (either format) to the canonical forms the graph reads, before their shapes are
  // checked (Qwen3.5: q_proj's per-head gate split off, A_log to -exp(A_log)); nullptr: nothing to do.
  void (*adapt_weights)(ModelWeights&) = nullptr;
  // Whether the graph runs shared experts beside the routed ones (ModelConfig::shared_expert_intermediate_size).
  bool shared_experts = false;
};

// Every registered family, in the registry's order.
std::span<const Family* const> families();
// The family named `name` (ModelConfig::arch); throws Error for an unknown one.
const Family& family_named(std::string_view name);
const Family& family_of(const ModelConfig& config);

}  // namespace minfer
