#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "formats/safetensors_file.h"
#include "formats/safetensors_writer.h"
#include "kernels/quant.h"
#include "model/loaders/loaders.h"
#include "model/model_weights.h"
#include "model/test_model_writer.h"
#include "test_support.h"

namespace minfer {
namespace {

using testing::expect_load_error;

namespace fs = std::filesystem;

const std::string kModels = std::string(MINFER_SHARED_DIR) + "/models/stories260K";
const std::string kBin = kModels + "/stories260K.bin";
const std::string kGguf = kModels + "/stories260K.gguf";

// A [4, 256] weight of `type` with random bytes, every 2-byte pair made a finite f16 below 2 (so whichever pairs
// the type reads as its scales hold sane values; the integer codes stay random).
Tensor random_blocks(DType type, uint32_t seed) {
  Tensor t = Tensor::allocate(type, {4, 256});
  std::mt19937 rng(seed);
  uint8_t* b = t.mutable_as<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) b[i] = static_cast<uint8_t>(rng());
  for (size_t i = 1; i < t.nbytes(); i += 2) b[i] &= 0xBF;  // clear the top exponent bit of each f16's high byte
  return t;
}

std::vector<float> dequantized(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16) {
    const Tensor f = to_f32(t);
    std::memcpy(v.data(), f.data, v.size() * 4);
  } else {
    kernels::dequantize_rows(t, 0, t.dim(0), v.data());
  }
  return v;
}

// Granite's multipliers folded into the weights: every dtype the loaders give (float, and each GGUF block type through
// its f16 scale fields) dequantizes to the multiplier times the original, within the rounding of those fields.
TEST(FoldOutputScales, EveryWeightTypeScalesAsAWhole) {
  for (DType type :
       {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
        DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    ModelWeights w;
    w.config.num_layers = 1;
    w.config.residual_multiplier = 0.22;
    w.config.logits_scaling = 8.0;
    Tensor original = random_blocks(type, 3);
    if (type == DType::F32) {  // random bytes are not sane f32s: make them
      float* v = original.mutable_as<float>();
      for (int64_t i = 0; i < original.numel(); ++i) v[i] = std::sin(static_cast<float>(i));
    }
    w.tensors["layers.0.wo"] = original;
    w.tensors["layers.0.w_down"] = original;
    Tensor norm = Tensor::allocate(DType::F32, {4});
    for (int i = 0; i < 4; ++i) norm.mutable_as<float>()[i] = 1.0f + static_cast<float>(i);
    w.tensors["final_norm"] = norm;
    const std::vector<float> before = dequantized(original);
    fold_output_scales(w);
    const std::vector<float> after = dequantized(w.get("layers.0.wo"));
    EXPECT_EQ(dequantized(original), before);  // a scaled copy: the loaded (mapped) tensor is not written
    float largest = 0.0f;
    for (float v : before) largest = std::max(largest, std::fabs(0.22f * v));
    int misses = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      // f16 fields round to 2^-11 relative; bf16 elements to 2^-9.
      if (std::fabs(after[i] - 0.22f * before[i]) > 4e-3f * largest + 1e-30f && ++misses <= 3)
        ADD_FAILURE() << "element " << i << ": " << after[i] << " vs 0.22 x " << before[i];
    }
    EXPECT_EQ(misses, 0);
    EXPECT_FLOAT_EQ(w.get("final_norm").as<float>()[3], 4.0f / 8.0f);
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

TEST(Stories260K, LoadsTheLlama2cCheckpoint) {
  const ModelWeights w = load_model(kBin);
  EXPECT_EQ(w.format, CheckpointFormat::kLlama2c);
  const ModelConfig& c = w.config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.rope_style, kernels::RopeStyle::kInterleaved);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(w.tensors.size(), 47u);  // tied: no lm_head
  EXPECT_EQ(w.find("lm_head"), nullptr);
  EXPECT_EQ(w.get("layers.4.w_down").shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(w.tokenizer.llama2c_tokenizer_bin, kModels + "/tok512.bin");
  EXPECT_THROW(w.get("layers.5.wq"), Error);
}

TEST(Stories260K, LoadsTheGguf) {
  const ModelWeights w = load_model(kGguf);
  EXPECT_EQ(w.format, CheckpointFormat::kGguf);
  EXPECT_EQ(w.config.vocab_size, 512);
  EXPECT_EQ(w.config.num_kv_heads, 4);
  EXPECT_EQ(w.tensors.size(), 48u);  // embed, final_norm, lm_head (output.weight) and 5 x 9 per layer
  EXPECT_NE(w.find("lm_head"), nullptr);
  EXPECT_EQ(w.tokenizer.gguf_path, kGguf);
}

// The GGUF is llama.cpp's conversion of the same checkpoint. Neither loader permutes Q/K rows: both formats
// store them in Meta's interleaved order (rope_style kInterleaved), so the bytes must agree exactly.
TEST(Stories260K, AllGgufTensorsAreBitIdenticalToTheBin) {
  const ModelWeights bin = load_model(kBin);
  const ModelWeights gguf = load_model(kGguf);
  size_t compared = 0;
  for (const auto& [name, t] : gguf.tensors) {
    // The .bin shares its classifier with the embedding; the GGUF stores it as output.weight.
    const Tensor& ref = bin.get(name == "lm_head" ? "embed" : name);
    EXPECT_TRUE(same_bits(t, ref)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 48u);
  // The check has teeth: HF's Q/K row permutation (interleaved -> neox) would change wq.
  const Tensor& wq = bin.get("layers.0.wq");
  const int64_t hd = bin.config.head_dim, dim = bin.config.hidden_size;
  bool permutation_differs = false;
  for (int64_t h = 0; h < bin.config.num_heads && !permutation_differs; ++h)
    for (int64_t r = 0; r < hd && !permutation_differs; ++r) {
      const int64_t neox_src = h * hd + (r < hd / 2 ? 2 * r : 2 * (r - hd / 2) + 1);
      permutation_differs = std::memcmp(wq.as<float>() + (h * hd + r) * dim, wq.as<float>() + neox_src * dim, 4 * dim);
    }
  EXPECT_TRUE(permutation_differs);
}

class LoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_load_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    TestModelOptions o;
    o.preset = preset();
    o.out_dir = dir_.string();
    o.dtype = DType::F32;
    write_test_model(o);
    weights_ = (dir_ / "model.safetensors").string();
    original_ = SafetensorsFile::open(weights_);
  }
  void TearDown() override {
    original_.reset();
    fs::remove_all(dir_);
  }

  virtual const char* preset() const { return "tiny-llama"; }

  // Rewrites model.safetensors from the original with `name` dropped (replacement empty) or replaced (under
  // `renamed` when given).
  void rewrite(const std::string& name, const Tensor* replacement, const std::string& renamed = "") {
    std::vector<SafetensorsEntry> entries;
    for (const auto& info : original_->tensors()) {
      if (info.name != name) {
        entries.push_back(SafetensorsEntry::from_tensor(info.name, original_->tensor(info)));
      } else if (replacement != nullptr) {
        entries.push_back(SafetensorsEntry::from_tensor(renamed.empty() ? info.name : renamed, *replacement));
      }
    }
    const std::string tmp = weights_ + ".tmp";
    write_safetensors(tmp, entries);
    fs::rename(tmp, weights_);
  }

  fs::path dir_;
  std::string weights_;
  std::shared_ptr<SafetensorsFile> original_;
};

TEST_F(LoaderErrors, TheWrittenModelLoads) {
  const ModelWeights w = load_model(dir_.string());
  EXPECT_EQ(w.config.num_layers, 3);
  EXPECT_EQ(w.tokenizer.hf_tokenizer_json, (dir_ / "tokenizer.json").string());
  // Also through a file of the directory.
  EXPECT_EQ(load_model((dir_ / "config.json").string()).tensors.size(), w.tensors.size());
}

TEST_F(LoaderErrors, MissingTensor) {
  rewrite("model.layers.1.mlp.up_proj.weight", nullptr);
  expect_load_error([&] { load_model(dir_.string()); }, weights_,
                    "missing tensor 'model.layers.1.mlp.up_proj.weight' (expected shape [128, 64])");
}

TEST_F(LoaderErrors, WrongShape) {
  const Tensor wrong = Tensor::allocate(DType::F32, {64, 64});
  rewrite("model.layers.0.self_attn.k_proj.weight", &wrong);
  expect_load_error(
      [&] { load_model(dir_.string()); }, weights_,
      "shape mismatch for tensor 'model.layers.0.self_attn.k_proj.weight': expected [32, 64], got [64, 64]");
}

TEST_F(LoaderErrors, UnsupportedDtype) {
  const Tensor ints = Tensor::allocate(DType::I32, {64});
  rewrite("model.norm.weight", &ints);
  expect_load_error([&] { load_model(dir_.string()); }, weights_,
                    "tensor 'model.norm.weight' has unsupported dtype i32");
}

TEST_F(LoaderErrors, UnexpectedTensor) {
  const Tensor extra = Tensor::allocate(DType::F32, {16});
  std::vector<SafetensorsEntry> entries;
  for (const auto& info : original_->tensors())
    entries.push_back(SafetensorsEntry::from_tensor(info.name, original_->tensor(info)));
  entries.push_back(SafetensorsEntry::from_tensor("model.layers.0.self_attn.q_norm.weight", extra));
  write_safetensors(weights_ + ".tmp", entries);
  fs::rename(weights_ + ".tmp", weights_);
  expect_load_error([&] { load_model(dir_.string()); }, weights_,
                    "unexpected tensor 'model.layers.0.self_attn.q_norm.weight'");
}

// gpt-oss's MXFP4 experts (OpenAI's checkpoints): _blocks without their _scales are named with the shapes expected.
class GptOssLoaderErrors : public LoaderErrors {
 protected:
  const char* preset() const override { return "tiny-gpt-oss"; }
};

TEST_F(GptOssLoaderErrors, Mxfp4BlocksWithoutScales) {
  const Tensor blocks = Tensor::allocate(DType::I8, {8, 64, 1, 16});  // [experts, hidden, ff / 32, 16]
  rewrite("model.layers.0.mlp.experts.down_proj", &blocks, "model.layers.0.mlp.experts.down_proj_blocks");
  expect_load_error([&] { load_model(dir_.string()); }, weights_,
                    "MXFP4 experts 'model.layers.0.mlp.experts.down_proj_blocks' need U8 _blocks [8, 64, 1, 16] and "
                    "_scales [8, 64, 1]");
}

TEST_F(LoaderErrors, TruncatedSafetensors) {
  fs::resize_file(weights_, fs::file_size(weights_) / 2);
  expect_load_error([&] { load_model(dir_.string()); }, weights_, "truncated");
}

TEST_F(LoaderErrors, MissingConfigAndWeights) {
  fs::remove(dir_ / "config.json");
  expect_load_error([&] { load_model(dir_.string()); }, dir_.string(), "missing config.json");
  fs::create_directories(dir_ / "empty");
  std::ofstream(dir_ / "empty" / "config.json") << R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})";
  std::ofstream(dir_ / "empty" / "pytorch_model.bin") << "x";
  expect_load_error([&] { load_model((dir_ / "empty").string()); }, (dir_ / "empty").string(),
                    "missing weights: no model.safetensors");
  expect_load_error([&] { load_model((dir_ / "nothing-here").string()); }, (dir_ / "nothing-here").string(),
                    "no such file or directory");
}

TEST_F(LoaderErrors, BadConfigJson) {
  std::ofstream(dir_ / "config.json") << "{\"model_type\": \"llama\",";
  expect_load_error([&] { load_model(dir_.string()); }, (dir_ / "config.json").string(), "invalid JSON");
  std::ofstream(dir_ / "config.json") << R"({"model_type": "gemma", "vocab_size": 10})";
  expect_load_error([&] { load_model(dir_.string()); }, (dir_ / "config.json").string(),
                    "unsupported architecture 'gemma' (supported: llama");
}

TEST_F(LoaderErrors, MissingShard) {
  original_.reset();
  fs::remove(weights_);
  TestModelOptions o;
  o.preset = "tiny-llama";
  o.out_dir = dir_.string();
  o.dtype = DType::F32;
  o.shard_bytes = 100000;
  const TestModelResult r = write_test_model(o);
  ASSERT_GT(r.files.size(), 3u);
  EXPECT_EQ(load_model(dir_.string()).tensors.size(), 3u + 3u * 9u);
  fs::remove(dir_ / r.files[1]);
  expect_load_error([&] { load_model(dir_.string()); }, (dir_ / "model.safetensors.index.json").string(),
                    "missing weights: shard '" + r.files[1] + "'");
}

TEST_F(LoaderErrors, TruncatedGguf) {
  const std::string p = (dir_ / "t.gguf").string();
  fs::copy_file(kGguf, p);
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(p, fs::file_size(p) - 1000);
  expect_load_error([&] { load_model(p); }, p, "truncated GGUF file");
  fs::resize_file(p, 100);
  expect_load_error([&] { load_model(p); }, p, "truncated GGUF file");
}

TEST_F(LoaderErrors, TruncatedLlama2c) {
  const std::string p = (dir_ / "t.bin").string();
  fs::copy_file(kBin, p);
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(p, fs::file_size(p) - 4);
  expect_load_error([&] { load_model(p); }, p, "truncated llama2.c checkpoint");
}

// Any prefix of a checkpoint, and any single corrupted header byte, gives a LoadError or a valid model, never a
// crash (run under MINFER_SANITIZE to also rule out out-of-bounds reads).
TEST_F(LoaderErrors, CorruptedFilesNeverCrash) {
  original_.reset();
  const std::string good = weights_ + ".good";
  fs::copy_file(weights_, good);
  const uint64_t size = fs::file_size(good);
  std::string bytes(size, '\0');
  std::ifstream(good, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(size));
  auto try_load = [&](const std::string& content) {
    std::ofstream(weights_, std::ios::binary | std::ios::trunc) << content;
    try {
      load_model(dir_.string());
    } catch (const LoadError&) {
    }
  };
  for (uint64_t n = 0; n < size; n += n < 4096 ? 13 : 16381) try_load(bytes.substr(0, n));
  uint64_t header_end = 0;
  std::memcpy(&header_end, bytes.data(), 8);
  header_end += 8;
  for (uint64_t i = 0; i < header_end; i += 11) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ (i % 2 ? 0x01 : 0x5a));
    try_load(bad);
  }
  const std::string gguf = (dir_ / "c.gguf").string();
  std::string g(fs::file_size(kGguf), '\0');
  std::ifstream(kGguf, std::ios::binary).read(g.data(), static_cast<std::streamsize>(g.size()));
  for (uint64_t i = 0; i < 12000; i += 47) {
    std::string bad = g;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    std::ofstream(gguf, std::ios::binary | std::ios::trunc) << bad.substr(0, i % 5 == 0 ? i : bad.size());
    try {
      load_model(gguf);
    } catch (const LoadError&) {
    }
  }
}

TEST(WeightNames, MapBothWays) {
  EXPECT_EQ(hf_to_canonical("model.layers.12.self_attn.k_proj.bias"), "layers.12.bk");
  EXPECT_EQ(hf_to_canonical("model.layers.3.mlp.down_proj.weight"), "layers.3.w_down");
  EXPECT_EQ(hf_to_canonical("lm_head.weight"), "lm_head");
  EXPECT_EQ(hf_to_canonical("model.layers.x.mlp.down_proj.weight"), std::nullopt);
  EXPECT_EQ(hf_to_canonical("model.layers.01.mlp.down_proj.weight"), std::nullopt);
  EXPECT_EQ(hf_to_canonical("model.layers.1.mlp.down_proj.weight.extra"), std::nullopt);
  EXPECT_EQ(gguf_to_canonical("blk.4.ffn_gate.weight"), "layers.4.w_gate");
  EXPECT_EQ(gguf_to_canonical("output.weight"), "lm_head");
  EXPECT_EQ(gguf_to_canonical("rope_freqs.weight"), std::nullopt);
  EXPECT_EQ(canonical_to_hf("layers.7.ffn_norm"), "model.layers.7.post_attention_layernorm.weight");
  EXPECT_EQ(canonical_to_gguf("layers.7.wo"), "blk.7.attn_output.weight");
  EXPECT_EQ(canonical_to_gguf("embed"), "token_embd.weight");
}

// Qwen3.5's multi-token-prediction block: mtp.layers.0.* and mtp.fc / norms in HF, the blocks after the trunk and
// their nextn.* tensors in GGUF; both as mtp.{j}.*.
TEST(WeightNames, MtpBlocksMapBothWays) {
  EXPECT_EQ(hf_to_canonical("mtp.layers.0.self_attn.k_proj.weight", "qwen35"), "mtp.0.wk");
  EXPECT_EQ(hf_to_canonical("mtp.layers.0.post_attention_layernorm.weight", "qwen35"), "mtp.0.ffn_norm");
  EXPECT_EQ(hf_to_canonical("mtp.fc.weight", "qwen35"), "mtp.0.fc");
  EXPECT_EQ(hf_to_canonical("mtp.pre_fc_norm_hidden.weight", "qwen35"), "mtp.0.hidden_norm");
  EXPECT_EQ(hf_to_canonical("mtp.norm.weight", "qwen35"), "mtp.0.final_norm");
  EXPECT_EQ(hf_to_canonical("mtp.layers.0.mlp.experts.3.up_proj.weight", "qwen35moe"), "mtp.0.experts.3.w_up");
  EXPECT_EQ(canonical_to_hf("mtp.0.wk", "qwen35"), "mtp.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(canonical_to_hf("mtp.0.embed_norm", "qwen35"), "mtp.pre_fc_norm_embedding.weight");
  EXPECT_EQ(gguf_to_canonical("blk.24.attn_q.weight", "qwen35", 24), "mtp.0.wq");
  EXPECT_EQ(gguf_to_canonical("blk.24.nextn.eh_proj.weight", "qwen35", 24), "mtp.0.fc");
  EXPECT_EQ(gguf_to_canonical("blk.25.nextn.shared_head_norm.weight", "qwen35", 24), "mtp.1.final_norm");
  EXPECT_EQ(gguf_to_canonical("blk.23.attn_q.weight", "qwen35", 24), "layers.23.wq");
  EXPECT_EQ(gguf_to_canonical("blk.23.nextn.eh_proj.weight", "qwen35", 24), std::nullopt);
  EXPECT_EQ(canonical_to_gguf("mtp.0.wo", "qwen35", 24), "blk.24.attn_output.weight");
  EXPECT_EQ(canonical_to_gguf("mtp.0.hidden_norm", "qwen35", 24), "blk.24.nextn.hnorm.weight");
}

}  // namespace
}  // namespace minfer
