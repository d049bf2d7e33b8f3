// SentencePiece-style BPE (Llama 2, Phi-3, TinyStories): spaces become "▁", a "▁" is prepended to each
// text segment, characters are merged pairwise — by the score of the merged piece (SentencePiece models,
// GGUF "llama", llama2.c) or by merge rank (HF tokenizer.json) — and characters without a piece fall back
// to <0xXX> byte tokens.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/flat_tables.h"
#include "tokenizer/vocab_tokenizer.h"

namespace minfer {

struct SentencePieceBpeOptions {
  // Where a "▁" is prepended (SentencePiece's add_dummy_prefix): to every text segment, i.e. the input's
  // start and text after a special token (SentencePiece, llama.cpp, HF's Prepend normalizer), only to the
  // input's start (HF Metaspace prepend_scheme "first"), or nowhere. Decode drops the first space unless kNever.
  enum class SpacePrefix { kEverySegment, kInputStart, kNever };
  SpacePrefix space_prefix = SpacePrefix::kEverySegment;
  bool split_words = false;  // HF Metaspace split = true: BPE runs on each "▁word" separately
  bool fuse_unk = false;     // HF: consecutive unknown characters give one <unk>
};

class SentencePieceBpe final : public VocabTokenizer {
 public:
  using MergeList = std::vector<std::pair<std::string_view, std::string_view>>;
  // Merges by piece score (highest first). vocab must be finalized.
  SentencePieceBpe(Vocab vocab, SentencePieceBpeOptions options);
  // Merges by rank of the (left, right) pair in merges (lowest first).
  SentencePieceBpe(Vocab vocab, const MergeList& merges, SentencePieceBpeOptions options);

 protected:
  void encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const override;

 private:
  void init();
  // Id of a piece BPE may produce (normal or user-defined), or -1.
  int32_t piece_id(std::string_view text) const;
  // Appends the ids of one word, from the cache when it was seen before.
  void encode_word(std::string_view word, bool& last_was_unk, std::vector<int32_t>& out) const;
  // BPE over one word: characters merged pairwise until no merge applies.
  void merge_word(std::string_view word, bool& last_was_unk, std::vector<int32_t>& out) const;
  void emit_piece(std::string_view text, int32_t id, bool& last_was_unk, std::vector<int32_t>& out) const;

  SentencePieceBpeOptions options_;
  bool by_rank_ = false;
  // No piece has a "▁" right after another character, so no merge can cross the point before a "▁" that
  // follows a non-"▁": text splits there into words that are merged separately (and cached).
  bool splits_before_space_ = false;
  MergeTable merges_;
  std::vector<int32_t> byte_ids_;  // <0xXX> token of each byte, or -1

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace minfer
