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

  // Encodes text. add_special: prepend BOS when the tokenizer's config says so (add_bos_token) and it has
  // one. parse_special: text like "<|im_start|>" becomes its special token id instead of being split.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                                      bool parse_special = true) const = 0;
  // Decodes ids to UTF-8 text (special tokens included unless skip_special). Invalid UTF-8 from a byte
  // sequence that was cut is replaced by U+FFFD.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;
  // The raw bytes a token stands for (after byte-level / ▁ mapping), as used by incremental decoding.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The token's vocabulary string as stored (e.g. "Ġthe", "▁the", "<0x0A>").
  virtual std::string_view token_text(int32_t id) const = 0;
  virtual std::optional<int32_t> token_id(std::string_view token_text) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;                 // -1 if none
  virtual std::vector<int32_t> eos_ids() const = 0;   // may be several (e.g. <|im_end|>, <|endoftext|>)
  virtual bool is_special(int32_t id) const = 0;
  virtual bool adds_bos() const = 0;
};

// Streaming detokenizer: feed one id at a time, get the text that is now final. Never returns a partial
// UTF-8 character; holds back bytes until the character completes. SentencePiece's leading-space rule is
// applied as in a full decode, so concatenating every output equals decode(all ids).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 sequence becomes U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
  std::string decoded_;
};

}  // namespace minfer
