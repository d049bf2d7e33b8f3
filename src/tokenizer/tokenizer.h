// Text <-> token ids. Two algorithms behind one interface: byte-level BPE (GPT-2, Qwen2, Llama 3 and other
// tokenizer.json / GGUF "gpt2" vocabularies, pre-split by PCRE2 regexes) and SentencePiece-style BPE
// (Llama 2: scores or merges, "▁" for spaces, <0xXX> byte fallback).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loaders; each throws LoadError naming the file and the problem.
  // tokenizer.json (+ tokenizer_config.json when the path is non-empty: add_bos_token, bos/eos tokens).
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& tokenizer_json_path,
                                                 const std::string& tokenizer_config_path = "");
  // tokenizer.ggml.* metadata of a GGUF file (model "llama" = SentencePiece, "gpt2" = byte-level BPE).
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
  // llama2.c's tokenizer .bin (max_token_length, then per token: f32 score, i32 length, bytes).
  static std::unique_ptr<Tokenizer> from_llama2c(const std::string& path);
  // Any of the above by what the file is: *.json (with tokenizer_config.json beside it, if there is one),
  // a GGUF file (by its magic), else a llama2.c tokenizer .bin.
  static std::unique_ptr<Tokenizer> from_file(const std::string& path);

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

// Streaming detokenizer: feed one id at a time, get the text that is now final. Never returns a partial
// UTF-8 character; holds back bytes until the character completes (at most 3). SentencePiece's
// leading-space rule is applied as in a full decode, so concatenating every push() output and flush()
// equals decode(all ids, skip_special). Pass continues_text = true when the ids continue text decoded
// elsewhere (generated tokens after a prompt): a SentencePiece "▁word" then keeps its space.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false, bool continues_text = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {
    state_.at_text_start = !continues_text;
  }
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 sequence becomes U+FFFD); the decoder can go on after.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  Tokenizer::DecodeState state_;
  std::string pending_;  // bytes of an unfinished UTF-8 character
};

}  // namespace minfer
