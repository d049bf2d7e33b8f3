// Byte-level BPE (GPT-2, Qwen2, Llama 3, DeepSeek, Falcon, StarCoder): text is pre-split by regexes, each
// word's bytes become GPT-2's printable stand-in characters, and merges are applied by rank.
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/flat_tables.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab_tokenizer.h"

namespace minfer {

struct ByteLevelBpeOptions {
  PreTokenizer pre_tokenizer;
  bool add_prefix_space = false;  // HF ByteLevel: prepend a space to text that does not start with one
  bool ignore_merges = false;     // a word that is itself in the vocabulary is one token (Llama 3)
};

class ByteLevelBpe final : public VocabTokenizer {
 public:
  // merges: (left, right) token texts in rank order. A merge naming a text outside the vocabulary can never
  // apply and is dropped. vocab must be finalized.
  ByteLevelBpe(Vocab vocab, const std::vector<std::pair<std::string_view, std::string_view>>& merges,
               ByteLevelBpeOptions options);

  size_t merge_count() const { return merges_.size(); }

 protected:
  void encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const override;

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void push_id(int32_t id, std::vector<int32_t>& out) const;

  ByteLevelBpeOptions options_;
  MergeTable merges_;
  std::vector<int32_t> byte_ids_;  // id of the single-character token of each byte, or -1

  // Words repeat a lot in real text; their tokens are cached (bounded, cleared when full).
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace minfer
