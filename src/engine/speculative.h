// Speculative decoding inside continuous batching (issue 25): vLLM v1's design, on the CPU.
//
// Before each step the speculator proposes up to k draft tokens for every decoding sequence (prompt lookup:
// engine/ngram_proposer.h). The scheduler gives the sequence a chunk of 1 + k tokens, its decode token and the
// drafts, in the same step as everything else; the chunk returns a row of logits after each of its tokens. Tokens
// are then sampled from those rows in order, exactly as the plain steps would sample them, and each draft is kept
// while it equals the token sampled before it; the first that differs is replaced by the sampled token, and when
// all are kept the last row gives one token more. A step thus yields 1 to k + 1 tokens per sequence.
//
// Why the outputs are the target model's: with a point-mass draft (q(d) = 1), Leviathan et al.'s rejection
// sampling accepts d with probability min(1, p(d) / q(d)) = p(d) and otherwise draws from max(0, p - q), which is
// p without d, renormalised. Drawing t ~ p and accepting d when t == d does the same thing: P(accept) = p(d), and
// a rejected t is distributed as p given t != d. So every token comes from the target's distribution after the
// same penalties, bias, grammar mask and filters; greedy outputs equal the non-speculative ones, and a seeded
// request consumes its RNG exactly as without speculation (one draw per token). A drafted row comes from a chunk of
// several rows, so its logits equal a lone decode's up to float rounding, as in any batch.
//
// Rejected drafts' KV (written this step) is not the sequence's: num_computed advances only over accepted tokens,
// the prefix cache hashes only those, and pages that held only rejected drafts go back to the pool
// (Scheduler::on_drafts_checked).
//
// k adapts per sequence: it grows by one after a check that accepted everything, drops to the accepted length
// plus one otherwise; after kMaxMisses checks in a row that accepted nothing, the sequence proposes nothing for
// kCooldownSteps steps (its context stopped repeating itself) and then starts again from k = 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ngram_proposer.h"
#include "engine/sequence.h"
#include "minfer/config.h"

namespace minfer {

// Engine-wide counters (vLLM's spec_decode metrics).
struct SpecDecodeCounters {
  SpecDecodeUsage usage;                  // every request's checks (one per sequence per step with drafts)
  std::vector<int64_t> accepted_per_pos;  // [num_speculative_tokens]: checks whose draft at that position was kept
};

// "A of D draft tokens accepted (R%), mean accepted length L over N checks": what generate and bench print.
std::string spec_decode_summary(const SpecDecodeUsage& usage);

class Speculator {
 public:
  static constexpr int kMaxMisses = 4;
  static constexpr int kCooldownSteps = 16;

  explicit Speculator(const SpeculativeConfig& config);

  // How many drafts seq gets next step: its k, at most `limit` (the room left before max_tokens or the context
  // ends); 0 while it is cooling down.
  int64_t draft_length(Sequence& seq, int64_t limit);
  // Prompt lookup: sets seq.draft for its next step, draft_length(seq, limit) tokens at most (none without a match).
  void propose_ngram(Sequence& seq, int64_t limit);
  // A check of `drafted` tokens kept the first `accepted`: counts it and adapts seq's k.
  void record(Sequence& seq, int64_t drafted, int64_t accepted);

  const SpecDecodeCounters& counters() const { return counters_; }

 private:
  SpeculativeConfig config_;
  SpecDecodeCounters counters_;
};

}  // namespace minfer
