#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "formats/safetensors_file.h"
#include "model/model_weights.h"
#include "model/test_model_writer.h"
#include "model/test_tokenizer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TestModelWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_tm_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  TestModelResult write(const std::string& preset, const std::string& sub, DType dtype, uint64_t seed = 0,
                        uint64_t shard_bytes = 0, bool skip_data = false, const std::string& tokenizer = "") {
    TestModelOptions o;
    o.preset = preset;
    o.out_dir = (dir_ / sub).string();
    o.dtype = dtype;
    o.seed = seed;
    o.shard_bytes = shard_bytes;
    o.skip_weight_data = skip_data;
    o.tokenizer_json = tokenizer;
    return write_test_model(o);
  }
  json read_json(const std::string& sub, const std::string& file) const {
    return json::parse(std::ifstream(dir_ / sub / file));
  }

  fs::path dir_;
};

double stddev(const Tensor& t) {
  const Tensor f = to_f32(t);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    s += f.as<float>()[i];
    s2 += static_cast<double>(f.as<float>()[i]) * f.as<float>()[i];
  }
  const double n = static_cast<double>(f.numel());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

TEST_F(TestModelWriter, TinyQwen2LoadsWithItsShapes) {
  const TestModelResult r = write("tiny-qwen2", "q", DType::F32, 7);
  const ModelWeights w = load_model((dir_ / "q").string());
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.dtype, DType::F32);
  EXPECT_EQ(c.vocab_size, r.vocab_size);
  EXPECT_EQ(w.tensors.size(), 2u + 2u * 12u);
  EXPECT_EQ(w.find("lm_head"), nullptr);
  // vocab = the generated tokenizer's size; the specials follow the learned tokens.
  const json tok = read_json("q", "tokenizer.json");
  const json& added = tok["added_tokens"];
  ASSERT_EQ(added.size(), 3u);
  EXPECT_EQ(added[2]["content"], "<|im_end|>");
  EXPECT_EQ(added[2]["id"], r.vocab_size - 1);
  EXPECT_EQ(c.bos_token_id, added[0]["id"].get<int>());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{added[0]["id"].get<int>(), added[2]["id"].get<int>()}));
  // Random, but with the intended scale: embedding ~N(0, 0.08), layer matrices ~N(0, 0.16), norms within 1 +- 0.1.
  EXPECT_NEAR(stddev(w.get("layers.0.w_up")), 0.16, 0.008);
  EXPECT_NEAR(stddev(w.get("embed")), 0.08, 0.004);
  const Tensor& norm = w.get("layers.1.ffn_norm");
  for (int64_t i = 0; i < norm.numel(); ++i) {
    EXPECT_GE(norm.as<float>()[i], 0.9f);
    EXPECT_LE(norm.as<float>()[i], 1.1f);
  }
  EXPECT_GT(stddev(norm), 0.01);
}

TEST_F(TestModelWriter, TinyLlamaIsUntiedWithLlama3Scaling) {
  write("tiny-llama", "l", DType::BF16, 1);
  const ModelWeights w = load_model((dir_ / "l").string());
  EXPECT_EQ(w.config.arch, "llama");
  EXPECT_EQ(w.config.num_layers, 3);
  EXPECT_FALSE(w.config.tie_word_embeddings);
  EXPECT_FALSE(w.config.attention_bias);
  EXPECT_EQ(w.config.dtype, DType::BF16);
  EXPECT_EQ(w.config.rope_scaling.type, "llama3");
  EXPECT_NE(w.find("lm_head"), nullptr);
  EXPECT_EQ(w.get("layers.2.wk").shape, (std::vector<int64_t>{32, 64}));
  // head_dim 16 with theta 5e5 puts frequencies in all three llama3 bands: kept, blended and divided.
  const std::vector<float> f = w.config.rope_inv_freq();
  ModelConfig plain = w.config;
  plain.rope_scaling.type = "none";
  const std::vector<float> g = plain.rope_inv_freq();
  EXPECT_EQ(f[3], g[3]);
  EXPECT_NEAR(f[7], g[7] / 32, g[7] * 1e-6);
  EXPECT_TRUE(f[4] < g[4] && f[4] > g[4] / 32);
  const json gen = read_json("l", "generation_config.json");
  EXPECT_EQ(gen["eos_token_id"].size(), 3u);
  EXPECT_EQ(w.config.eos_token_ids.size(), 3u);
  const json cfg = read_json("l", "tokenizer_config.json");
  EXPECT_EQ(cfg["bos_token"], "<|begin_of_text|>");
}

TEST_F(TestModelWriter, SameSeedSameBytesOtherSeedOtherBytes) {
  write("tiny-llama", "a", DType::F32, 42);
  write("tiny-llama", "b", DType::F32, 42);
  write("tiny-llama", "c", DType::F32, 43);
  const ModelWeights a = load_model((dir_ / "a").string());
  const ModelWeights b = load_model((dir_ / "b").string());
  const ModelWeights c = load_model((dir_ / "c").string());
  for (const auto& [name, t] : a.tensors) {
    EXPECT_EQ(std::memcmp(t.data, b.get(name).data, t.nbytes()), 0) << name;
    EXPECT_NE(std::memcmp(t.data, c.get(name).data, t.nbytes()), 0) << name;
  }
  // Distinct tensors get distinct streams.
  EXPECT_NE(std::memcmp(a.get("layers.0.w_gate").data, a.get("layers.0.w_up").data, 64), 0);
}

TEST_F(TestModelWriter, ShardedRoundTripMatchesSingleFile) {
  write("tiny-qwen2", "single", DType::BF16, 5);
  const TestModelResult r = write("tiny-qwen2", "sharded", DType::BF16, 5, 20000);
  const json index = read_json("sharded", "model.safetensors.index.json");
  EXPECT_GT(r.files.size(), 4u);
  EXPECT_EQ(index["metadata"]["total_size"], r.weight_bytes);
  EXPECT_FALSE(fs::exists(dir_ / "sharded" / "model.safetensors"));
  const ModelWeights one = load_model((dir_ / "single").string());
  const ModelWeights many = load_model((dir_ / "sharded").string());
  ASSERT_EQ(one.tensors.size(), many.tensors.size());
  for (const auto& [name, t] : one.tensors) {
    EXPECT_EQ(many.get(name).shape, t.shape);
    EXPECT_EQ(std::memcmp(many.get(name).data, t.data, t.nbytes()), 0) << name;
  }
  // Writing a single file over the shards removes them, so the loader cannot pick up stale ones.
  write("tiny-qwen2", "sharded", DType::BF16, 5);
  EXPECT_FALSE(fs::exists(dir_ / "sharded" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir_ / "sharded" / r.files[0]));
}

// The real shapes: config.json must be the real model's and every tensor header must load. The weight files are
// sparse (no data generated), so this costs neither disk nor time.
struct RealPreset {
  const char* preset;
  uint64_t parameters;  // as published
  const char* config;   // the real config.json's fields that matter
};

TEST_F(TestModelWriter, RealPresetsHaveTheRealConfigAndShapes) {
  const RealPreset presets[] = {
      {"qwen2.5-0.5b", 494032768,
       R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
           "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
           "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
           "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
           "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
           "use_sliding_window": false, "vocab_size": 151936})"},
      {"qwen2.5-1.5b", 1543714304,
       R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
           "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 1536, "initializer_range": 0.02,
           "intermediate_size": 8960, "max_position_embeddings": 131072, "max_window_layers": 28,
           "model_type": "qwen2", "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": true,
           "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
           "use_sliding_window": false, "vocab_size": 151936})"},
      {"llama-3.2-1b", 1235814400,
       R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
           "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
           "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
           "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
           "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
           "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
           "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})"},
      {"qwen3-0.6b", 596049920,
       R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
           "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
           "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
           "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
           "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": true,
           "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
           "use_sliding_window": false, "vocab_size": 151936})"},
  };
  for (const RealPreset& p : presets) {
    SCOPED_TRACE(p.preset);
    EXPECT_EQ(default_test_model_dtype(p.preset), DType::BF16);
    const TestModelResult r = write(p.preset, p.preset, DType::BF16, 0, 0, /*skip_data=*/true);
    EXPECT_EQ(r.parameters, p.parameters);
    EXPECT_EQ(read_json(p.preset, "config.json"), json::parse(p.config));
    const ModelWeights w = load_model((dir_ / p.preset).string());
    uint64_t params = 0;
    for (const auto& [name, t] : w.tensors) params += static_cast<uint64_t>(t.numel());
    EXPECT_EQ(params, p.parameters);
    EXPECT_EQ(w.config.dtype, DType::BF16);
    // The generated tokenizer fills the whole vocabulary, the specials at their real ids.
    const json tok = read_json(p.preset, "tokenizer.json");
    const json& added = tok["added_tokens"];
    EXPECT_EQ(added.back()["id"].get<int64_t>() + 1, w.config.vocab_size);
    EXPECT_EQ(added[0]["id"].get<int64_t>(), w.config.bos_token_id);
    fs::remove_all(dir_ / p.preset);
  }
}

// gpt-oss-20b: openai/gpt-oss-20b's parameter count (its safetensors' 20,914,757,184, experts counted unquantized),
// written sparse (loading it would need the 39 GiB of its bf16 experts); --layers keeps the first layers of a shape.
TEST_F(TestModelWriter, GptOss20bHasTheRealParameterCountAndLayersCut) {
  const TestModelResult r = write("gpt-oss-20b", "g", DType::BF16, 0, 0, /*skip_data=*/true);
  EXPECT_EQ(r.parameters, 20914757184u);
  const json config = read_json("g", "config.json");
  EXPECT_EQ(config["num_local_experts"], 32);
  EXPECT_EQ(config["layer_types"].size(), 24u);
  fs::remove_all(dir_ / "g");
  TestModelOptions o;
  o.preset = "tiny-gpt-oss";
  o.out_dir = (dir_ / "t").string();
  o.dtype = DType::F32;
  o.layers = 1;
  write_test_model(o);
  const ModelWeights w = load_model(o.out_dir);
  EXPECT_EQ(w.config.num_layers, 1);
  EXPECT_EQ(read_json("t", "config.json")["layer_types"].size(), 1u);
  o.layers = 3;  // more than the preset has
  EXPECT_THROW(write_test_model(o), Error);
}

TEST_F(TestModelWriter, CopiesAGivenTokenizer) {
  const std::string qwen = std::string(MINFER_CACHE_DIR) + "/qwen-tokenizer/tokenizer.json";
  if (!fs::exists(qwen)) GTEST_SKIP() << "no " << qwen << " (scripts/fetch-qwen-tokenizer.sh)";
  const TestModelResult r = write("tiny-qwen2", "t", DType::BF16, 0, 0, false, qwen);
  EXPECT_GE(r.vocab_size, 151665);
  EXPECT_TRUE(fs::exists(dir_ / "t" / "tokenizer_config.json"));
  const ModelWeights w = load_model((dir_ / "t").string());
  EXPECT_EQ(w.config.vocab_size, r.vocab_size);
  EXPECT_EQ(w.config.bos_token_id, 151643);
  EXPECT_EQ(w.config.eos_token_ids, (std::vector<int32_t>{151643, 151645}));
  EXPECT_EQ(fs::file_size(dir_ / "t" / "tokenizer.json"), fs::file_size(qwen));
}

TEST_F(TestModelWriter, Errors) {
  EXPECT_THROW(write("gpt-5", "x", DType::F32), Error);
  EXPECT_THROW(write("tiny-llama", "x", DType::F16), Error);
  fs::create_directories(dir_);
  std::ofstream(dir_ / "bad.json") << "{";
  EXPECT_THROW(write("tiny-llama", "x", DType::F32, 0, 0, false, (dir_ / "bad.json").string()), LoadError);
}

TEST(TestTokenizer, IsAValidByteLevelBpe) {
  const auto alphabet = byte_level_alphabet();
  ASSERT_EQ(alphabet.size(), 256u);
  EXPECT_EQ(std::set<std::string>(alphabet.begin(), alphabet.end()).size(), 256u);
  EXPECT_EQ(alphabet[0], "!");
  EXPECT_EQ(alphabet[188], "\xc4\x80");          // byte 0 -> U+0100, id 188 as in GPT-2 and Qwen
  EXPECT_EQ(byte_to_unicode(' '), "\xc4\xa0");   // "Ġ"
  EXPECT_EQ(byte_to_unicode('\n'), "\xc4\x8a");  // "Ċ"

  for (TokenizerFamily family : {TokenizerFamily::kQwen2, TokenizerFamily::kLlama3}) {
    const GeneratedTokenizer g = generate_test_tokenizer(family);
    const json& model = g.tokenizer["model"];
    std::set<int64_t> ids;
    for (const auto& [text, id] : model["vocab"].items()) ids.insert(id.get<int64_t>());
    for (const auto& t : g.tokenizer["added_tokens"]) {
      ids.insert(t["id"].get<int64_t>());
      EXPECT_TRUE(t["special"].get<bool>());
    }
    EXPECT_EQ(static_cast<int64_t>(ids.size()), g.size);  // ids 0 .. size - 1, each once
    EXPECT_EQ(*ids.rbegin(), g.size - 1);
    EXPECT_GE(model["merges"].size(), 200u);
    EXPECT_LE(model["merges"].size(), 400u);
    for (const auto& m : model["merges"]) {
      const std::string a = m[0], b = m[1];
      EXPECT_TRUE(model["vocab"].contains(a) && model["vocab"].contains(b) && model["vocab"].contains(a + b))
          << a << " " << b;
    }
    EXPECT_TRUE(model["vocab"].contains("\xc4\xa0the"));  // " the" learned as one token
  }
  // A real shape's vocabulary smaller than the family's special-token base (Mistral's 32000): the named specials
  // end it, every id once.
  const GeneratedTokenizer small = generate_test_tokenizer(TokenizerFamily::kLlama3, 32000);
  EXPECT_EQ(small.size, 32000);
  std::set<int64_t> small_ids;
  for (const auto& [text, id] : small.tokenizer["model"]["vocab"].items()) small_ids.insert(id.get<int64_t>());
  for (const auto& t : small.tokenizer["added_tokens"]) small_ids.insert(t["id"].get<int64_t>());
  EXPECT_EQ(small_ids.size(), 32000u);
  EXPECT_EQ(*small_ids.rbegin(), 31999);
  // Deterministic.
  EXPECT_EQ(generate_test_tokenizer(TokenizerFamily::kQwen2).tokenizer.dump(),
            generate_test_tokenizer(TokenizerFamily::kQwen2).tokenizer.dump());
}

}  // namespace
}  // namespace minfer
