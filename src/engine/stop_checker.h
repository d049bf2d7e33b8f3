// Decides when a request stops and what text it streams: incremental detokenization, stop tokens (EOS
// unless ignore_eos, stop_token_ids), stop strings, max_tokens and the context limit.
//
// Stop strings are matched on the detokenized text, so a stop string spanning several tokens matches
// across token boundaries. Text that could still become the start of a stop string is held back; once a
// stop string matches, the text before it is released and the rest (the stop string and anything after
// it in the same token) is dropped. Every byte is released at most once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "minfer/outputs.h"
#include "minfer/sampling.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

class StopChecker {
 public:
  // tokenizer may be null (then no text, and params.stop must be empty). max_total_tokens caps prompt +
  // output (max_model_len). continues_text: the prompt has text, so the output continues it (SentencePiece
  // keeps the first token's leading space) rather than starting a text.
  StopChecker(const SamplingParams& params, const Tokenizer* tokenizer, std::span<const int32_t> eos_ids,
              int64_t prompt_len, int64_t max_total_tokens, bool continues_text = true);

  struct Step {
    std::string text;  // newly released text
    FinishReason finish = FinishReason::kNone;
    std::string stop_reason;  // the stop string that matched
  };
  // Feeds the token just generated (num_output counts it).
  Step append(int32_t token, int64_t num_output);

  // All text released so far.
  const std::string& text() const { return released_; }

 private:
  std::string release(size_t n);  // releases pending_[0, n)
  size_t held_suffix() const;     // length of the longest tail of pending_ that starts a stop string

  SamplingParams params_;
  std::vector<int32_t> eos_;
  int64_t prompt_len_;
  int64_t max_total_;
  std::optional<IncrementalDecoder> decoder_;
  int32_t vocab_size_ = 0;
  std::string pending_;  // decoded but not yet released
  std::string released_;
};

}  // namespace minfer
