// What both BPE flavours share: a Vocab, the special-token split and BOS/EOS in encode(), and decoding
// through per-token byte strings. Subclasses only encode plain text.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace minfer {

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = true) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  std::string token_bytes(int32_t id) const override;
  std::string_view token_text(int32_t id) const override;
  std::optional<int32_t> token_id(std::string_view token_text) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  int32_t bos_id() const override { return vocab_.bos; }
  std::vector<int32_t> eos_ids() const override { return vocab_.eos; }
  bool is_special(int32_t id) const override;
  bool adds_bos() const override { return vocab_.add_bos && vocab_.bos >= 0; }
  void decode_piece(int32_t id, bool skip_special, DecodeState& state, std::string& out) const override;

  const Vocab& vocab() const { return vocab_; }

 protected:
  // make_token_bytes(vocab)[id]: the bytes a normal or byte token stands for. strip_first_space: drop the
  // leading space of the first text token when decoding (SentencePiece's add_dummy_prefix).
  using TokenBytesFn = std::vector<std::string> (*)(const Vocab&);
  VocabTokenizer(Vocab vocab, TokenBytesFn make_token_bytes, bool strip_first_space);

  // Encodes valid UTF-8 text that holds no special token: the start of the input (at_input_start) or text
  // after a special token. SentencePiece prepends its space to such segments.
  virtual void encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const = 0;

  void check_id(int32_t id) const;

 private:
  Vocab vocab_;
  std::vector<std::string> token_bytes_;
  bool strip_first_space_;
};

}  // namespace minfer
