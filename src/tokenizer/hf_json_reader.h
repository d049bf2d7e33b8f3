// Reads a Hugging Face tokenizer.json. model.vocab and model.merges (150K entries each in Qwen2 / Llama 3)
// are streamed into flat vectors by a SAX handler instead of a JSON tree, which would cost hundreds of
// thousands of small allocations; the rest of the file is kept as JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace minfer {

struct HfTokenizerJson {
  nlohmann::json root;  // the whole file except model.vocab and model.merges
  bool has_vocab = false;
  std::vector<std::pair<std::string, int64_t>> vocab;       // model.vocab in file order
  std::vector<std::pair<std::string, std::string>> merges;  // model.merges, "a b" strings split at the space
};

// Throws LoadError naming path for a missing file, malformed JSON, or a vocab / merges of the wrong shape.
HfTokenizerJson read_hf_tokenizer_json(const std::string& path);

// The pre-tokenizer of a byte-level BPE tokenizer.json (its Split / ByteLevel / Digits chain), as minfer runs it.
// Throws LoadError naming path for a component it does not support or a ByteLevel with add_prefix_space.
PreTokenizer hf_byte_level_pre_tokenizer(const std::string& path, const nlohmann::json& root);

// A tokenizer_config.json special token (bos_token, eos_token, pad_token): a string or {"content": ...}.
std::optional<std::string> hf_config_token(const nlohmann::json& config, const char* key);

// Any JSON file as a tree; throws LoadError naming path.
nlohmann::json read_json_file(const std::string& path);

}  // namespace minfer
