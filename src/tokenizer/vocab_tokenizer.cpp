#include "tokenizer/vocab_tokenizer.h"

#include <utility>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace minfer {

VocabTokenizer::VocabTokenizer(Vocab vocab, TokenBytesFn make_token_bytes, bool strip_first_space)
    : vocab_(std::move(vocab)), token_bytes_(make_token_bytes(vocab_)), strip_first_space_(strip_first_space) {
  MINFER_CHECK(token_bytes_.size() == vocab_.tokens.size(), "{} token byte strings for {} tokens", token_bytes_.size(),
               vocab_.tokens.size());
}

namespace {

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = unicode::valid_char_length(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

}  // namespace

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  // Regexes and merges work on characters; invalid UTF-8 from a caller becomes U+FFFD first (what Python
  // and Rust do to such input before a tokenizer ever sees it).
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = unicode::sanitize(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  bool at_input_start = true;
  for (const Vocab::Fragment& fragment : vocab_.split_special(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
    } else {
      encode_text(fragment.text, at_input_start, out);
    }
    at_input_start = false;
  }
  if (add_special && vocab_.add_eos && !vocab_.eos.empty()) out.push_back(vocab_.eos.front());
  return out;
}

void VocabTokenizer::check_id(int32_t id) const {
  if (!vocab_.contains(id)) fail("token id {} is outside the vocabulary [0, {})", id, vocab_.size());
}

void VocabTokenizer::decode_piece(int32_t id, bool skip_special, DecodeState& state, std::string& out) const {
  check_id(id);
  const Vocab::Token& token = vocab_.tokens[static_cast<size_t>(id)];
  switch (token.type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      // Shown verbatim unless skipped; invisible to the leading-space rule, as in SentencePiece.
      if (!skip_special) out += token.text;
      return;
    case TokenType::kUserDefined:
      out += token.text;
      state.at_text_start = false;
      return;
    case TokenType::kUnused:
    case TokenType::kUndefined: return;
    case TokenType::kNormal:
    case TokenType::kByte: {
      std::string_view bytes = token_bytes_[static_cast<size_t>(id)];
      if (strip_first_space_ && state.at_text_start && token.type == TokenType::kNormal && !bytes.empty() &&
          bytes.front() == ' ') {
        bytes.remove_prefix(1);
      }
      out += bytes;
      state.at_text_start = false;
      return;
    }
  }
}

std::string VocabTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  DecodeState state;
  for (int32_t id : ids) decode_piece(id, skip_special, state, bytes);
  return unicode::sanitize(bytes);
}

std::string VocabTokenizer::token_bytes(int32_t id) const {
  check_id(id);
  const Vocab::Token& token = vocab_.tokens[static_cast<size_t>(id)];
  if (token.type == TokenType::kNormal || token.type == TokenType::kByte) {
    return token_bytes_[static_cast<size_t>(id)];
  }
  return token.text;
}

std::string_view VocabTokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.tokens[static_cast<size_t>(id)].text;
}

std::optional<int32_t> VocabTokenizer::token_id(std::string_view token_text) const {
  const int32_t id = vocab_.find(token_text);
  if (id < 0) return std::nullopt;
  return id;
}

bool VocabTokenizer::is_special(int32_t id) const {
  if (!vocab_.contains(id)) return false;
  const TokenType t = vocab_.type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

}  // namespace minfer
