// A Hugging Face byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json) as the tokenizer.ggml.*
// metadata llama.cpp reads, laid out as llama.cpp's convert_hf_to_gguf.py writes it: tokens by id (ids the
// tokenizer leaves empty up to the model's vocab_size as "[PADn]", unused), token types, merges "a b", the special
// token ids, and tokenizer.ggml.pre, the name llama.cpp knows the pre-tokenizer by.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minfer {

struct GgufVocab {
  std::string pre;  // llama.cpp's pre-tokenizer name ("qwen2", "llama-bpe", "smollm", ...)
  bool ignore_merges = false;
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // llama.cpp's: 1 normal, 3 control, 4 user-defined, 5 unused
  std::vector<std::string> merges;
  std::optional<int32_t> bos, eos, pad;
  std::optional<bool> add_bos;
  std::string chat_template;
};

// The pre-tokenizer name is the first llama.cpp name whose regexes split a probe text (words, contractions,
// digits, whitespace runs, several scripts) exactly as the tokenizer.json's own pre-tokenizer does. Throws
// LoadError naming the file when the tokenizer is not byte-level BPE, no name matches, or an id is past vocab_size.
GgufVocab gguf_vocab_from_hf(const std::string& tokenizer_json, const std::string& tokenizer_config,
                             int64_t vocab_size);

}  // namespace minfer
