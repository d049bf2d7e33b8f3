#include "kv/ram_tier.h"

#include <algorithm>

namespace minfer {

namespace {
int64_t page_bytes(const TierPage& p) {
  return static_cast<int64_t>(p.payload.size() + p.tokens.size() * sizeof(int32_t) + sizeof(TierPage));
}
}  // namespace

bool RamTier::contains(const ContentKey& key) const {
  std::lock_guard lock(mu_);
  return index_.count(key) != 0;
}

std::vector<TierPagePtr> RamTier::put(TierPagePtr page) {
  std::vector<TierPagePtr> evicted;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(page->key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);
    return evicted;
  }
  if (page_bytes(*page) > max_bytes_) return {std::move(page)};  // never fits: straight through
  bytes_ += page_bytes(*page);
  lru_.push_back(std::move(page));
  index_[lru_.back()->key] = std::prev(lru_.end());
  while (bytes_ > max_bytes_) {
    TierPagePtr old = std::move(lru_.front());
    lru_.pop_front();
    index_.erase(old->key);
    bytes_ -= page_bytes(*old);
    ++evictions_;
    evicted.push_back(std::move(old));
  }
  return evicted;
}

TierPagePtr RamTier::get(const ContentKey& key, std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  const TierPagePtr& p = *it->second;
  if (!std::equal(tokens.begin(), tokens.end(), p->tokens.begin(), p->tokens.end())) return nullptr;
  lru_.splice(lru_.end(), lru_, it->second);
  return p;
}

RamTierStats RamTier::stats() const {
  std::lock_guard lock(mu_);
  return {static_cast<int64_t>(index_.size()), bytes_, evictions_};
}

}  // namespace minfer
