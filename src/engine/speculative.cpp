#include "engine/speculative.h"

#include <fmt/format.h>

#include <algorithm>

namespace minfer {

std::string spec_decode_summary(const SpecDecodeUsage& u) {
  return fmt::format("{} of {} draft tokens accepted ({:.1f}%), mean accepted length {:.2f} over {} checks",
                     u.accepted_tokens, u.draft_tokens, 100.0 * u.acceptance_rate(), u.mean_accepted_length(),
                     u.num_drafts);
}

Speculator::Speculator(const SpeculativeConfig& config) : config_(config) {
  counters_.accepted_per_pos.assign(static_cast<size_t>(config_.num_speculative_tokens), 0);
}

int64_t Speculator::draft_length(Sequence& seq, int64_t limit) {
  SpecDecodeState& s = seq.spec;
  if (s.k == 0) s.k = config_.num_speculative_tokens;
  if (s.cooldown > 0) {
    if (--s.cooldown == 0) s.k = 1;
    return 0;
  }
  return std::max<int64_t>(0, std::min<int64_t>(s.k, limit));
}

void Speculator::propose_ngram(Sequence& seq, int64_t limit) {
  seq.draft.clear();
  const int64_t k = draft_length(seq, limit);
  if (k <= 0) return;
  NgramOptions options;
  options.min_n = config_.prompt_lookup_min;
  options.max_n = config_.prompt_lookup_max;
  options.k = static_cast<int>(k);
  seq.draft = minfer::propose_ngram(seq.tokens, options);
}

void Speculator::record(Sequence& seq, int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  SpecDecodeState& s = seq.spec;
  s.usage.add_check(drafted, accepted);
  counters_.usage.add_check(drafted, accepted);
  for (int64_t i = 0; i < accepted && i < static_cast<int64_t>(counters_.accepted_per_pos.size()); ++i)
    ++counters_.accepted_per_pos[static_cast<size_t>(i)];

  if (accepted == drafted) {
    s.k = std::min(s.k + 1, config_.num_speculative_tokens);
  } else {
    s.k = static_cast<int>(std::clamp<int64_t>(accepted + 1, 1, config_.num_speculative_tokens));
  }
  s.misses = accepted == 0 ? s.misses + 1 : 0;
  if (s.misses >= kMaxMisses) {
    s.misses = 0;
    s.cooldown = kCooldownSteps;
  }
}

}  // namespace minfer
