// The Scheduler's side of the KV tiers (kv/kv_tiers.h): loads of prefix pages from a tier into a new sequence's pool
// pages, and their ends.
#include <algorithm>

#include "base/error.h"
#include "engine/scheduler.h"

namespace minfer {

std::vector<TierLoad> Scheduler::tier_loads(const Sequence* seq, const std::vector<std::vector<int32_t>>& prefixes,
                                            size_t hit_pages) const {
  const int64_t ps = first_pages().page().size();
  std::vector<TierLoad> loads;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::span<const int32_t> table = groups_[g].pages->page_table(seq->id);
    ContentKey key = root_content_key(static_cast<uint32_t>(g));
    for (size_t j = 0; j < hit_pages; ++j) {
      const auto tokens = std::span(seq->tokens).subspan(j * static_cast<size_t>(ps), static_cast<size_t>(ps));
      key = chain_content_key(key, tokens);
      if (j < prefixes[g].size()) continue;  // in the pool
      loads.push_back({static_cast<uint32_t>(g), table[j], key, std::vector<int32_t>(tokens.begin(), tokens.end())});
    }
  }
  return loads;
}

void Scheduler::finish_load(Sequence* seq, bool ok) {
  const int64_t until = std::exchange(seq->kv_load_until, 0);
  if (ok) {
    seq->num_computed = until;
    if (seq->kv_load_first) seq->cached_tokens = until;
    for (const KvGroupPages& g : groups_) g.pages->cache_full_pages(seq->id, seq->tokens, seq->num_computed);
    return;
  }
  // Back to the front of the queue: admitted again, it finds what the tiers still hold (the bad entry is gone).
  free_pages(seq);
  seq->num_computed = 0;
  seq->status = SeqStatus::kWaiting;
  if (seq->kv_load_first) seq->admitted_before = false;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);
}

bool Scheduler::finish_loads(bool block) {
  std::vector<std::pair<Sequence*, bool>> done;
  for (Sequence* seq : running_) {
    if (seq->kv_load_until == 0) continue;
    if (block) {
      done.emplace_back(seq, tiers_->wait(seq->id));
      break;
    }
    if (const std::optional<bool> ok = tiers_->poll(seq->id)) done.emplace_back(seq, *ok);
  }
  for (auto [seq, ok] : done) finish_load(seq, ok);
  return !done.empty();
}

void Scheduler::cancel_load(Sequence* seq) {
  if (seq->kv_load_until == 0) return;
  tiers_->wait(seq->id);  // its pages are being written: they go back only once the worker is done with them
  seq->kv_load_until = 0;
}

}  // namespace minfer
