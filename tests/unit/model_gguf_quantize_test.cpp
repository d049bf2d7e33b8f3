// `minfer quantize --type`'s parts: the GGUF writer (read back by GgufFile), llama.cpp's quantization mixes
// (model/quant/gguf_quant_plan.h), the reference block quantizers against minfer's dequantizers, and the
// detection of llama.cpp's pre-tokenizer name. Byte-for-byte agreement with llama.cpp's own quantizer is the e2e
// test's (tests/e2e/test_gguf_quantize.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "formats/gguf_writer.h"
#include "kernels/quant.h"
#include "model/quant/gguf_block_quantizer.h"
#include "model/quant/gguf_quant_plan.h"
#include "model/test_tokenizer.h"
#include "tokenizer/gguf_vocab_export.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("minfer_gguf_quantize_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(GgufWriter, WritesWhatTheReaderReadsBack) {
  const fs::path dir = temp_dir("writer");
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_f32("llama.rope.freq_base", 10000.5f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 3, 5});
  w.set_u32("llama.block_count", 4);  // replaced, not repeated
  const std::vector<float> values = {1.5f, -2.f, 3.25f};
  w.add_tensor("v.weight", {3}, DType::F32);
  w.add_tensor("m.weight", {2, 32}, DType::Q8_0);
  EXPECT_THROW(w.add_tensor("bad.weight", {2, 40}, DType::Q8_0), Error);  // rows not whole blocks
  w.write((dir / "a.gguf").string(), [&](size_t i, std::span<uint8_t> out) {
    if (i == 0)
      std::memcpy(out.data(), values.data(), out.size());
    else
      std::fill(out.begin(), out.end(), uint8_t{7});
  });
  EXPECT_FALSE(fs::exists(dir / "a.gguf.tmp"));

  const auto f = GgufFile::open((dir / "a.gguf").string());
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 4);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.rope.freq_base")), 10000.5f);
  EXPECT_EQ(f->get_int("tokenizer.ggml.add_bos_token"), 1);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[1], "bc");
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, 5}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const Tensor v = f->tensor(f->tensors()[0]);
  EXPECT_EQ(std::vector<float>(v.as<float>(), v.as<float>() + 3), values);
  const Tensor m = f->tensor(f->tensors()[1]);
  EXPECT_EQ(m.dtype, DType::Q8_0);
  EXPECT_EQ(m.shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(static_cast<const uint8_t*>(m.data)[5], 7);

  // A second file copying every key of the first holds the same values.
  GgufWriter copy;
  for (const auto& [key, value] : f->metadata()) copy.set_copy(key, value);
  copy.write((dir / "b.gguf").string(), [](size_t, std::span<uint8_t>) {});
  const auto g = GgufFile::open((dir / "b.gguf").string());
  EXPECT_EQ(g->get_int("llama.block_count"), 4);
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens")[1], "bc");
  fs::remove_all(dir);
}

TEST(GgufWriter, NamesAnUnwritablePath) {
  GgufWriter w;
  try {
    w.write("/nonexistent-dir/x.gguf", [](size_t, std::span<uint8_t>) {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gguf"), std::string::npos) << e.what();
  }
}

std::vector<PlannedTensor> llama_like(int layers, int64_t hidden, int64_t ffn, bool tied) {
  std::vector<PlannedTensor> t;
  if (!tied) t.push_back({"output.weight", {1000, hidden}, {}});
  t.push_back({"output_norm.weight", {hidden}, {}});
  t.push_back({"token_embd.weight", {1000, hidden}, {}});
  for (int i = 0; i < layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_k.weight", "attn_output.weight", "attn_q.weight", "attn_v.weight"})
      t.push_back({p + n, {hidden, hidden}, {}});
    t.push_back({p + "attn_norm.weight", {hidden}, {}});
    t.push_back({p + "ffn_down.weight", {hidden, ffn}, {}});
    t.push_back({p + "ffn_gate.weight", {ffn, hidden}, {}});
    t.push_back({p + "ffn_norm.weight", {hidden}, {}});
    t.push_back({p + "ffn_up.weight", {ffn, hidden}, {}});
  }
  std::sort(t.begin(), t.end(), [](auto& a, auto& b) { return gguf_quantize_before(a.name, b.name); });
  return t;
}

std::map<std::string, std::optional<DType>> targets(const std::vector<PlannedTensor>& t) {
  std::map<std::string, std::optional<DType>> m;
  for (const auto& x : t) m[x.name] = x.target;
  return m;
}

TEST(GgufQuantPlan, Q4KMGivesAttnVAndFfnDownMoreBitsWhereLlamaCppDoes) {
  auto t = llama_like(24, 512, 1024, /*tied=*/false);
  plan_gguf_types(GgufFileType::kQ4_K_M, 24, t);
  const auto m = targets(t);
  EXPECT_EQ(m.at("output.weight"), DType::Q6_K);
  EXPECT_EQ(m.at("token_embd.weight"), DType::Q4_K);
  EXPECT_EQ(m.at("output_norm.weight"), std::nullopt);
  EXPECT_EQ(m.at("blk.0.attn_norm.weight"), std::nullopt);
  // use_more_bits(i, 24): i < 3, i >= 21, and (i - 3) % 3 == 2.
  for (int i = 0; i < 24; ++i) {
    const bool more = i < 3 || i >= 21 || (i - 3) % 3 == 2;
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(m.at(p + "attn_v.weight"), more ? DType::Q6_K : DType::Q4_K) << i;
    EXPECT_EQ(m.at(p + "ffn_down.weight"), more ? DType::Q6_K : DType::Q4_K) << i;
    EXPECT_EQ(m.at(p + "attn_q.weight"), DType::Q4_K) << i;
    EXPECT_EQ(m.at(p + "ffn_up.weight"), DType::Q4_K) << i;
  }
}

TEST(GgufQuantPlan, TiedEmbeddingsTakeTheOutputTypeAndNarrowRowsFallBack) {
  auto t = llama_like(2, 576, 1536, /*tied=*/true);  // SmolLM2's widths: 576 is not whole 256-blocks
  plan_gguf_types(GgufFileType::kQ4_K_M, 2, t);
  auto m = targets(t);
  EXPECT_EQ(m.at("token_embd.weight"), DType::Q8_0);      // the output rule, 576 % 256 != 0
  EXPECT_EQ(m.at("blk.0.attn_q.weight"), DType::Q5_0);    // Q4_K -> Q5_0
  EXPECT_EQ(m.at("blk.1.attn_v.weight"), DType::Q8_0);    // the last layer's Q6_K -> Q8_0
  EXPECT_EQ(m.at("blk.1.ffn_down.weight"), DType::Q6_K);  // 1536 columns are whole blocks
  EXPECT_EQ(m.at("blk.0.ffn_down.weight"), DType::Q4_K);
  t = llama_like(2, 576, 1536, /*tied=*/true);
  plan_gguf_types(GgufFileType::kQ5_K_M, 2, t);
  EXPECT_EQ(targets(t).at("blk.0.attn_q.weight"), DType::Q5_1);  // Q5_K -> Q5_1
  t = llama_like(2, 48, 96, /*tied=*/false);                     // not even whole 32-blocks
  plan_gguf_types(GgufFileType::kQ4_0, 2, t);
  EXPECT_EQ(targets(t).at("blk.0.attn_q.weight"), DType::F16);
  t = llama_like(2, 512, 1024, /*tied=*/false);
  plan_gguf_types(GgufFileType::kQ8_0, 2, t);
  for (const auto& x : t) {
    if (x.target) {
      EXPECT_EQ(*x.target, DType::Q8_0) << x.name;
    }
  }
}

TEST(GgufQuantPlan, FileTypeNames) {
  EXPECT_EQ(parse_gguf_file_type("q4_k_m"), GgufFileType::kQ4_K_M);
  EXPECT_EQ(parse_gguf_file_type("Q6_K"), GgufFileType::kQ6_K);
  EXPECT_EQ(parse_gguf_file_type("IQ2_XXS"), std::nullopt);
  EXPECT_EQ(static_cast<uint32_t>(GgufFileType::kQ4_K_M), 15u);  // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(parse_gguf_file_type("bf16"), GgufFileType::kBF16);
  // A float file type converts every matrix, output and embedding included, and nothing else.
  auto t = llama_like(2, 48, 96, /*tied=*/true);
  plan_gguf_types(GgufFileType::kBF16, 2, t);
  for (const auto& x : t)
    EXPECT_EQ(x.target, x.shape.size() == 2 ? std::optional(DType::BF16) : std::nullopt) << x.name;
}

// Quantize rows, dequantize them with the kernels' decoder, and compare with the input: the error per element
// must stay within what the type's step allows (relative to the row's largest magnitude).
void check_round_trip(DType type, double max_relative_error) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t rows = 5, cols = 512;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = normal(rng);
  for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(cols + c)] = 0.f;           // an all-zero row
  for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(2 * cols + c)] = 0.75f;     // a constant row
  for (int64_t c = 0; c < cols; c += 7) x[static_cast<size_t>(3 * cols + c)] *= 40.f;  // outliers
  Tensor q = Tensor::allocate(type, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    quantize_gguf_row(type, x.data() + r * cols, cols, q.mutable_as<uint8_t>() + r * dtype_bytes(type, cols));
  std::vector<float> y(x.size());
  kernels::dequantize_rows(q, 0, rows, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * cols + c)]));
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      ASSERT_LE(std::fabs(y[i] - x[i]), max_relative_error * amax + 1e-6)
          << dtype_name(type) << " row " << r << " col " << c;
    }
  }
  EXPECT_EQ(y[static_cast<size_t>(cols)], 0.f) << dtype_name(type);  // zeros stay zeros
}

TEST(GgufBlockQuantizer, EveryTypeRoundTripsWithinItsStep) {
  check_round_trip(DType::Q8_0, 1.0 / 127);
  check_round_trip(DType::Q4_0, 1.0 / 8);
  check_round_trip(DType::Q5_0, 1.0 / 16);
  check_round_trip(DType::Q4_1, 1.0 / 15 + 1e-3);
  check_round_trip(DType::Q5_1, 1.0 / 31 + 1e-3);
  // K-quants: scales are themselves 6-bit (8-bit for Q6_K), searched rather than max-scaled.
  check_round_trip(DType::Q4_K, 0.25);
  check_round_trip(DType::Q5_K, 0.125);
  check_round_trip(DType::Q6_K, 0.06);
}

TEST(GgufBlockQuantizer, RefusesWhatItCannotWrite) {
  std::vector<float> x(256);
  std::vector<uint8_t> out(1024);
  EXPECT_FALSE(gguf_quantizer_supports(DType::IQ4_XS));
  EXPECT_THROW(quantize_gguf_row(DType::IQ4_XS, x.data(), 256, out.data()), Error);
  EXPECT_THROW(quantize_gguf_row(DType::Q4_K, x.data(), 32, out.data()), Error);  // not a whole super-block
}

// A tokenizer.json of the test tokenizer family with the given pre_tokenizer.
std::string write_tokenizer(const fs::path& dir, TokenizerFamily family, const nlohmann::json* pre = nullptr) {
  GeneratedTokenizer t = generate_test_tokenizer(family);
  if (pre) t.tokenizer["pre_tokenizer"] = *pre;
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << t.tokenizer.dump();
  std::ofstream(dir / "tokenizer_config.json") << t.config.dump();
  return (dir / "tokenizer.json").string();
}

TEST(GgufVocabExport, NamesThePreTokenizerLlamaCppKnows) {
  const fs::path dir = temp_dir("vocab");
  const std::string qwen = write_tokenizer(dir / "qwen2", TokenizerFamily::kQwen2);
  const GgufVocab q = gguf_vocab_from_hf(qwen, (dir / "qwen2" / "tokenizer_config.json").string(), 700);
  EXPECT_EQ(q.pre, "qwen2");
  EXPECT_EQ(q.tokens.size(), 700u);
  EXPECT_EQ(q.tokens.back(), "[PAD699]");
  EXPECT_EQ(q.token_types.back(), 5);  // unused
  EXPECT_TRUE(q.eos.has_value());
  const std::string llama = write_tokenizer(dir / "llama3", TokenizerFamily::kLlama3);
  EXPECT_EQ(gguf_vocab_from_hf(llama, "", 700).pre, "llama-bpe");
  // Qwen3.5's tokenizer.json: Qwen2's split but for combining marks, which its letter runs take in.
  const nlohmann::json qwen35 = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})");
  EXPECT_EQ(gguf_vocab_from_hf(write_tokenizer(dir / "qwen35", TokenizerFamily::kQwen2, &qwen35), "", 700).pre,
            "qwen35");
  // SmolLM's: single digits, then GPT-2's ByteLevel split.
  const nlohmann::json smollm = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})");
  const std::string smol = write_tokenizer(dir / "smollm", TokenizerFamily::kQwen2, &smollm);
  EXPECT_EQ(gguf_vocab_from_hf(smol, "", 700).pre, "smollm");
  // A split llama.cpp has no name for is refused, naming the file.
  const nlohmann::json odd = nlohmann::json::parse(
      R"({"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "Isolated", "invert": false})");
  const std::string other = write_tokenizer(dir / "odd", TokenizerFamily::kQwen2, &odd);
  try {
    gguf_vocab_from_hf(other, "", 700);
    FAIL() << "no error";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("odd/tokenizer.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gguf_vocab_from_hf(qwen, "", 10), LoadError);  // ids past vocab_size
  fs::remove_all(dir);
}

}  // namespace
}  // namespace minfer
