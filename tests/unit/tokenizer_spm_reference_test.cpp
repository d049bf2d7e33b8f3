// SentencePiece BPE (Llama 2) against the real thing: python3-sentencepiece with llama2-tokenizer.model
// encodes a set of tricky strings and a few hundred random ones; our tokenizer, loaded from
// ggml-vocab-llama-spm.gguf (the same 32000 pieces), must give the same ids, and decode them the same.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

const std::string kPython = "/usr/bin/python3";
const std::string kModel = std::string(MINFER_SHARED_DIR) + "/testdata/tokenizer/llama2-tokenizer.model";
const std::string kGguf = std::string(MINFER_SHARED_DIR) + "/testdata/tokenizer/ggml-vocab-llama-spm.gguf";
const fs::path kScript = fs::path(__FILE__).parent_path().parent_path() / "reference" / "spm_reference.py";

std::vector<std::string> tricky_strings() {
  return {
      "Hello world",
      " Hello world",
      "Hello  world",
      "   leading and trailing   ",
      "",
      " ",
      "    ",
      "\n",
      "\n\n\n",
      "line one\nline two\r\nline three",
      "\ttabs\tand spaces \t mixed",
      "numbers 0 1 12 123 1234 12345 3.14159 -42 1e10 0x1F",
      "Ünïcödé àccénts, naïve café, Straße, Ångström",
      "Привет, мир! Как дела?",
      "日本語のテキストと中文文本，还有한국어 텍스트。",
      "emoji 🦙🚀😀👍🏽 and 👨‍👩‍👧‍👦 family, flags 🇫🇷🇯🇵",
      "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∀x∈ℝ: x²≥0 ∑∫√",
      "combining e\u0301 vs \u00e9, a\u0308",
      "Arabic مرحبا بالعالم and Hebrew שלום",
      "Thai สวัสดีครับ Hindi नमस्ते Khmer កាន់តែពិសេស",
      "<s> not a BOS </s> <unk> <0x0A> literal specials",
      "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }",
      "def f(x):\n    return x ** 2  # comment\n",
      "URLs https://example.com/a?b=c&d=e#frag and emails a.b@c.org",
      "'s 't 're 've 'm 'll 'd DON'T I'M",
      "!!!??? ... --- *** ___ ~~~ ``` ''' \"\"\"",
      "\u00a0non-breaking\u2009thin\u3000ideographic spaces",
      "zero\u200bwidth\u200djoiner",
      "repetition aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "Llamas are \"cute\" — aren't they? (Yes!) [1] {2} <3>",
      "\x01\x02\x1f control bytes \x7f",
  };
}

// Random strings over a pool mixing ASCII, whitespace runs, Latin-1, Cyrillic, CJK, Hangul, emoji and
// rare symbols (which need byte fallback). Fixed seed, so failures reproduce.
std::vector<std::string> random_strings(size_t count) {
  const std::vector<uint32_t> pool = {
      'a',    'b',     'e',    'n',    't',    'h',    'o',    's',      'T',     'Q',     'z',     '0',    '1',
      '7',    '9',     ' ',    ' ',    ' ',    ' ',    '\n',   '\t',     '.',     ',',     '!',     '?',    '\'',
      '"',    '(',     ')',    '-',    '_',    '<',    '>',    '/',      '\\',    '#',     0xE9,    0xFC,   0xDF,
      0xC5,   0x0416,  0x044F, 0x4E2D, 0x6587, 0x65E5, 0xAC00, 0xD55C,   0x1F999, 0x1F600, 0x1F44D, 0x2603, 0x2581,
      0x20AC, 0x1D518, 0x0301, 0x200D, 0x3000, 0x00A0, 0xFFFD, 0x10FFFD, 0x0E01,  0x0915};
  std::mt19937 rng(1234);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    const size_t len = 1 + rng() % 40;
    std::string s;
    for (size_t j = 0; j < len; ++j) unicode::append_utf8(s, pool[rng() % pool.size()]);
    out.push_back(std::move(s));
  }
  return out;
}

// Runs the reference script on texts; nullopt (with reason) when it cannot run here.
std::optional<nlohmann::json> run_reference(const std::vector<std::string>& texts, std::string* why) {
  const fs::path input = fs::temp_directory_path() / ("minfer_spm_ref_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(input);
    f << nlohmann::json(texts).dump();
  }
  const std::string command = kPython + " " + kScript.string() + " " + kModel + " " + input.string();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *why = "popen failed";
    return std::nullopt;
  }
  std::string output;
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  fs::remove(input);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = "reference script exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) *why = "python3-sentencepiece is not installed";
    return std::nullopt;
  }
  return nlohmann::json::parse(output);
}

class SpmReference : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " not found; the SentencePiece reference needs it";
    if (std::system((kPython + " -c 'import sentencepiece' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << "python3-sentencepiece is not installed for " << kPython;
    }
    if (!fs::exists(kModel) || !fs::exists(kGguf)) GTEST_SKIP() << "test vocabularies missing";
    tokenizer_ = tokenizer_from_gguf(*GgufFile::open(kGguf));
  }

  void compare(const std::vector<std::string>& texts) {
    std::string why;
    const auto reference = run_reference(texts, &why);
    if (!reference) GTEST_SKIP() << why;
    const auto& ids = reference->at("ids");
    const auto& decoded = reference->at("decoded");
    ASSERT_EQ(ids.size(), texts.size());
    int matches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto expected = ids[i].get<std::vector<int32_t>>();
      const auto got = tokenizer_->encode(texts[i], /*add_special=*/false, /*parse_special=*/false);
      EXPECT_EQ(got, expected) << "text #" << i << ": '" << texts[i] << "'";
      if (got == expected) ++matches;
      EXPECT_EQ(tokenizer_->decode(expected, /*skip_special=*/true), decoded[i].get<std::string>())
          << "decode of text #" << i << ": '" << texts[i] << "'";
    }
    std::printf("%d/%zu strings tokenized exactly as sentencepiece does\n", matches, texts.size());
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SpmReference, TrickyStrings) { compare(tricky_strings()); }

TEST_F(SpmReference, RandomStrings) { compare(random_strings(400)); }

}  // namespace
}  // namespace minfer
