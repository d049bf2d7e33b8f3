// Pre-tokenizer regex chains and the special-token split.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace minfer {
namespace {

using Pieces = std::vector<std::string_view>;

TEST(PreTokenizer, Gpt2Regex) {
  PreTokenizer pre;
  pre.add_regex(gpt2_regex());
  EXPECT_EQ(pre.split("Hello world's  test 123!!\n\n x"),
            (Pieces{"Hello", " world", "'s", " ", " test", " 123", "!!", "\n\n", " x"}));
  EXPECT_EQ(pre.split("   "), (Pieces{"   "}));
  EXPECT_EQ(pre.split("Привет мир"), (Pieces{"Привет", " мир"}));
  EXPECT_TRUE(pre.split("").empty());
}

TEST(PreTokenizer, ChainedRegexesKeepEarlierBoundaries) {
  // deepseek-coder's chain: newlines first, then letters, punctuation, CJK, digits; text no regex matches
  // stays a piece of its own.
  const auto spec = gguf_pre_tokenizer_spec("deepseek-coder");
  ASSERT_TRUE(spec.has_value());
  PreTokenizer pre;
  for (const auto& r : spec->regexes) pre.add_regex(r);
  EXPECT_EQ(pre.split("ab\ncd 12, 中文!"), (Pieces{"ab", "\n", "cd", " ", "1", "2", ",", " ", "中文", "!"}));
}

TEST(PreTokenizer, Behaviors) {
  auto split = [](PreTokenizer::Behavior b, std::string_view text) {
    PreTokenizer pre;
    pre.add_regex("-", b);
    return pre.split(text);
  };
  EXPECT_EQ(split(PreTokenizer::Behavior::kIsolated, "a-b--c"), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split(PreTokenizer::Behavior::kRemoved, "a-b--c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(split(PreTokenizer::Behavior::kMergedWithPrevious, "a-b--c"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split(PreTokenizer::Behavior::kMergedWithNext, "a-b--c"), (Pieces{"a", "-b", "-", "-c"}));
}

TEST(PreTokenizer, EveryLlamaCppPreTypeCompiles) {
  for (const char* name : {"default",        "",          "llama3",       "llama-bpe",    "falcon3",
                           "dbrx",           "smaug-bpe", "chatglm-bpe",  "deepseek-llm", "deepseek-v3",
                           "deepseek-coder", "falcon",    "mpt",          "starcoder",    "refact",
                           "command-r",      "smollm",    "codeshell",    "exaone",       "minerva-7b",
                           "gpt-2",          "phi-2",     "jina-es",      "roberta-bpe",  "olmo",
                           "jais",           "qwen2",     "qwen35",       "stablelm2",    "megrez",
                           "poro-chat",      "bloom",     "gpt3-finnish", "viking",       "tekken",
                           "gpt-4o",         "chameleon"}) {
    const auto spec = gguf_pre_tokenizer_spec(name);
    ASSERT_TRUE(spec.has_value()) << name;
    PreTokenizer pre;
    for (const auto& r : spec->regexes) EXPECT_NO_THROW(pre.add_regex(r)) << name << ": " << r;
    const std::string text = "Hello, WORLD's 12345 test\n\n  中文 🦙 ok";
    std::string joined;
    for (auto piece : pre.split(text)) joined += piece;
    EXPECT_EQ(joined, text) << name << " lost or reordered text";
  }
  EXPECT_FALSE(gguf_pre_tokenizer_spec("no-such-pre").has_value());
  EXPECT_TRUE(gguf_pre_tokenizer_spec("llama-bpe")->ignore_merges);
}

TEST(PreTokenizer, Llama3SplitsDigitsInThrees) {
  PreTokenizer pre;
  pre.add_regex(gguf_pre_tokenizer_spec("llama-bpe")->regexes[0]);
  EXPECT_EQ(pre.split("1234567 I'M"), (Pieces{"123", "456", "7", " I", "'M"}));
}

// o200k's split (tiktoken's o200k_base): an upper-case run joins the lower-case run after it, camel case splits,
// contractions stay on their word, a space before digits stands alone and digits go in threes.
TEST(PreTokenizer, Gpt4oSplitsCaseRunsAndDigits) {
  PreTokenizer pre;
  pre.add_regex(gguf_pre_tokenizer_spec("gpt-4o")->regexes[0]);
  EXPECT_EQ(pre.split("HelloWorld WORLDwide's 12345 don'T"),
            (Pieces{"Hello", "World", " WORLDwide's", " ", "123", "45", " don'T"}));
}

PreTokenizer gguf_pre(std::string_view name) {
  const auto spec = gguf_pre_tokenizer_spec(name);
  PreTokenizer pre;
  for (const auto& r : spec->regexes) pre.add_regex(r);
  return pre;
}

// Qwen3.5's split: a letter run takes the combining marks in and after it (a decomposed accent, Devanagari vowel
// signs and virama, a mark after a space), where Qwen2's leaves each mark to the punctuation rule.
TEST(PreTokenizer, Qwen35KeepsCombiningMarksInTheWord) {
  const std::string text = "cafe\u0301 नमस्ते \u0301x, it's";
  EXPECT_EQ(gguf_pre("qwen35").split(text), (Pieces{"cafe\u0301", " नमस्ते", " \u0301x", ",", " it", "'s"}));
  // Qwen2's: a mark is a letter run's optional prefix, or punctuation.
  EXPECT_EQ(gguf_pre("qwen2").split(text),
            (Pieces{"cafe", "\u0301", " नमस", "्त", "\u0947", " \u0301", "x", ",", " it", "'s"}));
  // Without marks the two agree.
  EXPECT_EQ(gguf_pre("qwen35").split("Hello, WORLD's 123\n\n  x"),
            gguf_pre("qwen2").split("Hello, WORLD's 123\n\n  x"));
}

// Qwen3.5's tokenizer.json spells the contractions case-insensitively, (?i:...); llama.cpp's regex spells out each
// case. Both must split alike, so a tokenizer.json with that pattern tokenizes as the GGUF does.
TEST(PreTokenizer, Qwen35TokenizerJsonPatternSplitsAsLlamaCppsRegex) {
  PreTokenizer hf;
  hf.add_regex(
      R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re");
  for (const char* text : {"I'M here, YOU'RE there; they'Ll go.", "Tie\u0302\u0301ng Vie\u0323\u0302t  \n\n 123",
                           "हिन्दी  ❤️ x\u0301\u0302!!\r\n"}) {
    EXPECT_EQ(hf.split(text), gguf_pre("qwen35").split(text)) << text;
  }
}

TEST(PreTokenizer, InvalidRegexIsAnError) {
  PreTokenizer pre;
  EXPECT_THROW(pre.add_regex("(unclosed"), Error);
}

Vocab small_vocab() {
  Vocab v;
  auto add = [&](std::string text, TokenType type, bool lstrip = false, bool rstrip = false) {
    Vocab::Token t;
    t.text = std::move(text);
    t.type = type;
    t.lstrip = lstrip;
    t.rstrip = rstrip;
    v.tokens.push_back(std::move(t));
  };
  add("a", TokenType::kNormal);                    // 0
  add("<|im_start|>", TokenType::kControl);        // 1
  add("<|im", TokenType::kControl);                // 2: a prefix of 1; the longest match must win
  add("<think>", TokenType::kUserDefined);         // 3
  add("<mask>", TokenType::kControl, true, true);  // 4
  v.finalize();
  return v;
}

TEST(Vocab, SplitSpecialLongestMatchAndParseFlag) {
  const Vocab v = small_vocab();
  using F = Vocab::Fragment;
  auto describe = [](const std::vector<F>& fs) {
    std::string s;
    for (const auto& f : fs) {
      if (f.token >= 0) {
        s.append("[").append(std::to_string(f.token)).append("]");
      } else {
        s.append("'").append(f.text).append("'");
      }
    }
    return s;
  };
  EXPECT_EQ(describe(v.split_special("x<|im_start|>y<|imz", true)), "'x'[1]'y'[2]'z'");
  // Control tokens only with parse_special; user-defined ones always.
  EXPECT_EQ(describe(v.split_special("x<|im_start|>y<think>", false)), "'x<|im_start|>y'[3]");
  // lstrip / rstrip swallow the whitespace around the token.
  EXPECT_EQ(describe(v.split_special("a  <mask>  b", true)), "'a'[4]'b'");
  EXPECT_EQ(describe(v.split_special("<think><think>", false)), "[3][3]");
  EXPECT_TRUE(v.split_special("", true).empty());
}

}  // namespace
}  // namespace minfer
