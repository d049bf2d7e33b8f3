// llama.cpp's tokenizer test vectors (tests/test-tokenizer-0): every string of ggml-vocab-*.gguf.inp must
// encode to the ids on the same line of the .out file, with add_special = false and parse_special = false
// as test-tokenizer-0 calls it. Also checks that decoding gives the string back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "formats/gguf_file.h"
#include "formats/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

const std::string kTokenizerDir = std::string(MINFER_SHARED_DIR) + "/testdata/tokenizer";
// llama.cpp's vocabulary files that ../shared lacks, extracted from the pinned llama-cpp-python sdist by
// scripts/setup-venv.sh (not committed).
const std::string kLlamaVocabDir = MINFER_LLAMA_VOCAB_DIR;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Same parsing as test-tokenizer-0: inputs separated by "\n__ggml_vocab_test__\n", one output line each.
std::vector<Case> read_cases(const std::string& base) {
  const std::string raw = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(base + ".out");
  std::vector<Case> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    Case c;
    if (i < inputs.size()) c.text = inputs[i];
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), inputs.size()) << base;
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check_vectors(const Tokenizer& tok, const std::string& base) {
  const auto cases = read_cases(base);
  ASSERT_FALSE(cases.empty());
  int passed = 0;
  for (const Case& c : cases) {
    const auto got = tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, c.ids) << "text: '" << c.text << "'\n got:      " << show(got) << "\n expected: " << show(c.ids);
    if (got == c.ids) ++passed;
    EXPECT_EQ(tok.decode(c.ids), c.text) << "decode of the expected ids";
  }
  std::printf("%s: %d/%zu vectors pass\n", std::filesystem::path(base).filename().c_str(), passed, cases.size());
}

class GgufVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVectors, MatchLlamaCpp) {
  const std::string base = kTokenizerDir + "/ggml-vocab-" + GetParam() + ".gguf";
  if (!std::filesystem::exists(base)) GTEST_SKIP() << base << " not present";
  auto gguf = GgufFile::open(base);
  auto tok = tokenizer_from_gguf(*gguf);
  check_vectors(*tok, base);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GgufVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon", "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(TokenizerVectors, Qwen2FromTokenizerJson) {
  const std::string json = std::string(MINFER_CACHE_DIR) + "/qwen-tokenizer/tokenizer.json";
  if (!std::filesystem::exists(json)) {
    GTEST_SKIP() << json << " missing; run scripts/fetch-qwen-tokenizer.sh";
  }
  auto tok = tokenizer_from_hf_json(json);
  check_vectors(*tok, kTokenizerDir + "/ggml-vocab-qwen2.gguf");
}

// A copy of the GGUF at `path` whose tokenizer.ggml.pre names another pre-tokenizer: the same vocabulary split
// by another rule.
std::string with_pre(const std::string& path, std::string_view pre) {
  const auto gguf = GgufFile::open(path);
  GgufWriter w;
  for (const auto& [key, value] : gguf->metadata()) w.set_copy(key, value);
  w.set_string("tokenizer.ggml.pre", pre);
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("minfer_vectors_" + std::to_string(::getpid()) + "_" + std::string(pre) + ".gguf"))
                              .string();
  w.write(out, [](size_t, std::span<uint8_t>) {});
  return out;
}

// Qwen3.5's pre-tokenizer (tokenizer.ggml.pre "qwen35", over Qwen2's vocabulary in llama.cpp's file): letter runs
// take combining marks. The vectors' marked text (résumé, à, Vietnamese) happens to give Qwen2's ids too, so Thai
// and vowelled Arabic show the rule at work: llama.cpp's ids for them under each rule.
TEST(TokenizerVectors, Qwen35FromGguf) {
  const std::string base = kLlamaVocabDir + "/ggml-vocab-qwen35.gguf";
  if (!std::filesystem::exists(base + ".out")) {
    GTEST_SKIP() << base << "{,.inp,.out} missing: scripts/setup-venv.sh extracts them from the llama-cpp-python "
                 << "sdist";
  }
  const auto tok = tokenizer_from_gguf(*GgufFile::open(base));
  check_vectors(*tok, base);

  const std::string qwen2_path = with_pre(base, "qwen2");
  const auto qwen2 = tokenizer_from_gguf(*GgufFile::open(qwen2_path));
  std::filesystem::remove(qwen2_path);
  struct Marked {
    const char* text;
    std::vector<int32_t> qwen35, qwen2;
  };
  const Marked marked[] = {
      {"สวัสดีครับ", {35648, 124294, 35648, 124311, 125459}, {143126, 23271, 125136, 28319, 123886, 83546}},
      {"مَرْحَبًا",
       {130531, 11071, 59397, 132078, 21360, 127837},
       {10176, 27910, 11071, 59397, 29825, 27910, 21360, 127837}},
      {"سَلَام", {133298, 129909, 49388}, {20064, 27910, 8532, 27910, 49388}},
  };
  for (const Marked& m : marked) {
    EXPECT_EQ(tok->encode(m.text, false, false), m.qwen35) << m.text;
    EXPECT_EQ(qwen2->encode(m.text, false, false), m.qwen2) << m.text;
  }
}

TEST(TokenizerVectors, Phi3SpecialTokensSwallowFollowingWhitespace) {
  // Phi-3's added tokens have rstrip; GGUF does not store it, so it is restored as llama.cpp does.
  const std::string base = kTokenizerDir + "/ggml-vocab-phi-3.gguf";
  if (!std::filesystem::exists(base)) GTEST_SKIP() << base << " not present";
  auto tok = tokenizer_from_gguf(*GgufFile::open(base));
  const int32_t user = *tok->token_id("<|user|>");
  const int32_t end = *tok->token_id("<|end|>");
  const int32_t hello = *tok->token_id("\xE2\x96\x81Hello");
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>\n"), (std::vector<int32_t>{1, user, hello, end}));
  const auto eos = tok->eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), end), eos.end());  // <|end|> ends a turn
}

TEST(TokenizerVectors, ConcurrentEncodesAgree) {
  // One tokenizer shared by several threads (the server's case): the word cache must not mix results.
  const std::string base = kTokenizerDir + "/ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(base)) GTEST_SKIP() << base << " not present";
  auto tok = tokenizer_from_gguf(*GgufFile::open(base));
  const auto cases = read_cases(base);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (const Case& c : cases) {
          if (tok->encode(c.text, false, false) != c.ids) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerVectors, LlamaBpe) {
  GTEST_SKIP() << "ggml-vocab-llama-bpe.gguf (the Llama 3 vocabulary) is not shipped in testdata; only its "
                  ".inp/.out vectors are, so there is nothing to load them against";
}

}  // namespace
}  // namespace minfer
