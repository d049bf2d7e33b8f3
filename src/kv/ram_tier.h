// The host-RAM tier of the KV cache (--kv-offload-ram SIZE): pages evicted from the pool's prefix cache, kept in
// ordinary memory up to a size bound, least recently used out first (to the disk tier when it lacks them). A prefix
// hit here costs a copy back into the pool instead of a prefill. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/content_key.h"

namespace minfer {

// One page beyond the pool: its key, its tokens (checked on every hit) and its KV (KvCache::copy_page_out's layout).
struct TierPage {
  uint32_t group = 0;
  ContentKey key;
  std::vector<int32_t> tokens;
  std::vector<unsigned char> payload;
};
using TierPagePtr = std::shared_ptr<const TierPage>;

struct RamTierStats {
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t evictions = 0;
};

class RamTier {
 public:
  explicit RamTier(int64_t max_bytes) : max_bytes_(max_bytes) {}
  bool contains(const ContentKey& key) const;
  // Adds (or refreshes) a page; returns the pages evicted to make room, least recently used first.
  std::vector<TierPagePtr> put(TierPagePtr page);
  // The page under `key` holding these tokens (made the most recently used), or null.
  TierPagePtr get(const ContentKey& key, std::span<const int32_t> tokens);
  RamTierStats stats() const;

 private:
  int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<TierPagePtr> lru_;  // front: least recently used
  std::unordered_map<ContentKey, std::list<TierPagePtr>::iterator, ContentKeyHash> index_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace minfer
