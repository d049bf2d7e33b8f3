// A model's tokenizer, as the engine exposes it (AsyncEngine::tokenizer()): text <-> token ids and what each
// token stands for. The engine's loaders (src/tokenizer/tokenizer.h) make one from tokenizer.json, a GGUF
// vocabulary or a llama2.c tokenizer.bin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text. add_special: prepend BOS when the tokenizer's config says so (add_bos_token) and it has
  // one. parse_special: text like "<|im_start|>" becomes its special token id instead of being split.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                                      bool parse_special = true) const = 0;
  // Decodes ids to UTF-8 text (special tokens included unless skip_special; user-defined added tokens such
  // as Qwen's <think> always). Invalid UTF-8 from a byte sequence that was cut is replaced by U+FFFD.
  // SentencePiece vocabularies drop the leading space of the first text token, as SentencePiece does, so
  // decode(encode(s)) == s.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;
  // The raw bytes a token stands for (after byte-level / ▁ mapping), as used by incremental decoding.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The token's vocabulary string as stored (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual std::string_view token_text(int32_t id) const = 0;
  virtual std::optional<int32_t> token_id(std::string_view token_text) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;                // -1 if none
  virtual std::vector<int32_t> eos_ids() const = 0;  // may be several (e.g. <|im_end|>, <|endoftext|>)
  // Control and unknown tokens (HF added tokens with "special": true); not user-defined added tokens.
  virtual bool is_special(int32_t id) const = 0;
  virtual bool adds_bos() const = 0;

  // What decoding carries from one token to the next: SentencePiece drops the space its encoder prepended,
  // i.e. the leading space of the first text token only.
  struct DecodeState {
    bool at_text_start = true;
  };
  // Appends the bytes token id contributes at this point of a sequence, as decode() would, before UTF-8
  // repair (so possibly part of a character). Throws Error for an id outside the vocabulary.
  virtual void decode_piece(int32_t id, bool skip_special, DecodeState& state, std::string& out) const = 0;
};

}  // namespace minfer
