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

#include "minfer/tokenizer.h"

namespace minfer {

class GgufFile;

// Loaders; each throws LoadError naming the file and the problem.
// tokenizer.json (+ tokenizer_config.json when the path is non-empty: add_bos_token, bos/eos tokens).
std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const std::string& tokenizer_json_path,
                                                  const std::string& tokenizer_config_path = "");
// tokenizer.ggml.* metadata of a GGUF file (model "llama" = SentencePiece, "gpt2" = byte-level BPE).
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& gguf);
// llama2.c's tokenizer .bin (max_token_length, then per token: f32 score, i32 length, bytes).
std::unique_ptr<Tokenizer> tokenizer_from_llama2c(const std::string& path);
// Any of the above by what the file is: *.json (with tokenizer_config.json beside it, if there is one),
// a GGUF file (by its magic), else a llama2.c tokenizer .bin.
std::unique_ptr<Tokenizer> tokenizer_from_file(const std::string& path);

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
