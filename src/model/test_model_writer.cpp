#include "model/test_model_writer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>

#include "base/error.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "formats/safetensors_writer.h"
#include "model/test_tokenizer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct Preset {
  const char* name;
  const char* model_type;  // config.json's: llama, qwen2, qwen3, gemma2, gemma3_text, ...
  TokenizerFamily family;
  bool tiny;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab;  // vocab 0: the tokenizer's size
  int64_t max_position_embeddings;
  int64_t max_window_layers;  // Qwen2 only
  bool tied;
  // Std of the random embedding and of the other matrices. The real shapes use HF's initializer_range. The tiny
  // ones need about unit gain per layer (std ~ 1 / sqrt(hidden)), else greedy decoding of their 2-3 layers locks
  // onto one repeated token (checked with a NumPy forward pass: 0.08 everywhere gave ~4 distinct tokens in 20
  // steps, 0.16 for the layers ~16).
  double embed_std;
  double weight_std;
  int64_t head_dim = 0;  // 0: hidden / heads (Qwen3 states its own)
  // Gemma 2/3: the window of the local layers, and every sliding_period-th layer global (the rest local).
  int64_t sliding_window = 0;
  int64_t sliding_period = 0;
  // Mixture of experts (qwen3_moe, mixtral): experts, experts per token, each expert's FFN width.
  int64_t experts = 0;
  int64_t experts_per_tok = 0;
  int64_t moe_intermediate = 0;
  // SmolLM3: every no_rope_interval-th layer has no positional encoding.
  int64_t no_rope_interval = 0;
};

// The real configs (Qwen/Qwen2.5-0.5B, Qwen/Qwen2.5-1.5B, meta-llama/Llama-3.2-1B, Qwen/Qwen3-0.6B,
// google/gemma-3-270m) and their tiny siblings. tiny-qwen3's head_dim (32) is not hidden / heads (16), as Qwen3's own
// are not.
constexpr Preset kPresets[] = {
    {"qwen2.5-0.5b", "qwen2", TokenizerFamily::kQwen2, false, 896, 4864, 24, 14, 2, 151936, 32768, 24, true, 0.02,
     0.02},
    {"qwen2.5-1.5b", "qwen2", TokenizerFamily::kQwen2, false, 1536, 8960, 28, 12, 2, 151936, 131072, 28, true, 0.02,
     0.02},
    {"llama-3.2-1b", "llama", TokenizerFamily::kLlama3, false, 2048, 8192, 16, 32, 8, 128256, 131072, 0, true, 0.02,
     0.02},
    {"qwen3-0.6b", "qwen3", TokenizerFamily::kQwen2, false, 1024, 3072, 28, 16, 8, 151936, 40960, 28, true, 0.02, 0.02,
     128},
    {"tiny-qwen2", "qwen2", TokenizerFamily::kQwen2, true, 64, 128, 2, 4, 2, 0, 32768, 2, true, 0.08, 0.16},
    {"tiny-llama", "llama", TokenizerFamily::kLlama3, true, 64, 128, 3, 4, 2, 0, 131072, 0, false, 0.08, 0.16},
    {"tiny-qwen3", "qwen3", TokenizerFamily::kQwen2, true, 64, 128, 2, 4, 2, 0, 40960, 2, true, 0.08, 0.16, 32},
    // google/gemma-3-270m (its 262k SentencePiece vocabulary replaced by a generated one of that size), and a tiny
    // sibling with a global layer after two local ones.
    {"gemma3-270m", "gemma3_text", TokenizerFamily::kLlama3, false, 640, 2048, 18, 4, 1, 262144, 32768, 0, true, 0.02,
     0.02, 256, 512, 6},
    // mistralai/Mistral-7B-v0.1 (a 4096-position window on every layer; its 32k SentencePiece vocabulary replaced by
    // a generated one of that size) and a tiny sibling.
    {"mistral-7b", "mistral", TokenizerFamily::kLlama3, false, 4096, 14336, 32, 32, 8, 32000, 32768, 0, false, 0.02,
     0.02, 0, 4096, 0},
    {"tiny-mistral", "mistral", TokenizerFamily::kLlama3, true, 64, 128, 3, 4, 2, 0, 32768, 0, false, 0.08, 0.16, 0,
     4096, 0},
    // microsoft/Phi-3-mini-4k-instruct (its 32k SentencePiece vocabulary replaced by a generated one of that size), and
    // a tiny sibling with what the larger Phi-3 / 3.5 / 4 configs add: GQA, half the head rotated, longrope.
    {"phi3-mini", "phi3", TokenizerFamily::kLlama3, false, 3072, 8192, 32, 32, 32, 32064, 4096, 0, false, 0.02, 0.02, 0,
     2047, 0},
    {"tiny-phi3", "phi3", TokenizerFamily::kLlama3, true, 64, 128, 2, 4, 2, 0, 131072, 0, false, 0.08, 0.16, 0, 2047,
     0},
    // Mixture of experts: the small Qwen3-MoE shape (16 experts, top-4, hidden 1024, 8 layers; Qwen3-30B-A3B's
    // heads and expert width), mistralai/Mixtral-8x7B-v0.1, and tiny siblings of both.
    {"qwen3-moe-small",
     "qwen3_moe",
     TokenizerFamily::kQwen2,
     false,
     1024,
     3072,
     8,
     16,
     4,
     151936,
     40960,
     8,
     true,
     0.02,
     0.02,
     128,
     0,
     0,
     16,
     4,
     768},
    {"tiny-qwen3-moe",
     "qwen3_moe",
     TokenizerFamily::kQwen2,
     true,
     64,
     128,
     2,
     4,
     2,
     0,
     40960,
     2,
     true,
     0.08,
     0.16,
     32,
     0,
     0,
     8,
     2,
     32},
    {"mixtral-8x7b",
     "mixtral",
     TokenizerFamily::kLlama3,
     false,
     4096,
     14336,
     32,
     32,
     8,
     32000,
     32768,
     0,
     false,
     0.02,
     0.02,
     0,
     0,
     0,
     8,
     2,
     14336},
    {"tiny-mixtral",
     "mixtral",
     TokenizerFamily::kLlama3,
     true,
     64,
     128,
     2,
     4,
     2,
     0,
     32768,
     0,
     false,
     0.08,
     0.16,
     0,
     0,
     0,
     4,
     2,
     128},
    {"tiny-gemma3", "gemma3_text", TokenizerFamily::kLlama3, true, 64, 128, 3, 4, 1, 0, 32768, 0, true, 0.08, 0.16, 32,
     512, 3},
    // google/gemma-2-2b (its 256k SentencePiece vocabulary replaced by a generated one of that size; local and global
    // layers alternate) and a tiny sibling whose head_dim is not hidden / heads, as the 2B's is not.
    {"gemma2-2b", "gemma2", TokenizerFamily::kLlama3, false, 2304, 9216, 26, 8, 4, 256000, 8192, 0, true, 0.02, 0.02,
     256, 4096, 2},
    {"tiny-gemma2", "gemma2", TokenizerFamily::kLlama3, true, 64, 128, 3, 4, 2, 0, 8192, 0, true, 0.08, 0.16, 32, 512,
     2},
    // HuggingFaceTB/SmolLM3-3B (Llama 3's vocabulary size; every fourth layer NoPE) and a tiny sibling with every
    // second layer NoPE.
    // allenai/OLMo-2-0425-1B (its 100k vocabulary replaced by a generated one of that size), and tiny siblings of it
    // and of OLMo 3 (a 512-position window on three of its four layers, and YaRN on the fourth).
    // ibm-granite/granite-3.3-2b-instruct (its 49k vocabulary replaced by a generated one of that size) and a tiny
    // sibling whose attention multiplier is not 1/sqrt(head_dim) (embed_std 0.01: its embeddings are multiplied by 12).
    {"granite-3.3-2b", "granite", TokenizerFamily::kLlama3, false, 2048, 8192, 40, 32, 8, 49159, 131072, 0, true, 0.02,
     0.02},
    {"tiny-granite", "granite", TokenizerFamily::kLlama3, true, 64, 128, 2, 4, 2, 0, 131072, 0, true, 0.01, 0.16},
    {"olmo2-1b", "olmo2", TokenizerFamily::kLlama3, false, 2048, 8192, 16, 16, 16, 100352, 4096, 0, false, 0.02, 0.02},
    {"tiny-olmo2", "olmo2", TokenizerFamily::kLlama3, true, 64, 128, 2, 4, 2, 0, 4096, 0, false, 0.08, 0.16},
    {"tiny-olmo3", "olmo3", TokenizerFamily::kLlama3, true, 64, 128, 4, 4, 2, 0, 65536, 0, false, 0.08, 0.12, 0, 512,
     4},
    {.name = "smollm3-3b",
     .model_type = "smollm3",
     .family = TokenizerFamily::kLlama3,
     .tiny = false,
     .hidden = 2048,
     .intermediate = 11008,
     .layers = 36,
     .heads = 16,
     .kv_heads = 4,
     .vocab = 128256,
     .max_position_embeddings = 65536,
     .max_window_layers = 0,
     .tied = true,
     .embed_std = 0.02,
     .weight_std = 0.02,
     .no_rope_interval = 4},
    // (weight_std 0.12: its four layers amplify the bf16 activation rounding more than the 2-3 of the others.)
    {.name = "tiny-smollm3",
     .model_type = "smollm3",
     .family = TokenizerFamily::kLlama3,
     .tiny = true,
     .hidden = 64,
     .intermediate = 128,
     .layers = 4,
     .heads = 4,
     .kv_heads = 2,
     .vocab = 0,
     .max_position_embeddings = 65536,
     .max_window_layers = 0,
     .tied = true,
     .embed_std = 0.08,
     .weight_std = 0.12,
     .no_rope_interval = 2},
    // openai/gpt-oss-20b (its o200k vocabulary replaced by a generated one of that size; experts stored in bf16 as
    // the dequantized checkpoints are, not MXFP4) and a tiny sibling whose q width (4 x 32) is not hidden and whose
    // experts are narrower than hidden (32: whole MXFP4 blocks, as gpt-oss's 2880 are). A 128-position window on every
    // other layer from the first.
    {.name = "gpt-oss-20b",
     .model_type = "gpt_oss",
     .family = TokenizerFamily::kQwen2,
     .tiny = false,
     .hidden = 2880,
     .intermediate = 2880,
     .layers = 24,
     .heads = 64,
     .kv_heads = 8,
     .vocab = 201088,
     .max_position_embeddings = 131072,
     .max_window_layers = 0,
     .tied = false,
     .embed_std = 0.02,
     .weight_std = 0.02,
     .head_dim = 64,
     .sliding_window = 128,
     .sliding_period = 2,
     .experts = 32,
     .experts_per_tok = 4,
     .moe_intermediate = 2880},
    {.name = "tiny-gpt-oss",
     .model_type = "gpt_oss",
     .family = TokenizerFamily::kQwen2,
     .tiny = true,
     .hidden = 64,
     .intermediate = 32,
     .layers = 2,
     .heads = 4,
     .kv_heads = 2,
     .vocab = 0,
     .max_position_embeddings = 131072,
     .max_window_layers = 0,
     .tied = false,
     .embed_std = 0.08,
     .weight_std = 0.16,
     .head_dim = 32,
     .sliding_window = 128,
     .sliding_period = 2,
     .experts = 8,
     .experts_per_tok = 2,
     .moe_intermediate = 32},
};

int64_t head_dim_of(const Preset& p) { return p.head_dim > 0 ? p.head_dim : p.hidden / p.heads; }

const Preset& find_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p;
  std::string names;
  for (const Preset& p : kPresets) names += (names.empty() ? "" : ", ") + std::string(p.name);
  fail("unknown test model preset '{}' (available: {})", name, names);
}

std::string torch_dtype_name(DType d) { return d == DType::BF16 ? "bfloat16" : "float32"; }

// The ids of the family's special tokens in the tokenizer actually written.
struct SpecialIds {
  std::optional<int64_t> bos;
  std::vector<int64_t> config_eos;      // config.json's eos_token_id
  std::vector<int64_t> generation_eos;  // generation_config.json's
};

ojson id_or_list(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

ojson qwen_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  const int64_t window = p.max_position_embeddings;
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"attention_dropout", 0.0},
          {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
          {"eos_token_id", id_or_list(s.config_eos)},
          {"hidden_act", "silu"},
          {"hidden_size", p.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", p.intermediate},
          {"max_position_embeddings", p.max_position_embeddings},
          {"max_window_layers", p.max_window_layers},
          {"model_type", "qwen2"},
          {"num_attention_heads", p.heads},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"rms_norm_eps", 1e-06},
          {"rope_theta", 1000000.0},
          {"sliding_window", window},
          {"tie_word_embeddings", p.tied},
          {"torch_dtype", torch_dtype_name(dtype)},
          {"transformers_version", "4.40.1"},
          {"use_cache", true},
          {"use_mrope", false},
          {"use_sliding_window", false},
          {"vocab_size", vocab}};
}

// Qwen3ForCausalLM: Qwen2's config without the q/k/v biases or mrope, with an explicit head_dim (q/k norms are
// implied by the model type).
ojson qwen3_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  ojson j = qwen_config(p, vocab, s, dtype);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["attention_bias"] = false;
  j["head_dim"] = head_dim_of(p);
  j["rope_scaling"] = nullptr;
  j["sliding_window"] = nullptr;
  j["transformers_version"] = "4.51.0";
  j.erase("use_mrope");
  return j;
}

// Gemma3ForCausalLM (google/gemma-3-270m's config.json; tiny-gemma3 scales by a query_pre_attn_scalar that is not
// head_dim, so a wrong scale shows).
ojson gemma3_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  ojson layer_types = ojson::array();
  for (int64_t i = 0; i < p.layers; ++i)
    layer_types.push_back((i + 1) % p.sliding_period == 0 ? "full_attention" : "sliding_attention");
  return {{"architectures", {"Gemma3ForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"attn_logit_softcapping", nullptr},
          {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
          {"eos_token_id", id_or_list(s.config_eos)},
          {"final_logit_softcapping", nullptr},
          {"head_dim", head_dim_of(p)},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"hidden_size", p.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", p.intermediate},
          {"layer_types", layer_types},
          {"max_position_embeddings", p.max_position_embeddings},
          {"model_type", "gemma3_text"},
          {"num_attention_heads", p.heads},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"pad_token_id", 0},
          {"query_pre_attn_scalar", p.tiny ? 24 : head_dim_of(p)},
          {"rms_norm_eps", 1e-06},
          {"rope_local_base_freq", 10000.0},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000.0},
          {"sliding_window", window > 0 ? window : p.sliding_window},
          {"tie_word_embeddings", p.tied},
          {"torch_dtype", torch_dtype_name(dtype)},
          {"transformers_version", "4.55.0.dev0"},
          {"use_bidirectional_attention", false},
          {"use_cache", true},
          {"vocab_size", vocab}};
}

// Gemma2ForCausalLM (google/gemma-2-2b's config.json: no layer_types, so the alternation is the reader's rule).
// tiny-gemma2 scales by a query_pre_attn_scalar that is not head_dim and soft-caps at 5 (scores) and 4 (logits), low
// enough to bend its small values, so a missing or misplaced cap shows.
ojson gemma2_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  return {{"architectures", {"Gemma2ForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"attn_logit_softcapping", p.tiny ? 5.0 : 50.0},
          {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
          {"cache_implementation", "hybrid"},
          {"eos_token_id", id_or_list(s.config_eos)},
          {"final_logit_softcapping", p.tiny ? 4.0 : 30.0},
          {"head_dim", head_dim_of(p)},
          {"hidden_act", "gelu_pytorch_tanh"},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"hidden_size", p.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", p.intermediate},
          {"max_position_embeddings", p.max_position_embeddings},
          {"model_type", "gemma2"},
          {"num_attention_heads", p.heads},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"pad_token_id", 0},
          {"query_pre_attn_scalar", p.tiny ? 24 : head_dim_of(p)},
          {"rms_norm_eps", 1e-06},
          {"rope_theta", 10000.0},
          {"sliding_window", window > 0 ? window : p.sliding_window},
          {"torch_dtype", torch_dtype_name(dtype)},
          {"transformers_version", "4.42.4"},
          {"use_cache", true},
          {"vocab_size", vocab}};
}

// Phi3ForCausalLM (microsoft/Phi-3-mini-4k-instruct's config.json). tiny-phi3 adds partial_rotary_factor 0.5 and
// longrope (Phi-3.5-mini's form: original_max_position_embeddings 4096 of 131072, factors per rotated pair).
ojson phi3_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  ojson j = {{"architectures", {"Phi3ForCausalLM"}},
             {"attention_bias", false},
             {"attention_dropout", 0.0},
             {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
             {"embd_pdrop", 0.0},
             {"eos_token_id", id_or_list(s.config_eos)},
             {"hidden_act", "silu"},
             {"hidden_size", p.hidden},
             {"initializer_range", 0.02},
             {"intermediate_size", p.intermediate},
             {"max_position_embeddings", p.max_position_embeddings},
             {"model_type", "phi3"},
             {"num_attention_heads", p.heads},
             {"num_hidden_layers", p.layers},
             {"num_key_value_heads", p.kv_heads},
             {"original_max_position_embeddings", 4096},
             {"pad_token_id", nullptr},
             {"resid_pdrop", 0.0},
             {"rms_norm_eps", 1e-05},
             {"rope_scaling", nullptr},
             {"rope_theta", 10000.0},
             {"sliding_window", window > 0 ? window : p.sliding_window},
             {"tie_word_embeddings", p.tied},
             {"torch_dtype", torch_dtype_name(dtype)},
             {"transformers_version", "4.40.2"},
             {"use_cache", true},
             {"vocab_size", vocab}};
  if (p.tiny) {
    j["partial_rotary_factor"] = 0.5;
    j["rope_scaling"] = {
        {"long_factor", {1.0, 1.25, 2.5, 6.0}}, {"short_factor", {1.0, 1.02, 1.1, 1.4}}, {"type", "longrope"}};
  }
  return j;
}

// Qwen3MoeForCausalLM (Qwen/Qwen3-30B-A3B's config.json fields, every layer sparse).
ojson qwen3_moe_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  ojson j = qwen3_config(p, vocab, s, dtype);
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = ojson::array();
  j["moe_intermediate_size"] = p.moe_intermediate;
  j["norm_topk_prob"] = true;
  j["num_experts"] = p.experts;
  j["num_experts_per_tok"] = p.experts_per_tok;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.001;
  return j;
}

ojson llama_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
          {"eos_token_id", id_or_list(s.config_eos)},
          {"head_dim", p.hidden / p.heads},
          {"hidden_act", "silu"},
          {"hidden_size", p.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", p.intermediate},
          {"max_position_embeddings", p.max_position_embeddings},
          {"mlp_bias", false},
          {"model_type", "llama"},
          {"num_attention_heads", p.heads},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"pretraining_tp", 1},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"factor", 32.0},
            {"high_freq_factor", 4.0},
            {"low_freq_factor", 1.0},
            {"original_max_position_embeddings", 8192},
            {"rope_type", "llama3"}}},
          {"rope_theta", 500000.0},
          {"tie_word_embeddings", p.tied},
          {"torch_dtype", torch_dtype_name(dtype)},
          {"transformers_version", "4.45.0.dev0"},
          {"use_cache", true},
          {"vocab_size", vocab}};
}

// MistralForCausalLM (mistralai/Mistral-7B-v0.1's config.json): Llama's fields without its llama3 RoPE scaling and
// head_dim, and a sliding window on every layer.
ojson mistral_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  ojson j = llama_config(p, vocab, s, dtype);
  for (const char* key :
       {"attention_bias", "attention_dropout", "head_dim", "mlp_bias", "pretraining_tp", "rope_scaling"})
    j.erase(key);
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["rope_theta"] = 10000.0;
  j["sliding_window"] = window > 0 ? window : p.sliding_window;
  j["transformers_version"] = "4.34.0.dev0";
  return j;
}

// MixtralForCausalLM (mistralai/Mixtral-8x7B-v0.1's config.json): Mistral's block with 8 experts, top-2, no window.
ojson mixtral_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  ojson j = mistral_config(p, vocab, s, dtype, 0);
  j["architectures"] = {"MixtralForCausalLM"};
  j["model_type"] = "mixtral";
  j["num_experts_per_tok"] = p.experts_per_tok;
  j["num_local_experts"] = p.experts;
  j["output_router_logits"] = false;
  j["rope_theta"] = 1000000.0;
  j["router_aux_loss_coef"] = 0.02;
  j["sliding_window"] = nullptr;
  return j;
}

// SmolLM3ForCausalLM (HuggingFaceTB/SmolLM3-3B's config.json): Llama's with no_rope_layers (1 = RoPE, 0 = NoPE) and
// no Llama 3 RoPE scaling.
ojson smollm3_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  ojson j = llama_config(p, vocab, s, dtype);
  ojson no_rope = ojson::array(), layer_types = ojson::array();
  for (int64_t i = 0; i < p.layers; ++i) {
    no_rope.push_back((i + 1) % p.no_rope_interval != 0 ? 1 : 0);
    layer_types.push_back("full_attention");
  }
  j["architectures"] = {"SmolLM3ForCausalLM"};
  j["model_type"] = "smollm3";
  j["layer_types"] = layer_types;
  j["max_window_layers"] = p.layers;
  j["no_rope_layer_interval"] = p.no_rope_interval;
  j["no_rope_layers"] = no_rope;
  j["pretraining_tp"] = 2;
  j["rms_norm_eps"] = 1e-06;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = 5000000.0;
  j["sliding_window"] = nullptr;
  j["transformers_version"] = "4.53.0.dev0";
  j["use_sliding_window"] = false;
  return j;
}

// Olmo2ForCausalLM (allenai/OLMo-2-0425-1B's config.json) and Olmo3ForCausalLM (allenai/Olmo-3-7B's form: a window
// on the layers of layer_types and YaRN on the full ones; tiny-olmo3's original context of 64 makes YaRN bite).
ojson olmo_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  const bool olmo3 = std::string(p.model_type) == "olmo3";
  ojson j = {{"architectures", {olmo3 ? "Olmo3ForCausalLM" : "Olmo2ForCausalLM"}},
             {"attention_bias", false},
             {"attention_dropout", 0.0},
             {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
             {"eos_token_id", id_or_list(s.config_eos)},
             {"hidden_act", "silu"},
             {"hidden_size", p.hidden},
             {"initializer_range", 0.02},
             {"intermediate_size", p.intermediate},
             {"max_position_embeddings", p.max_position_embeddings},
             {"model_type", p.model_type},
             {"num_attention_heads", p.heads},
             {"num_hidden_layers", p.layers},
             {"num_key_value_heads", p.kv_heads},
             {"pad_token_id", 100277},
             {"rms_norm_eps", 1e-06},
             {"rope_scaling", nullptr},
             {"rope_theta", 500000.0},
             {"tie_word_embeddings", p.tied},
             {"torch_dtype", torch_dtype_name(dtype)},
             {"transformers_version", olmo3 ? "4.57.0" : "4.48.0"},
             {"use_cache", true},
             {"vocab_size", vocab}};
  if (!olmo3) return j;
  ojson layer_types = ojson::array();
  for (int64_t i = 0; i < p.layers; ++i)
    layer_types.push_back((i + 1) % p.sliding_period == 0 ? "full_attention" : "sliding_attention");
  j["layer_types"] = layer_types;
  j["sliding_window"] = window > 0 ? window : p.sliding_window;
  j["rope_scaling"] = {{"attention_factor", 1.2079441541679836},
                       {"beta_fast", 32},
                       {"beta_slow", 1},
                       {"factor", 8.0},
                       {"original_max_position_embeddings", p.tiny ? 64 : 8192},
                       {"rope_type", "yarn"}};
  return j;
}

// GraniteForCausalLM (ibm-granite/granite-3.3-2b-instruct's config.json: Llama's with four multipliers; tiny-granite
// scales its scores by 0.1, not 1/sqrt(16), so a missed multiplier shows).
ojson granite_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype) {
  ojson j = llama_config(p, vocab, s, dtype);
  j["architectures"] = {"GraniteForCausalLM"};
  j["model_type"] = "granite";
  j["attention_multiplier"] = p.tiny ? 0.1 : 0.015625;
  j["embedding_multiplier"] = 12.0;
  j["residual_multiplier"] = 0.22;
  j["logits_scaling"] = 8.0;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = 10000000.0;
  j.erase("head_dim");  // Granite states none (llama.cpp's converter ignores it)
  j["transformers_version"] = "4.49.0";
  return j;
}

// GptOssForCausalLM (openai/gpt-oss-20b's config.json without its MXFP4 quantization_config: the weights written are
// bf16 or f32).
ojson gpt_oss_config(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  ojson layer_types = ojson::array();
  for (int64_t i = 0; i < p.layers; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  return {{"architectures", {"GptOssForCausalLM"}},
          {"attention_bias", true},
          {"attention_dropout", 0.0},
          {"eos_token_id", id_or_list(s.config_eos)},
          {"experts_per_token", p.experts_per_tok},
          {"head_dim", head_dim_of(p)},
          {"hidden_act", "silu"},
          {"hidden_size", p.hidden},
          {"initial_context_length", 4096},
          {"initializer_range", 0.02},
          {"intermediate_size", p.moe_intermediate},
          {"layer_types", layer_types},
          {"max_position_embeddings", p.max_position_embeddings},
          {"model_type", "gpt_oss"},
          {"num_attention_heads", p.heads},
          {"num_experts_per_tok", p.experts_per_tok},
          {"num_hidden_layers", p.layers},
          {"num_key_value_heads", p.kv_heads},
          {"num_local_experts", p.experts},
          {"output_router_logits", false},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"factor", 32.0},
            {"original_max_position_embeddings", 4096},
            {"rope_type", "yarn"},
            {"truncate", false}}},
          {"rope_theta", 150000},
          {"router_aux_loss_coef", 0.9},
          {"sliding_window", window > 0 ? window : p.sliding_window},
          {"swiglu_limit", 7.0},
          {"tie_word_embeddings", p.tied},
          {"torch_dtype", torch_dtype_name(dtype)},
          {"transformers_version", "4.55.0.dev0"},
          {"use_cache", true},
          {"vocab_size", vocab}};
}

ojson config_json(const Preset& p, int64_t vocab, const SpecialIds& s, DType dtype, int64_t window) {
  const std::string type = p.model_type;
  if (type == "qwen2") return qwen_config(p, vocab, s, dtype);
  if (type == "qwen3") return qwen3_config(p, vocab, s, dtype);
  if (type == "gemma2") return gemma2_config(p, vocab, s, dtype, window);
  if (type == "gemma3_text") return gemma3_config(p, vocab, s, dtype, window);
  if (type == "mistral") return mistral_config(p, vocab, s, dtype, window);
  if (type == "phi3") return phi3_config(p, vocab, s, dtype, window);
  if (type == "qwen3_moe") return qwen3_moe_config(p, vocab, s, dtype);
  if (type == "mixtral") return mixtral_config(p, vocab, s, dtype);
  if (type == "smollm3") return smollm3_config(p, vocab, s, dtype);
  if (type == "olmo2" || type == "olmo3") return olmo_config(p, vocab, s, dtype, window);
  if (type == "granite") return granite_config(p, vocab, s, dtype);
  if (type == "gpt_oss") return gpt_oss_config(p, vocab, s, dtype, window);
  return llama_config(p, vocab, s, dtype);
}

ojson generation_config(const Preset& p, const SpecialIds& s) {
  if (p.family == TokenizerFamily::kQwen2)
    return {{"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
            {"do_sample", false},
            {"eos_token_id", id_or_list(s.generation_eos)},
            {"max_new_tokens", 2048},
            {"transformers_version", "4.37.0"}};
  return {{"_from_model_config", true},
          {"bos_token_id", s.bos ? ojson(*s.bos) : ojson(nullptr)},
          {"do_sample", true},
          {"eos_token_id", id_or_list(s.generation_eos)},
          {"temperature", 0.6},
          {"top_p", 0.9},
          {"transformers_version", "4.45.0.dev0"}};
}

// Special ids by token text. The real presets keep the real model's ids; the tiny ones (and their Instruct-style
// eos lists, so chat tests stop at the end of a turn) use whatever ids the tokenizer has.
SpecialIds special_ids(const Preset& p, const std::map<std::string, int64_t>& by_text) {
  SpecialIds s;
  auto id = [&](const char* text) -> std::optional<int64_t> {
    auto it = by_text.find(text);
    return it == by_text.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  auto add = [](std::vector<int64_t>& v, std::optional<int64_t> x) {
    if (x) v.push_back(*x);
  };
  if (p.family == TokenizerFamily::kQwen2) {
    if (!p.tiny && std::string(p.model_type).starts_with("qwen3"))
      return {151643, {151645}, {151645, 151643}};  // <|im_end|>
    if (!p.tiny) return {151643, {151643}, {151643}};
    s.bos = id("<|endoftext|>");
    add(s.config_eos, id("<|endoftext|>"));
    add(s.generation_eos, id("<|im_end|>"));
    add(s.generation_eos, id("<|endoftext|>"));
  } else {
    if (!p.tiny && std::string(p.model_type) == "gemma3_text")
      return {2, {1}, {1, 106}};                                                      // <bos>, <eos>, <end_of_turn>
    if (!p.tiny && std::string(p.model_type) == "gemma2") return {2, {1}, {1, 107}};  // Gemma 2's <end_of_turn>
    if (!p.tiny && std::string(p.model_type) == "smollm3") return {std::nullopt, {128012}, {128012}};   // <|im_end|>
    if (!p.tiny && std::string(p.model_type).starts_with("olmo")) return {100257, {100257}, {100257}};  // <|endoftext|>
    if (!p.tiny && std::string(p.model_type) == "granite") return {0, {0}, {0}};                     // <|end_of_text|>
    if (!p.tiny && std::string(p.model_type) == "mistral") return {1, {2}, {2}};                     // <s>, </s>
    if (!p.tiny && std::string(p.model_type) == "phi3") return {1, {32000}, {32000, 32001, 32007}};  // <|endoftext|>...
    if (!p.tiny) return {128000, {128001}, {128001}};
    s.bos = id("<|begin_of_text|>");
    add(s.config_eos, id("<|end_of_text|>"));
    for (const char* t : {"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"}) add(s.generation_eos, id(t));
  }
  return s;
}

// A user-supplied tokenizer.json: its size (highest id + 1) and token ids by text.
int64_t scan_tokenizer(const std::string& path, std::map<std::string, int64_t>* by_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail_load(path, "invalid JSON: {}", e.what());
  }
  const auto model = j.find("model");
  if (!j.is_object() || model == j.end() || !model->is_object() || !model->contains("vocab") ||
      !(*model)["vocab"].is_object())
    fail_load(path, "not a tokenizer.json (no model.vocab object)");
  int64_t size = 0;
  auto note = [&](const std::string& text, const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) fail_load(path, "token '{}' has an invalid id", text);
    (*by_text)[text] = id.get<int64_t>();
    size = std::max(size, id.get<int64_t>() + 1);
  };
  for (const auto& [text, id] : (*model)["vocab"].items()) note(text, id);
  if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array())
    for (const auto& t : *added)
      if (t.is_object() && t.contains("content") && t["content"].is_string() && t.contains("id"))
        note(t["content"].get<std::string>(), t["id"]);
  return size;
}

void write_json(const fs::path& path, const ojson& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) fail("{}: cannot write", path.string());
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

enum class Init : uint8_t { kMatrix, kNorm, kNormOffset, kBias, kSink };

// Random data, reproducible from (seed, tensor name, element index): each block of kBlock elements has its own
// generator, so the values do not depend on chunking or on the number of threads.
SafetensorsEntry random_entry(std::string name, std::vector<int64_t> shape, DType dtype, Init init, double std_dev,
                              uint64_t seed, ThreadPool& pool) {
  constexpr int64_t kBlock = 1 << 16;
  static_assert(SafetensorsEntry::kChunkElements % kBlock == 0);
  const uint64_t tensor_seed = seed * 0x9e3779b97f4a7c15ull ^ name_hash(name);
  SafetensorsEntry e{std::move(name), dtype, std::move(shape), nullptr};
  e.fill = [=, &pool](void* dst, int64_t first, int64_t count) {
    const size_t blocks = static_cast<size_t>((count + kBlock - 1) / kBlock);
    pool.parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
      for (size_t b = b0; b < b1; ++b) {
        const int64_t begin = static_cast<int64_t>(b) * kBlock;
        const int64_t n = std::min(kBlock, count - begin);
        uint64_t state = tensor_seed ^ static_cast<uint64_t>((first + begin) / kBlock) * 0xd1b54a32d192ed03ull;
        for (int64_t i = 0; i < n; i += 2) {
          // Box-Muller: two normals from two uniforms in (0, 1].
          const double u1 = static_cast<double>((splitmix64(state) >> 11) + 1) * 0x1.0p-53;
          const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
          const double r = std::sqrt(-2.0 * std::log(u1));
          const double pair[2] = {r * std::cos(2 * std::numbers::pi * u2), r * std::sin(2 * std::numbers::pi * u2)};
          for (int64_t k = 0; k < 2 && i + k < n; ++k) {
            float v = 0;
            switch (init) {
              case Init::kMatrix: v = static_cast<float>(pair[k] * std_dev); break;
              case Init::kBias: v = static_cast<float>(pair[k] * 0.02); break;
              case Init::kSink: v = static_cast<float>(1.0 + pair[k]); break;  // near the scores (gpt-oss)
              case Init::kNorm: v = static_cast<float>(1.0 + 0.1 * std::tanh(pair[k])); break;  // within 1 +- 0.1
              case Init::kNormOffset: v = static_cast<float>(0.1 * std::tanh(pair[k])); break;  // (1 + w) form
            }
            const size_t at = static_cast<size_t>(begin + i + k);
            if (dtype == DType::BF16) {
              static_cast<uint16_t*>(dst)[at] = f32_to_bf16(v);
            } else {
              static_cast<float*>(dst)[at] = v;
            }
          }
        }
      }
    });
  };
  return e;
}

}  // namespace

std::vector<std::string> test_model_presets() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

DType default_test_model_dtype(const std::string& preset) {
  return find_preset(preset).tiny ? DType::F32 : DType::BF16;
}

namespace {

TestModelResult write_test_model_files(const TestModelOptions& o) {
  Preset p = find_preset(o.preset);
  if (o.layers < 0 || o.layers > p.layers)
    fail("make-test-model: --layers {} for preset {} of {} layers", o.layers, p.name, p.layers);
  if (o.layers > 0) p.layers = o.layers;
  if (o.dtype != DType::F32 && o.dtype != DType::BF16)
    fail("make-test-model: unsupported dtype {} (supported: f32, bf16)", dtype_name(o.dtype));
  const fs::path dir(o.out_dir);
  fs::create_directories(dir);

  // Tokenizer first: the tiny presets take its size as their vocabulary.
  std::map<std::string, int64_t> by_text;
  int64_t tok_size = 0;
  if (!o.tokenizer_json.empty()) {
    tok_size = scan_tokenizer(o.tokenizer_json, &by_text);
    const fs::path src_config = fs::path(o.tokenizer_json).parent_path() / "tokenizer_config.json";
    auto copy = [&](const fs::path& from, const char* name) {
      if (fs::exists(dir / name) && fs::equivalent(from, dir / name)) return;
      fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing);
    };
    copy(o.tokenizer_json, "tokenizer.json");
    if (fs::is_regular_file(src_config)) {
      copy(src_config, "tokenizer_config.json");
    } else {
      fs::remove(dir / "tokenizer_config.json");
    }
  } else {
    const GeneratedTokenizer tok = generate_test_tokenizer(p.family, p.vocab);
    tok_size = tok.size;
    for (const auto& [text, id] : tok.special_ids) by_text[text] = id;
    write_json(dir / "tokenizer.json", tok.tokenizer);
    write_json(dir / "tokenizer_config.json", tok.config);
  }
  const int64_t vocab = p.tiny ? tok_size : p.vocab;
  if (tok_size > vocab)
    fail("{}: the tokenizer has {} tokens, more than the {} preset's vocab size {}", o.tokenizer_json, tok_size, p.name,
         vocab);

  const SpecialIds ids = special_ids(p, by_text);
  const std::string model_type = p.model_type;
  write_json(dir / "config.json", config_json(p, vocab, ids, o.dtype, o.sliding_window));
  write_json(dir / "generation_config.json", generation_config(p, ids));
  if (o.sliding_window > 0 && p.sliding_window == 0)
    fail("make-test-model: preset {} has no sliding window to set", p.name);

  // Weights, in Hugging Face's names and order.
  ThreadPool pool(0);
  const int64_t head_dim = head_dim_of(p), q = p.heads * head_dim, kv = p.kv_heads * head_dim;
  const bool gpt_oss = model_type == "gpt_oss";
  const bool bias = model_type == "qwen2" || gpt_oss, phi3 = model_type == "phi3";
  const bool gemma = model_type == "gemma2" || model_type == "gemma3_text";
  const bool olmo = model_type == "olmo2" || model_type == "olmo3";  // post norms only, whole-projection q/k norms
  const bool qk_norm = model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "gemma3_text" || olmo;
  // Gemma's norms multiply by (1 + w): their stored weights lie around 0.
  const Init norm = gemma ? Init::kNormOffset : Init::kNorm;
  std::vector<SafetensorsEntry> entries;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Init init) {
    const double sd = name == "model.embed_tokens.weight" ? p.embed_std : p.weight_std;
    entries.push_back(random_entry(name, std::move(shape), o.dtype, init, sd, o.seed, pool));
  };
  // The router and each expert's matrices, in the family's names (Qwen3-MoE: mlp.gate, mlp.experts.{j}.*_proj;
  // Mixtral: block_sparse_moe.gate, block_sparse_moe.experts.{j}.w1 (gate) / w3 (up) / w2 (down)).
  const bool mixtral = model_type == "mixtral";
  auto add_experts = [&](const std::string& l) {
    const std::string moe = l + (mixtral ? "block_sparse_moe." : "mlp.");
    add(moe + "gate.weight", {p.experts, p.hidden}, Init::kMatrix);
    for (int64_t e = 0; e < p.experts; ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      add(x + (mixtral ? "w1.weight" : "gate_proj.weight"), {p.moe_intermediate, p.hidden}, Init::kMatrix);
      add(x + (mixtral ? "w3.weight" : "up_proj.weight"), {p.moe_intermediate, p.hidden}, Init::kMatrix);
      add(x + (mixtral ? "w2.weight" : "down_proj.weight"), {p.hidden, p.moe_intermediate}, Init::kMatrix);
    }
  };
  // gpt-oss: a biased router, and the experts stacked transposed with gate and up interleaved column by column.
  auto add_gpt_oss_experts = [&](const std::string& l) {
    add(l + "mlp.router.weight", {p.experts, p.hidden}, Init::kMatrix);
    add(l + "mlp.router.bias", {p.experts}, Init::kBias);
    add(l + "mlp.experts.gate_up_proj", {p.experts, p.hidden, 2 * p.moe_intermediate}, Init::kMatrix);
    add(l + "mlp.experts.gate_up_proj_bias", {p.experts, 2 * p.moe_intermediate}, Init::kBias);
    add(l + "mlp.experts.down_proj", {p.experts, p.moe_intermediate, p.hidden}, Init::kMatrix);
    add(l + "mlp.experts.down_proj_bias", {p.experts, p.hidden}, Init::kBias);
  };
  add("model.embed_tokens.weight", {vocab, p.hidden}, Init::kMatrix);
  for (int64_t i = 0; i < p.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    if (!olmo) add(l + "input_layernorm.weight", {p.hidden}, norm);
    if (phi3) {
      add(l + "self_attn.qkv_proj.weight", {q + 2 * kv, p.hidden}, Init::kMatrix);
    } else {
      add(l + "self_attn.q_proj.weight", {q, p.hidden}, Init::kMatrix);
      add(l + "self_attn.k_proj.weight", {kv, p.hidden}, Init::kMatrix);
      add(l + "self_attn.v_proj.weight", {kv, p.hidden}, Init::kMatrix);
    }
    if (bias) {
      add(l + "self_attn.q_proj.bias", {q}, Init::kBias);
      add(l + "self_attn.k_proj.bias", {kv}, Init::kBias);
      add(l + "self_attn.v_proj.bias", {kv}, Init::kBias);
    }
    if (qk_norm) {
      add(l + "self_attn.q_norm.weight", {olmo ? q : head_dim}, norm);
      add(l + "self_attn.k_norm.weight", {olmo ? kv : head_dim}, norm);
    }
    add(l + "self_attn.o_proj.weight", {p.hidden, q}, Init::kMatrix);
    if (gpt_oss) {
      add(l + "self_attn.o_proj.bias", {p.hidden}, Init::kBias);
      add(l + "self_attn.sinks", {p.heads}, Init::kSink);
    }
    add(l + "post_attention_layernorm.weight", {p.hidden}, norm);
    if (gemma) add(l + "pre_feedforward_layernorm.weight", {p.hidden}, norm);
    if (gemma || olmo) add(l + "post_feedforward_layernorm.weight", {p.hidden}, norm);
    if (gpt_oss) {
      add_gpt_oss_experts(l);
    } else if (p.experts > 0) {
      add_experts(l);
    } else if (phi3) {
      add(l + "mlp.gate_up_proj.weight", {2 * p.intermediate, p.hidden}, Init::kMatrix);
    } else {
      add(l + "mlp.gate_proj.weight", {p.intermediate, p.hidden}, Init::kMatrix);
      add(l + "mlp.up_proj.weight", {p.intermediate, p.hidden}, Init::kMatrix);
    }
    if (p.experts == 0) add(l + "mlp.down_proj.weight", {p.hidden, p.intermediate}, Init::kMatrix);
  }
  add("model.norm.weight", {p.hidden}, norm);
  if (!p.tied) add("lm_head.weight", {vocab, p.hidden}, Init::kMatrix);

  // Stale weights from an earlier run (e.g. shards when this run writes one file) would confuse the loader.
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors.index.json" ||
        (name.rfind("model", 0) == 0 && entry.path().extension() == ".safetensors"))
      fs::remove(entry.path());
  }
  SafetensorsWriteOptions wo;
  wo.metadata = {{"format", "pt"}};
  wo.skip_data = o.skip_weight_data;

  TestModelResult r;
  r.vocab_size = vocab;
  for (const auto& e : entries) {
    r.parameters += static_cast<uint64_t>(e.numel());
    r.weight_bytes += e.nbytes();
  }
  r.files = write_safetensors_checkpoint(o.out_dir, entries, o.shard_bytes, wo);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(dir / f)) r.files.emplace_back(f);
  return r;
}

}  // namespace

TestModelResult write_test_model(const TestModelOptions& o) {
  try {
    return write_test_model_files(o);
  } catch (const fs::filesystem_error& e) {
    fail("make-test-model: {}", e.what());  // names the path and the reason
  }
}

}  // namespace minfer
