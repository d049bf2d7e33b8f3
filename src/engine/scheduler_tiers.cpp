// The Scheduler's side of the KV tiers (kv/kv_tiers.h): loads of prefix pages from a tier into a new sequence's pool
// pages, and their ends.
#include <algorithm>

#include "base/error.h"
#include "engine/scheduler.h"

namespace minfer {

std::vector<ContentKey> Scheduler::state_keys(std::span<const int32_t> tokens, size_t pages) const {
  const auto ps = static_cast<size_t>(first_pages().page().size());
  const auto every = static_cast<size_t>(opt_.state_snapshot_tokens) / ps;
  std::vector<ContentKey> keys;
  ContentKey key = root_content_key(kStateTierGroup);
  for (size_t j = 0; j < pages; ++j) {
    key = chain_content_key(key, tokens.subspan(j * ps, ps));
    if ((j + 1) % every == 0) keys.push_back(key);
  }
  return keys;
}

std::vector<TierLoad> Scheduler::tier_loads(const Sequence* seq, const std::vector<std::vector<int32_t>>& prefixes,
                                            size_t hit_pages, const ContentKey& tier_snapshot) const {
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
  if (!tier_snapshot.empty()) {  // the state after the hit, into the slot allocate() gave the sequence
    const auto last =
        std::span(seq->tokens).subspan((hit_pages - 1) * static_cast<size_t>(ps), static_cast<size_t>(ps));
    loads.push_back(
        {kStateTierGroup, states_->slot_of(seq->id), tier_snapshot, std::vector<int32_t>(last.begin(), last.end())});
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
