// A small, valid byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json) in the style of a real model
// family, for test models: the GPT-2 byte-to-unicode alphabet (256 byte tokens), merges learned deterministically
// from a built-in English paragraph, and the family's special tokens.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer {

enum class TokenizerFamily : uint8_t {
  kQwen2,   // Qwen2/2.5: <|endoftext|>, <|im_start|>, <|im_end|>; ChatML template
  kLlama3,  // Llama 3: <|begin_of_text|>, <|end_of_text|>, <|start_header_id|>, ...; BOS added by the template
};

struct GeneratedTokenizer {
  nlohmann::ordered_json tokenizer;  // tokenizer.json
  nlohmann::ordered_json config;     // tokenizer_config.json
  int64_t size = 0;                  // ids are 0 .. size - 1, all assigned
  std::map<std::string, int32_t> special_ids;
};

// vocab_size == 0: the regular tokens, then the family's special tokens right after them (a tiny vocabulary).
// Otherwise the special tokens sit at the family's real ids (Qwen2 from 151643, Llama 3 from 128000) with
// reserved special tokens after them up to vocab_size, and the ids between the learned tokens and the specials
// are filled with regular placeholder tokens "<|reserved_ID|>" (in the real vocabularies those ids are ordinary
// BPE tokens; as regular tokens they cost a tokenizer nothing, and BPE never produces them).
GeneratedTokenizer generate_test_tokenizer(TokenizerFamily family, int64_t vocab_size = 0, int max_merges = 400);

// The building blocks, exposed for tests.
// GPT-2's bytes_to_unicode: the printable-character string a byte stands for in byte-level BPE.
std::string byte_to_unicode(uint8_t byte);
// The 256 byte tokens in GPT-2 / Qwen id order ('!' = 0, ..., then the remapped control and space bytes).
std::vector<std::string> byte_level_alphabet();
// Standard BPE training on `text` (pre-split into words with an optional leading space, digits, punctuation runs
// and whitespace): repeatedly merges the most frequent adjacent pair (ties: the lexicographically smallest pair),
// max_merges times or until every word is a single token.
std::vector<std::pair<std::string, std::string>> learn_bpe_merges(std::string_view text, int max_merges);
// The built-in training paragraph.
std::string_view test_tokenizer_corpus();

}  // namespace minfer
