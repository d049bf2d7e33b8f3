// Prompt lookup (issue 25's `--speculative ngram`, vLLM's ngram proposer): drafts for a sequence found in its own
// tokens. The last n tokens (n from max_n down to min_n) are looked for earlier in the prompt and output; at the
// latest earlier place they occur, the k tokens that followed are the draft. Editing, quoting and code repeat
// their context, so the draft is often right; open chat rarely repeats, and then nothing is proposed.
//
// The engine step checks the drafts (engine/speculative.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace minfer {

struct NgramOptions {
  int min_n = 1;  // shortest suffix looked up (vLLM's prompt_lookup_min)
  int max_n = 4;  // longest (prompt_lookup_max); a longer match is preferred: it predicts better
  int k = 4;      // draft tokens proposed at most (num_speculative_tokens)
};

// Up to options.k tokens that followed the latest earlier occurrence of the longest suffix of `tokens` (length
// max_n down to min_n) that occurs earlier; empty when none does. The draft may run to the end of `tokens`, so it
// can be shorter than k. O(len(tokens) * max_n).
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramOptions& options);

}  // namespace minfer
