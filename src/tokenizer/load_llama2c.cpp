// Tokenizer from llama2.c's tokenizer .bin: int32 max_token_length, then per token f32 score, int32 length
// and the bytes, up to the end of the file. It is a SentencePiece vocabulary exported with "▁" turned into
// spaces; run.c's encoder (dummy space prefix, best-score pair merges, byte fallback at id byte + 3) is
// SentencePiece BPE, so the pieces are mapped back and handled by SentencePieceBpe.
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/mapped_file.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

namespace {

bool is_byte_piece(std::string_view text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.substr(0, 3) == "<0x" && hex(text[3]) && hex(text[4]) && text[5] == '>';
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == ' ')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_llama2c(const std::string& path) {
  auto file = MappedFile::open(path);
  const uint8_t* data = file->data();
  const size_t size = file->size();
  size_t pos = 0;
  // The next 4-byte field, of the type of `zero`.
  auto read = [&](auto zero, const char* what) {
    if (size - pos < 4) fail_load(path, "truncated: file ends inside {} at byte {}", what, pos);
    decltype(zero) v = zero;
    std::memcpy(&v, data + pos, 4);
    pos += 4;
    return v;
  };

  const int32_t max_token_length = read(int32_t{0}, "the header");
  if (max_token_length <= 0 || max_token_length > 4096) {
    fail_load(path, "not a llama2.c tokenizer: max_token_length {} is implausible", max_token_length);
  }
  Vocab vocab;
  while (pos < size) {
    const size_t id = vocab.tokens.size();
    Vocab::Token token;
    token.score = read(0.0f, "a token score");
    const int32_t len = read(int32_t{0}, "a token length");
    if (len < 0 || len > max_token_length) {
      fail_load(path, "token {} has length {} (max_token_length is {})", id, len, max_token_length);
    }
    if (size - pos < static_cast<size_t>(len)) {
      fail_load(path, "truncated: token {} needs {} bytes at byte {}, only {} left", id, len, pos, size - pos);
    }
    const std::string_view raw(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    // llama2.c's fixed layout: 0 = <unk>, 1 = <s>, 2 = </s> (stored as "\n<s>\n" for printing).
    if (id == 0) {
      token.type = TokenType::kUnknown;
      token.text = trim(raw);
    } else if (id <= 2) {
      token.type = TokenType::kControl;
      token.text = trim(raw);
    } else if (is_byte_piece(raw)) {
      token.type = TokenType::kByte;
      token.text = std::string(raw);
    } else {
      for (char c : raw) {
        if (c == ' ') {
          token.text += "\xE2\x96\x81";
        } else {
          token.text += c;
        }
      }
    }
    vocab.tokens.push_back(std::move(token));
  }
  if (vocab.tokens.size() < 3)
    fail_load(path, "only {} tokens; a llama2.c vocabulary starts <unk>, <s>, </s>", vocab.tokens.size());
  vocab.unk = 0;
  vocab.bos = 1;
  vocab.eos = {2};
  vocab.add_bos = true;
  vocab.finalize();
  return std::make_unique<SentencePieceBpe>(std::move(vocab), SentencePieceBpeOptions{});
}

}  // namespace minfer
