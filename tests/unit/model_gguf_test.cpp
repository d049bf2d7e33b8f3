// GGUF loading beyond stories260K: qwen2 (biases, tied, neox), rope_freqs, f16/q8_0 weights and the errors,
// on small GGUF files written here.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model_weights.h"
#include "test_support.h"

namespace minfer {
namespace {

using testing::expect_load_error;

namespace fs = std::filesystem;

// A minimal GGUF v3 writer: metadata of strings, u32, f32 and string arrays; tensors of zeros or given f32s.
class GgufBuilder {
 public:
  void str(const std::string& key, const std::string& v) {
    kv(key, 8);
    put_str(v);
  }
  void u32(const std::string& key, uint32_t v) {
    kv(key, 4);
    put(v);
  }
  void f32(const std::string& key, float v) {
    kv(key, 6);
    put(v);
  }
  void tokens(int n) {
    kv("tokenizer.ggml.tokens", 9);
    put(uint32_t{8});
    put(static_cast<uint64_t>(n));
    for (int i = 0; i < n; ++i) put_str(fmt::format("t{}", i));
  }
  // shape outermost first; ggml type 0 = F32, 1 = F16, 2 = Q4_0, 8 = Q8_0, 12 = Q4_K, 14 = Q6_K, 16 = IQ2_XXS, or any
  // other id (one byte per element).
  void tensor(const std::string& name, std::vector<uint64_t> shape, uint32_t type = 0, std::vector<float> values = {}) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    const uint64_t bytes = type == 0    ? 4 * n
                           : type == 1  ? 2 * n
                           : type == 2  ? n / 32 * 18
                           : type == 8  ? n / 32 * 34
                           : type == 12 ? n / 256 * 144
                           : type == 14 ? n / 256 * 210
                           : type == 16 ? n / 256 * 66
                                        : n;
    tensors_.push_back({name, std::move(shape), type, data_size_, std::move(values)});
    data_size_ += (bytes + 31) / 32 * 32;
  }
  void write(const std::string& path) const {
    std::string out = "GGUF";
    auto app = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    app(uint32_t{3});
    app(static_cast<uint64_t>(tensors_.size()));
    app(kv_count_);
    out += kv_;
    for (const auto& t : tensors_) {
      app(static_cast<uint64_t>(t.name.size()));
      out += t.name;
      app(static_cast<uint32_t>(t.shape.size()));
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) app(*it);  // GGUF: innermost first
      app(t.type);
      app(t.offset);
    }
    out.append((32 - out.size() % 32) % 32, '\0');
    const size_t data_start = out.size();
    out.append(data_size_, '\0');
    for (const auto& t : tensors_)
      if (!t.values.empty()) std::memcpy(&out[data_start + t.offset], t.values.data(), 4 * t.values.size());
    std::ofstream(path, std::ios::binary) << out;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> shape;
    uint32_t type;
    uint64_t offset;
    std::vector<float> values;
  };
  template <typename V>
  void put(V v) {
    kv_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void put_str(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    kv_ += s;
  }
  void kv(const std::string& key, uint32_t type) {
    put_str(key);
    put(type);
    ++kv_count_;
  }
  std::string kv_;
  uint64_t kv_count_ = 0;
  std::vector<T> tensors_;
  uint64_t data_size_ = 0;
};

// A 2-layer model: hidden h (64), 4 heads of h / 4, 2 kv heads, ffn 2h, vocab 100.
GgufBuilder tiny(const std::string& arch, bool bias, bool output, uint32_t matrix_type = 0, uint64_t h = 64) {
  GgufBuilder b;
  b.str("general.architecture", arch);
  b.u32(arch + ".embedding_length", static_cast<uint32_t>(h));
  b.u32(arch + ".block_count", 2);
  b.u32(arch + ".feed_forward_length", static_cast<uint32_t>(2 * h));
  b.u32(arch + ".attention.head_count", 4);
  b.u32(arch + ".attention.head_count_kv", 2);
  b.u32(arch + ".context_length", 4096);
  b.f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  b.f32(arch + ".rope.freq_base", 1000000.0f);
  b.str("tokenizer.ggml.model", "gpt2");
  b.tokens(100);
  b.u32("tokenizer.ggml.bos_token_id", 97);
  b.u32("tokenizer.ggml.eos_token_id", 98);
  b.u32("tokenizer.ggml.eot_token_id", 99);
  b.tensor("token_embd.weight", {100, h}, matrix_type);
  b.tensor("output_norm.weight", {h});
  if (output) b.tensor("output.weight", {100, h}, matrix_type);
  for (int i = 0; i < 2; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    b.tensor(p + "attn_norm.weight", {h});
    b.tensor(p + "attn_q.weight", {h, h}, matrix_type);
    b.tensor(p + "attn_k.weight", {h / 2, h}, matrix_type);
    b.tensor(p + "attn_v.weight", {h / 2, h}, matrix_type);
    if (bias) {
      b.tensor(p + "attn_q.bias", {h});
      b.tensor(p + "attn_k.bias", {h / 2});
      b.tensor(p + "attn_v.bias", {h / 2});
    }
    b.tensor(p + "attn_output.weight", {h, h}, matrix_type);
    b.tensor(p + "ffn_norm.weight", {h});
    b.tensor(p + "ffn_gate.weight", {2 * h, h}, matrix_type);
    b.tensor(p + "ffn_up.weight", {2 * h, h}, matrix_type);
    b.tensor(p + "ffn_down.weight", {h, 2 * h}, matrix_type);
  }
  return b;
}

class GgufLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("minfer_gguf_" + std::to_string(::getpid()) + "_" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST_F(GgufLoad, Qwen2IsNeoxTiedWithBiases) {
  tiny("qwen2", true, false).write(path_);
  const ModelWeights w = load_model(path_);
  EXPECT_EQ(w.format, CheckpointFormat::kGguf);
  EXPECT_EQ(w.config.arch, "qwen2");
  EXPECT_EQ(w.config.rope_style, kernels::RopeStyle::kNeox);
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_TRUE(w.config.attention_bias);
  EXPECT_EQ(w.config.head_dim, 16);
  EXPECT_EQ(w.config.vocab_size, 100);
  EXPECT_DOUBLE_EQ(w.config.rope_theta, 1e6);
  EXPECT_EQ(w.config.bos_token_id, 97);
  EXPECT_EQ(w.config.eos_token_ids, (std::vector<int32_t>{98, 99}));
  EXPECT_EQ(w.tensors.size(), 2u + 2u * 12u);
  EXPECT_EQ(w.get("layers.1.bk").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(w.tokenizer.gguf_path, path_);
}

TEST_F(GgufLoad, LlamaWithRopeFreqsAndF16AndQ8Weights) {
  for (uint32_t type : {1u, 8u}) {
    GgufBuilder b = tiny("llama", false, true, type);
    b.tensor("rope_freqs.weight", {8}, 0, {1, 1, 1, 1, 2, 8, 32, 32});
    b.write(path_);
    const ModelWeights w = load_model(path_);
    EXPECT_EQ(w.config.rope_style, kernels::RopeStyle::kInterleaved);
    EXPECT_FALSE(w.config.tie_word_embeddings);
    EXPECT_FALSE(w.config.attention_bias);
    EXPECT_EQ(w.config.rope_scaling.freq_factors.size(), 8u);
    const std::vector<float> f = w.config.rope_inv_freq();
    EXPECT_FLOAT_EQ(f[0], 1.0f);
    EXPECT_FLOAT_EQ(f[7], static_cast<float>(std::pow(1e6, -14.0 / 16) / 32));
    EXPECT_EQ(w.config.dtype, type == 1 ? DType::F16 : DType::Q8_0);
    EXPECT_EQ(w.get("lm_head").shape, (std::vector<int64_t>{100, 64}));
  }
}

TEST_F(GgufLoad, UnsupportedTensorType) {
  tiny("llama", false, true, 16, 256).write(path_);
  expect_load_error([&] { load_model(path_); }, path_,
                    "tensor 'blk.0.attn_q.weight' has type IQ2_XXS, which minfer does not support");
  tiny("llama", false, true, 99).write(path_);
  expect_load_error([&] { load_model(path_); }, path_, "has type type 99, which minfer does not support");
}

// GGUF block types load as themselves, in a mix within one file (here Q4_K matrices beside a Q6_K embedding).
TEST_F(GgufLoad, BlockTypesLoadInAnyMix) {
  tiny("llama", false, true, 2).write(path_);
  EXPECT_EQ(load_model(path_).get("layers.0.wq").dtype, DType::Q4_0);
  GgufBuilder b = tiny("llama", false, false, 12, 256);
  b.write(path_);
  const ModelWeights w = load_model(path_);
  EXPECT_EQ(w.get("layers.1.w_down").dtype, DType::Q4_K);
  EXPECT_EQ(w.config.dtype, DType::Q4_K);
}

TEST_F(GgufLoad, RowsThatAreNotWholeBlocksAreRefused) {
  tiny("llama", false, true, 12).write(path_);  // Q4_K rows of 64: a block is 256
  expect_load_error([&] { load_model(path_); }, path_,
                    "tensor 'token_embd.weight' of type Q4_K: row length 64 is not a multiple of the block size 256");
}

// Truncations and flipped bytes of block-type files: a LoadError or a model, never a crash (also under ASan).
TEST_F(GgufLoad, CorruptedBlockTypeFilesNeverCrash) {
  for (uint32_t type : {2u, 12u, 14u}) {
    tiny("llama", false, true, type, 256).write(path_);
    std::string good(fs::file_size(path_), '\0');
    std::ifstream(path_, std::ios::binary).read(good.data(), static_cast<std::streamsize>(good.size()));
    for (uint64_t i = 0; i < good.size(); i += good.size() / 97 + 1) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0xa5);
      std::ofstream(path_, std::ios::binary | std::ios::trunc) << bad.substr(0, i % 3 == 0 ? i : bad.size());
      try {
        load_model(path_);
      } catch (const LoadError&) {
      }
    }
  }
}

TEST_F(GgufLoad, ShapeMismatchNamesTheGgufTensor) {
  GgufBuilder b = tiny("llama", false, true);
  b.tensor("blk.2.attn_q.weight", {64, 64});
  b.write(path_);
  expect_load_error([&] { load_model(path_); }, path_, "unexpected tensor 'blk.2.attn_q.weight'");
  GgufBuilder c;
  c = tiny("llama", false, true);
  c.u32("llama.attention.head_count_kv", 4);  // a later duplicate key wins: kv heads 4, so attn_k is too small
  c.write(path_);
  expect_load_error([&] { load_model(path_); }, path_,
                    "shape mismatch for tensor 'blk.0.attn_k.weight': expected [64, 64], got [32, 64]");
}

TEST_F(GgufLoad, PartialRotaryAndMissingMetadata) {
  // Partial rotary embedding (Phi-3 style): RoPE on the leading 8 dims of each head.
  GgufBuilder b = tiny("llama", false, true);
  b.u32("llama.rope.dimension_count", 8);
  b.write(path_);
  EXPECT_EQ(load_model(path_).config.rotary_dims(), 8);
  GgufBuilder odd = tiny("llama", false, true);
  odd.u32("llama.rope.dimension_count", 7);
  odd.write(path_);
  expect_load_error([&] { load_model(path_); }, path_, "7 rotary dims");
  GgufBuilder c;
  c.str("general.architecture", "qwen2");
  c.write(path_);
  expect_load_error([&] { load_model(path_); }, path_, "missing metadata 'qwen2.embedding_length'");
}

TEST_F(GgufLoad, RealVocabOnlyFiles) {
  const std::string dir = std::string(MINFER_SHARED_DIR) + "/testdata/tokenizer/";
  expect_load_error([&] { load_model(dir + "ggml-vocab-gpt-2.gguf"); }, dir + "ggml-vocab-gpt-2.gguf",
                    "unsupported architecture 'gpt2' (general.architecture; supported: llama, qwen2, qwen3");
  expect_load_error([&] { load_model(dir + "ggml-vocab-llama-spm.gguf"); }, dir + "ggml-vocab-llama-spm.gguf",
                    "missing tensor 'token_embd.weight'");
}

}  // namespace
}  // namespace minfer
