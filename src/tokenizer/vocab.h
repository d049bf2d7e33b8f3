// The token table both tokenizer kinds share: text, score and type per id, text -> id lookup, the special
// ids, and the splitting of text on special / added tokens before the model sees it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/flat_tables.h"

namespace minfer {

// GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, <|im_start|>, HF added tokens with "special": true
  kUserDefined = 4,  // HF added tokens with "special": false; always matched as a whole in text
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback <0xXX>
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  struct Token {
    std::string text;
    float score = 0;
    TokenType type = TokenType::kNormal;
    bool lstrip = false;  // HF added-token flags: swallow the whitespace before / after the token
    bool rstrip = false;
  };
  // A stretch of input: plain text (token < 0) or one special / added token.
  struct Fragment {
    std::string_view text;
    int32_t token = -1;
  };

  std::vector<Token> tokens;
  int32_t bos = -1;
  int32_t unk = -1;
  std::vector<int32_t> eos;  // the configured EOS first, then other end-of-generation tokens
  bool add_bos = false;
  bool add_eos = false;

  // Builds the text index and the special-token matcher from tokens. Call it early when find() is needed
  // before the special ids are known; tokens must not change afterwards.
  void build_index();
  // Call once tokens and the special ids are set: builds the lookups (unless built) and adds the usual
  // end-of-generation tokens (<|im_end|>, <|eot_id|>, <|endoftext|>, ...) of control type to eos.
  void finalize();

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  TokenType type(int32_t id) const { return tokens[static_cast<size_t>(id)].type; }
  // Id of a token text (any type), or -1. When a text occurs twice the later id wins, as in llama.cpp.
  int32_t find(std::string_view text) const {
    return index_.find(text, [this](int32_t id) { return std::string_view(tokens[static_cast<size_t>(id)].text); });
  }

  // Splits text on special tokens, leftmost-longest. User-defined tokens always split; control and unknown
  // ones only with parse_special (llama.cpp's tokenizer_st_partition; HF splits on all added tokens).
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

 private:
  TextIdTable index_;
  bool indexed_ = false;
  // Tokens matched in text, bucketed by first byte and longest first.
  std::array<std::vector<int32_t>, 256> special_by_first_byte_;
};

}  // namespace minfer
