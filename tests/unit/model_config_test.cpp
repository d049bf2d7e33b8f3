#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "model/config_gguf.h"
#include "model/config_hf.h"
#include "test_support.h"

namespace minfer {
namespace {

using testing::expect_load_error;

const std::string kStoriesGguf = std::string(MINFER_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

// Llama-3.2-1B's config.json.
constexpr const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Qwen2.5-0.5B's config.json.
constexpr const char* kQwen05 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
  "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
  "use_cache": true, "use_mrope": false, "use_sliding_window": false, "vocab_size": 151936})";

// `config` with one "key": value replaced (or added when absent).
std::string with(std::string s, const std::string& key, const std::string& value) {
  const size_t at = s.find("\"" + key + "\":");
  if (at == std::string::npos) return s.substr(0, s.size() - 1) + ", \"" + key + "\": " + value + "}";
  const size_t start = at + key.size() + 3;
  size_t end = s.find_first_of(",}", start);
  if (s[start + 1] == '[') end = s.find(']', start) + 1;
  return s.substr(0, start) + " " + value + s.substr(end);
}
std::string qwen_with(const std::string& key, const std::string& value) { return with(kQwen05, key, value); }

TEST(HfConfig, Llama32) {
  const ModelConfig c = parse_hf_config(kLlama32, "config.json");
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_style, kernels::RopeStyle::kNeox);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001}));
}

TEST(HfConfig, Qwen25AndGenerationConfigEos) {
  const ModelConfig c = parse_hf_config(kQwen05, "config.json", R"({"eos_token_id": [151645, 151643]})", "gen.json");
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_TRUE(c.attention_bias);  // Qwen2 always has q/k/v biases
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151643, 151645}));
}

TEST(HfConfig, DefaultsAndEosList) {
  const ModelConfig c = parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 100, "eos_token_id": [1, 2], "rope_scaling": null})",
      "config.json");
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
}

TEST(HfConfig, Errors) {
  expect_load_error([] { parse_hf_config(qwen_with("model_type", "\"gpt_neox\""), "cfg.json"); }, "cfg.json",
                    "unsupported architecture 'gpt_neox' (supported: llama");
  expect_load_error(
      [] { parse_hf_config(qwen_with("architectures", "[\"Qwen2ForSequenceClassification\"]"), "cfg.json"); },
      "cfg.json", "unsupported architecture class 'Qwen2ForSequenceClassification'");
  expect_load_error([] { parse_hf_config(qwen_with("hidden_size", "\"896\""), "cfg.json"); }, "cfg.json",
                    "field \"hidden_size\" must be an integer");
  expect_load_error([] { parse_hf_config(qwen_with("num_key_value_heads", "3"), "cfg.json"); }, "cfg.json",
                    "num_key_value_heads (3) does not divide num_attention_heads (14)");
  expect_load_error(
      [] {
        parse_hf_config(with(qwen_with("use_sliding_window", "true"), "layer_types", "[\"chunked_attention\"]"),
                        "cfg.json");
      },
      "cfg.json", "unsupported layer type \"chunked_attention\"");
  expect_load_error(
      [] { parse_hf_config(qwen_with("rope_scaling", R"({"rope_type": "dynamic", "factor": 4.0})"), "c"); }, "c",
      "unsupported rope_scaling type 'dynamic'");
  expect_load_error([] { parse_hf_config(qwen_with("eos_token_id", "200000"), "cfg.json"); }, "cfg.json",
                    "eos_token_id 200000 is outside the vocabulary");
  expect_load_error([] { parse_hf_config("{\"model_type\": ", "cfg.json"); }, "cfg.json", "invalid JSON");
  expect_load_error([] { parse_hf_config(R"({"model_type": "llama"})", "cfg.json"); }, "cfg.json",
                    "missing field \"vocab_size\"");
}

// Qwen2's use_sliding_window: the layers from max_window_layers on slide (transformers' layer_types default).
TEST(HfConfig, Qwen2SlidingWindowLayers) {
  const ModelConfig c =
      parse_hf_config(with(qwen_with("use_sliding_window", "true"), "max_window_layers", "20"), "cfg.json");
  EXPECT_EQ(c.sliding_window, 32768);
  EXPECT_FALSE(c.is_sliding(19));
  EXPECT_TRUE(c.is_sliding(20));
}

// google/gemma-3-270m's config.json.
constexpr const char* kGemma3 = R"({
  "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attn_logit_softcapping": null,
  "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": null, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 640, "intermediate_size": 2048,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
    "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
    "sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
    "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 18,
  "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000.0, "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 512,
  "torch_dtype": "bfloat16", "use_bidirectional_attention": false, "vocab_size": 262144})";

TEST(HfConfig, Gemma3) {
  const ModelConfig c = parse_hf_config(kGemma3, "cfg.json");
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.hidden_act, Activation::kGeluTanh);
  EXPECT_TRUE(c.qk_norm && c.sandwich_norms && c.norm_weight_plus_one && c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(640.0f));
  EXPECT_FLOAT_EQ(c.attention_score_scale(), 1.0f / 16.0f);
  EXPECT_EQ(c.sliding_window, 512);
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(c.is_sliding(i), i % 6 != 5) << i;
  EXPECT_TRUE(c.has_local_rope());
  EXPECT_FLOAT_EQ(c.rope_inv_freq(true)[1], static_cast<float>(std::pow(10000.0, -2.0 / 256)));
  EXPECT_FLOAT_EQ(c.rope_inv_freq(false)[1], static_cast<float>(std::pow(1e6, -2.0 / 256)));
  std::string bidirectional = kGemma3;
  bidirectional.replace(bidirectional.find("\"use_bidirectional_attention\": false"), 36,
                        "\"use_bidirectional_attention\": true");
  expect_load_error([&] { parse_hf_config(bidirectional, "cfg.json"); }, "cfg.json", "use_bidirectional_attention");
}

// google/gemma-2-2b-it's config.json.
constexpr const char* kGemma2 = R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 107],
  "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
  "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8, "num_hidden_layers": 26,
  "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32", "transformers_version": "4.42.4",
  "use_cache": true, "vocab_size": 256000})";

TEST(HfConfig, Gemma2) {
  const ModelConfig c = parse_hf_config(kGemma2, "cfg.json");
  EXPECT_EQ(c.arch, "gemma2");
  EXPECT_EQ(c.arch_name(), "gemma2");
  EXPECT_EQ(c.hidden_act, Activation::kGeluTanh);
  EXPECT_TRUE(c.sandwich_norms && c.norm_weight_plus_one && c.tie_word_embeddings);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(2304.0f));
  EXPECT_FLOAT_EQ(c.attention_score_scale(), 1.0f / 16.0f);
  EXPECT_DOUBLE_EQ(c.attn_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c.final_softcap, 30.0);
  EXPECT_EQ(c.sliding_window, 4096);
  for (int64_t i = 0; i < 26; ++i) EXPECT_EQ(c.is_sliding(i), i % 2 == 0) << i;
  EXPECT_FALSE(c.has_local_rope());  // one RoPE base for every layer
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 107}));

  // Gemma2Config's defaults when the caps are absent; null switches them off.
  std::string absent = kGemma2;
  absent.replace(absent.find("\"attn_logit_softcapping\": 50.0, "), 32, "");
  absent.replace(absent.find("\"final_logit_softcapping\": 30.0, "), 33, "");
  const ModelConfig d = parse_hf_config(absent, "cfg.json");
  EXPECT_DOUBLE_EQ(d.attn_softcap, 50.0);
  EXPECT_DOUBLE_EQ(d.final_softcap, 30.0);
  std::string off = kGemma2;
  off.replace(off.find("\"attn_logit_softcapping\": 50.0"), 30, "\"attn_logit_softcapping\": null");
  off.replace(off.find("\"final_logit_softcapping\": 30.0"), 31, "\"final_logit_softcapping\": null");
  const ModelConfig e = parse_hf_config(off, "cfg.json");
  EXPECT_DOUBLE_EQ(e.attn_softcap, 0.0);
  EXPECT_DOUBLE_EQ(e.final_softcap, 0.0);
}

// HuggingFaceTB/SmolLM3-3B's config.json (36 layers; its layer_types list, all full_attention, left out).
constexpr const char* kSmolLM3 = R"({
  "architectures": ["SmolLM3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": null,
  "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 11008, "max_position_embeddings": 65536, "max_window_layers": 28, "mlp_bias": false,
  "model_type": "smollm3", "no_rope_layer_interval": 4,
  "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0,
    1, 1, 1, 0],
  "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 4, "pad_token_id": 128004,
  "pretraining_tp": 2, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 5000000.0, "sliding_window": null,
  "torch_dtype": "bfloat16", "use_cache": false, "use_sliding_window": false, "vocab_size": 128256})";

TEST(HfConfig, SmolLM3) {
  const ModelConfig c = parse_hf_config(kSmolLM3, "cfg.json");
  EXPECT_EQ(c.arch, "smollm3");
  EXPECT_EQ(c.arch_name(), "smollm3");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_TRUE(c.has_nope_layers());
  for (int64_t i = 0; i < 36; ++i) {
    EXPECT_EQ(c.uses_rope(i), i % 4 != 3) << i;
    EXPECT_EQ(c.rope_table(i), i % 4 != 3 ? 0 : 1) << i;  // NoPE layers: the identity table after the global one
  }
  // Without the list, every no_rope_layer_interval-th layer; a list of the wrong length or values is refused.
  std::string interval = kSmolLM3;
  const size_t at = interval.find("\"no_rope_layers\"");
  interval.erase(at, interval.find(']', at) + 3 - at);
  interval.replace(interval.find("\"no_rope_layer_interval\": 4"), 27, "\"no_rope_layer_interval\": 3");
  const ModelConfig d = parse_hf_config(interval, "cfg.json");
  for (int64_t i = 0; i < 36; ++i) EXPECT_EQ(d.uses_rope(i), i % 3 != 2) << i;
  std::string bad = kSmolLM3;
  bad.replace(bad.find("[1, 1, 1, 0,"), 12, "[2, 1, 1, 0,");
  expect_load_error([&] { parse_hf_config(bad, "cfg.json"); }, "cfg.json", "no_rope_layers");
  std::string short_list = kSmolLM3;
  short_list.replace(short_list.find("[1, 1, 1, 0,"), 12, "[");
  expect_load_error([&] { parse_hf_config(short_list, "cfg.json"); }, "cfg.json", "no_rope_layers");
}

// allenai/Olmo-3-7B-Instruct's config.json (32 layers; layer_types left to the default rule).
constexpr const char* kOlmo3 = R"({
  "architectures": ["Olmo3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "eos_token_id": 100257,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
  "max_position_embeddings": 65536, "model_type": "olmo3", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06,
  "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1, "factor": 8.0,
    "original_max_position_embeddings": 8192, "rope_type": "yarn"},
  "rope_theta": 500000, "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 100278})";

TEST(HfConfig, Olmo3AndOlmo2) {
  const ModelConfig c = parse_hf_config(kOlmo3, "cfg.json");
  EXPECT_EQ(c.arch, "olmo2");
  EXPECT_TRUE(c.qk_norm && c.qk_norm_full_width && c.post_norms_only);
  EXPECT_FALSE(c.sandwich_norms || c.norm_weight_plus_one);
  EXPECT_EQ(c.sliding_window, 4096);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(c.is_sliding(i), i % 4 != 3) << i;
  // The sliding layers rotate with the unscaled table, the full ones with YaRN.
  EXPECT_TRUE(c.has_local_rope());
  EXPECT_EQ(c.rope_table(0), 1);
  EXPECT_EQ(c.rope_table(3), 0);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_NE(c.rope_inv_freq(true).back(), c.rope_inv_freq(false).back());
  // OLMo 2: the same block without windows (its config has no sliding_window or layer_types).
  std::string olmo2 = kOlmo3;
  olmo2.replace(olmo2.find("Olmo3ForCausalLM"), 16, "Olmo2ForCausalLM");
  olmo2.replace(olmo2.find("\"olmo3\""), 7, "\"olmo2\"");
  olmo2.replace(olmo2.find("\"sliding_window\": 4096, "), 24, "");
  const ModelConfig d = parse_hf_config(olmo2, "cfg.json");
  EXPECT_EQ(d.arch, "olmo2");
  EXPECT_EQ(d.sliding_window, 0);
  EXPECT_FALSE(d.has_local_rope());
}

// ibm-granite/granite-3.3-2b-instruct's config.json.
constexpr const char* kGranite = R"({
  "architectures": ["GraniteForCausalLM"], "attention_bias": false, "attention_dropout": 0.1,
  "attention_multiplier": 0.015625, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "logits_scaling": 8.0, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "granite",
  "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
  "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000000.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 49159})";

TEST(HfConfig, Granite) {
  const ModelConfig c = parse_hf_config(kGranite, "cfg.json");
  EXPECT_EQ(c.arch, "granite");
  EXPECT_EQ(c.arch_name(), "granite");
  EXPECT_FLOAT_EQ(c.embedding_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.attention_score_scale(), 0.015625f);  // not 1/sqrt(64)
  EXPECT_DOUBLE_EQ(c.residual_multiplier, 0.22);
  EXPECT_DOUBLE_EQ(c.logits_scaling, 8.0);
  expect_load_error([] { parse_hf_config(with(kGranite, "logits_scaling", "0"), "cfg.json"); }, "cfg.json",
                    "logits_scaling = 0");
}

// openai/gpt-oss-20b's config.json (its quantization_config left out: minfer reads the dequantized checkpoints).
constexpr const char* kGptOss = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, "eos_token_id": 200002,
  "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
  "initializer_range": 0.02, "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
  "num_hidden_layers": 4, "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false,
  "pad_token_id": 199999, "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                   "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088})";

TEST(HfConfig, GptOss) {
  const ModelConfig c = parse_hf_config(kGptOss, "cfg.json");
  EXPECT_EQ(c.arch, "gpt-oss");
  EXPECT_EQ(c.arch_name(), "gpt-oss");
  EXPECT_TRUE(c.attention_bias && c.o_bias && c.attention_sinks && c.moe_bias && c.moe_swiglu_oai);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe(0) && c.is_moe(3));
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_TRUE(c.is_sliding(0) && !c.is_sliding(1) && c.is_sliding(2) && !c.is_sliding(3));
  EXPECT_FALSE(c.has_local_rope());  // every layer rotates with the one YaRN table
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_NEAR(c.rope_scaling.attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  // Without rope_scaling, GptOssConfig's default (the same YaRN).
  std::string no_scaling = kGptOss;
  const size_t at = no_scaling.find("\"rope_scaling\"");
  no_scaling.erase(at, no_scaling.find("},", at) + 3 - at);
  const ModelConfig d = parse_hf_config(no_scaling, "cfg.json");
  EXPECT_EQ(d.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(d.rope_scaling.factor, 32.0);
  EXPECT_FALSE(d.rope_scaling.truncate);
  EXPECT_EQ(c.rope_inv_freq(), d.rope_inv_freq());
  expect_load_error([] { parse_hf_config(with(kGptOss, "swiglu_limit", "8.0"), "cfg.json"); }, "cfg.json",
                    "swiglu_limit 8");
  expect_load_error([] { parse_hf_config(with(kGptOss, "num_local_experts", "null"), "cfg.json"); }, "cfg.json",
                    "num_local_experts");
}

// microsoft/Phi-3.5-mini-instruct's config.json (its 48 longrope factors shortened to the 4 of a 16-dim head).
constexpr const char* kPhi35 = R"({
  "architectures": ["Phi3ForCausalLM"], "bos_token_id": 1, "eos_token_id": 32000, "hidden_act": "silu",
  "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 131072, "model_type": "phi3",
  "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4, "original_max_position_embeddings": 4096,
  "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
  "rope_scaling": {"long_factor": [1.0, 1.5, 3.0, 9.0], "short_factor": [1.0, 1.01, 1.1, 1.2], "type": "longrope"},
  "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 32064})";

TEST(HfConfig, Phi3Longrope) {
  const ModelConfig c = parse_hf_config(kPhi35, "cfg.json");
  EXPECT_EQ(c.arch, "phi3");
  EXPECT_EQ(c.rotary_dims(), 8);
  EXPECT_EQ(c.sliding_window, 262144);
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  // transformers: sqrt(1 + ln(131072 / 4096) / ln(4096)).
  EXPECT_NEAR(c.rope_scaling.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  const double base = std::pow(10000.0, -2.0 * 3 / 8);
  EXPECT_FLOAT_EQ(c.rope_inv_freq(false, 4096)[3], static_cast<float>(base / 1.2));  // short: context within 4096
  EXPECT_FLOAT_EQ(c.rope_inv_freq(false, 8192)[3], static_cast<float>(base / 9.0));  // long: past it
  std::string three = kPhi35;
  three.replace(three.find("[1.0, 1.5, 3.0, 9.0]"), 20, "[1.0, 1.5, 3.0]");
  expect_load_error([&] { parse_hf_config(three, "cfg.json"); }, "cfg.json", "longrope factors have 3 entries");
}

TEST(RopeInvFreq, PlainIsThetaPowerMinusTwoIOverD) {
  ModelConfig c;
  c.head_dim = 16;
  c.rope_theta = 10000.0;
  const std::vector<float> f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 8u);
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_FLOAT_EQ(f[i], static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / 16.0)));
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[4], 0.01f);
}

TEST(RopeInvFreq, Llama3ScalingMatchesTransformers) {
  const ModelConfig c = parse_hf_config(kLlama32, "config.json");
  const std::vector<float> f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 32u);
  // By hand from _compute_llama3_parameters: wavelengths below 8192/4 = 2048 keep their frequency, above 8192/1
  // are divided by 32, between they blend with smooth = (8192 / wavelen - 1) / (4 - 1).
  for (size_t i = 0; i < f.size(); ++i) {
    const double base = std::pow(500000.0, -2.0 * static_cast<double>(i) / 64.0);
    const double wavelen = 2 * std::numbers::pi / base;
    double expected = base;
    if (wavelen > 8192) {
      expected = base / 32;
    } else if (wavelen >= 2048) {
      const double smooth = (8192 / wavelen - 1) / 3;
      expected = (1 - smooth) * base / 32 + smooth * base;
    }
    EXPECT_NEAR(f[i], expected, expected * 1e-6) << i;
  }
  // Values printed by transformers' float32 code (torch 1.13) for this config: unscaled, blended, divided.
  const std::pair<size_t, double> torch_values[] = {
      {0, 1.0},
      {14, 0.0032114461064338684},
      {15, 0.0012905480107292533},
      {16, 0.000429556705057621},
      {17, 9.708286233944818e-05},
      {18, 1.9461638657958247e-05},
      {31, 9.418306490260875e-08},
  };
  for (const auto& [i, v] : torch_values) EXPECT_NEAR(f[i], v, v * 2e-6) << i;
}

// Qwen3's long-context setting (its model card: factor 4 over 32768 positions). The fastest-turning frequencies keep
// their value, the slowest are divided by the factor, and cos / sin are scaled by 0.1 ln(4) + 1 unless given.
TEST(HfConfig, YarnRopeScaling) {
  const ModelConfig c = parse_hf_config(
      qwen_with("rope_scaling", R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})"),
      "c");
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0);
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling{};
  const std::vector<float> yarn = c.rope_inv_freq(), unscaled = plain.rope_inv_freq();
  EXPECT_EQ(yarn.front(), unscaled.front());
  EXPECT_FLOAT_EQ(yarn.back(), unscaled.back() / 4.0f);
  for (size_t i = 1; i < yarn.size(); ++i) EXPECT_LE(yarn[i], unscaled[i]) << i;
  // Without original_max_position_embeddings, the model's context; an explicit attention factor wins.
  const ModelConfig d = parse_hf_config(
      qwen_with("rope_scaling", R"({"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.5})"), "c");
  EXPECT_EQ(d.rope_scaling.original_max_position_embeddings, d.max_position_embeddings);
  EXPECT_DOUBLE_EQ(d.rope_scaling.attention_factor, 1.5);
  expect_load_error(
      [] {
        parse_hf_config(qwen_with("rope_scaling", R"({"rope_type": "yarn", "factor": 2.0, "beta_fast": -1})"), "c");
      },
      "c", "yarn needs");
}

TEST(RopeInvFreq, LinearAndFreqFactors) {
  ModelConfig c;
  c.head_dim = 4;
  c.rope_theta = 100.0;
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4.0;
  EXPECT_EQ(c.rope_inv_freq(), (std::vector<float>{0.25f, 0.025f}));
  c.rope_scaling.type = "none";
  c.rope_scaling.freq_factors = {1.0f, 8.0f};
  EXPECT_EQ(c.rope_inv_freq(), (std::vector<float>{1.0f, 0.1f / 8.0f}));
}

TEST(GgufConfig, Stories260K) {
  const auto g = GgufFile::open(kStoriesGguf);
  const ModelConfig c = read_gguf_config(*g);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 2048);  // the GGUF says 2048; the .bin's seq_len is 512
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_style, kernels::RopeStyle::kInterleaved);
  EXPECT_FALSE(c.tie_word_embeddings);  // the converter wrote output.weight
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(c.dtype, DType::F32);
}

TEST(ModelConfigValidate, NamesTheField) {
  ModelConfig c = parse_hf_config(kQwen05, "config.json");
  c.head_dim = 63;
  expect_load_error([&] { c.validate("src"); }, "src", "head_dim 63 is odd");
  c = parse_hf_config(kQwen05, "config.json");
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 8;
  c.rope_scaling.low_freq_factor = 4;
  c.rope_scaling.high_freq_factor = 1;
  expect_load_error([&] { c.validate("src"); }, "src", "low_freq_factor < high_freq_factor");
  c = parse_hf_config(kQwen05, "config.json");
  c.vocab_size = 0;
  expect_load_error([&] { c.validate("src"); }, "src", "vocab_size = 0");
}

}  // namespace
}  // namespace minfer
