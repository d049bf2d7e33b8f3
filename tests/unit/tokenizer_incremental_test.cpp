// IncrementalDecoder: for random id sequences (byte-fallback tokens, characters split across tokens,
// invalid UTF-8, special tokens) the streamed pieces must be whole UTF-8 and add up to decode(ids).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

using Ids = std::vector<int32_t>;

const std::string kTokenizerDir = std::string(MINFER_SHARED_DIR) + "/testdata/tokenizer";

std::unique_ptr<Tokenizer> load_gguf(const std::string& name) {
  const std::string path = kTokenizerDir + "/ggml-vocab-" + name + ".gguf";
  if (!std::filesystem::exists(path)) return nullptr;
  return tokenizer_from_gguf(*GgufFile::open(path));
}

bool is_valid_utf8(const std::string& s) { return unicode::sanitize(s) == s; }

// Streams ids through an IncrementalDecoder and checks it against decode().
void check_stream(const Tokenizer& tok, const Ids& ids, bool skip_special) {
  IncrementalDecoder decoder(tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = decoder.push(id);
    ASSERT_TRUE(is_valid_utf8(piece)) << "push(" << id << ") emitted part of a character";
    streamed += piece;
  }
  streamed += decoder.flush();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special));
}

// Random sequences biased towards the tokens that make streaming hard: SentencePiece byte tokens
// (ids 3..258 in Llama 2) and control tokens, mixed with ordinary ones.
Ids random_ids(std::mt19937& rng, const Tokenizer& tok, int32_t byte_begin, int32_t byte_end) {
  Ids ids(1 + rng() % 30);
  for (int32_t& id : ids) {
    const uint32_t kind = rng() % 10;
    if (kind < 5 && byte_end > byte_begin) {
      id = byte_begin + static_cast<int32_t>(rng() % static_cast<uint32_t>(byte_end - byte_begin));
    } else if (kind == 5) {
      id = tok.eos_ids().empty() ? 0 : tok.eos_ids().front();
    } else {
      id = static_cast<int32_t>(rng() % static_cast<uint32_t>(tok.vocab_size()));
    }
  }
  return ids;
}

TEST(IncrementalDecoder, SentencePieceRandomSequences) {
  auto tok = load_gguf("llama-spm");
  if (!tok) GTEST_SKIP() << "ggml-vocab-llama-spm.gguf missing";
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const Ids ids = random_ids(rng, *tok, 3, 259);
    check_stream(*tok, ids, i % 2 == 0);
  }
}

TEST(IncrementalDecoder, ByteLevelRandomSequences) {
  auto tok = load_gguf("gpt-2");
  if (!tok) GTEST_SKIP() << "ggml-vocab-gpt-2.gguf missing";
  // GPT-2's single-byte tokens are ids 0..255; many of them are UTF-8 lead or continuation bytes.
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const Ids ids = random_ids(rng, *tok, 0, 256);
    check_stream(*tok, ids, i % 2 == 0);
  }
}

TEST(IncrementalDecoder, SplitCharactersComeOutWhole) {
  auto tok = load_gguf("llama-spm");
  if (!tok) GTEST_SKIP() << "ggml-vocab-llama-spm.gguf missing";
  // "🦙" has no piece in Llama 2: four byte tokens after "▁".
  const Ids ids = tok->encode("a 🦙 b", /*add_special=*/true);
  IncrementalDecoder decoder(*tok, /*skip_special=*/true);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(decoder.push(id));
  pieces.push_back(decoder.flush());
  std::string all;
  for (const auto& p : pieces) {
    all += p;
    EXPECT_TRUE(p.empty() || p == "a" || p == " " || p == "🦙" || p == " b") << p;
  }
  EXPECT_EQ(all, "a 🦙 b");
  EXPECT_EQ(std::count(pieces.begin(), pieces.end(), "🦙"), 1);
}

TEST(IncrementalDecoder, TruncatedCharacterFlushesAsReplacement) {
  auto tok = load_gguf("llama-spm");
  if (!tok) GTEST_SKIP() << "ggml-vocab-llama-spm.gguf missing";
  IncrementalDecoder decoder(*tok);
  EXPECT_EQ(decoder.push(3 + 0xF0), "");
  EXPECT_EQ(decoder.push(3 + 0x9F), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");  // U+FFFD, as decode() gives
  EXPECT_EQ(tok->decode({3 + 0xF0, 3 + 0x9F}), "\xEF\xBF\xBD");
  // An invalid byte is replaced as soon as it is known to be invalid.
  EXPECT_EQ(decoder.push(3 + 0xE2), "");
  EXPECT_EQ(decoder.push(3 + 'x'), "\xEF\xBF\xBDx");
}

TEST(IncrementalDecoder, ContinuingTextKeepsLeadingSpace) {
  auto tok = load_gguf("llama-spm");
  if (!tok) GTEST_SKIP() << "ggml-vocab-llama-spm.gguf missing";
  const Ids prompt = tok->encode("Once upon", false);
  const int32_t a = *tok->token_id("▁a");
  const int32_t time = *tok->token_id("▁time");
  IncrementalDecoder fresh(*tok);
  std::string text = fresh.push(a);
  text += fresh.push(time);
  EXPECT_EQ(text, "a time");
  IncrementalDecoder continuing(*tok, /*skip_special=*/false, /*continues_text=*/true);
  text = continuing.push(a);
  text += continuing.push(time);
  EXPECT_EQ(text, " a time");
  Ids all = prompt;
  all.push_back(a);
  all.push_back(time);
  EXPECT_EQ(tok->decode(all), "Once upon a time");
}

TEST(IncrementalDecoder, QwenChatStream) {
  const std::string path = std::string(MINFER_CACHE_DIR) + "/qwen-tokenizer/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing";
  auto tok = tokenizer_from_hf_json(path);
  const std::string text = "<|im_start|>assistant\n你好！🦙 Ça va? 😀👍🏽<|im_end|>";
  const Ids ids = tok->encode(text);
  for (bool skip : {false, true}) check_stream(*tok, ids, skip);
  std::mt19937 rng(5);
  for (int i = 0; i < 500; ++i) check_stream(*tok, random_ids(rng, *tok, 0, 256), i % 2 == 0);
}

}  // namespace
}  // namespace minfer
