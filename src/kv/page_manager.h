// Owns the pages of the KV pool: ref counts, one page table per sequence, and the automatic prefix cache.
//
// Pages are ref-counted so sequences with an equal prompt prefix share its pages. A page whose KV is
// complete (page_size computed tokens) is registered in the prefix cache under a key chained over the
// whole prefix (page_hash.h). A hit is accepted only when the page's stored tokens equal the query's and
// its parent is the page matched one level up (a unique registration id, not a hash), so a hash collision
// can never hand out a page with different KV.
//
// Free pages wait in one queue: never-cached pages at the front (reused first), cached pages with no
// reference at the back in the order they were released (LRU: the front is evicted first). A sequence's
// pages are released last page first, so deep pages of a prefix are evicted before the shared roots.
//
// Page 0 is the pool's null page and is never handed out.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/page_geometry.h"
#include "kv/content_key.h"
#include "minfer/outputs.h"  // RequestId

namespace minfer {

struct PageManagerOptions {
  int64_t num_pages = 0;  // including the null page
  PageGeometry page;
  bool enable_prefix_caching = true;
  // Contiguous layout (only for measuring): every sequence gets this many pages at its first allocation
  // (max_model_len worth), as a contiguous-KV engine must reserve. 0 = paged (pages on demand).
  int64_t reserve_pages_per_seq = 0;
  // Test hook: keys are masked with this, so a small mask forces hash collisions.
  uint64_t hash_mask = ~0ull;
};

// Where cached pages go beyond the pool (kv_tiers.h): told of each page registered in the prefix cache (its KV is
// complete) and of each cached page about to be reused for other data (its KV is still intact during the call).
class PageEvents {
 public:
  virtual ~PageEvents() = default;
  virtual void on_registered(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) = 0;
  virtual void on_evicted(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) = 0;
};

struct PrefixCacheStats {
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of which found in the cache
  int64_t evictions = 0;       // cached pages reused for other data
};

class PageManager {
 public:
  explicit PageManager(const PageManagerOptions& options);

  // The cached pages holding the longest prefix of `tokens` in whole pages, at most tokens.size() - 1
  // tokens (the last token is always recomputed so the step yields its logits). Takes no references;
  // pass the result to allocate() in the same scheduling pass.
  std::vector<int32_t> lookup_prefix(std::span<const int32_t> tokens) const;
  // Counts an admitted query in prefix_stats() (not done by lookup_prefix: a lookup may be retried).
  void record_prefix_query(int64_t queried_tokens, int64_t hit_tokens);

  // Makes `seq` hold enough pages for `num_tokens` tokens. For a sequence without pages, `prefix` (from
  // lookup_prefix) becomes the start of its table. Fails without changing anything when fewer than
  // `keep_free` pages would remain free afterwards.
  bool allocate(RequestId seq, int64_t num_tokens, std::span<const int32_t> prefix = {}, int64_t keep_free = 0);

  // Pages `seq` would still need to hold num_tokens (ignoring any prefix hit).
  int64_t pages_needed(RequestId seq, int64_t num_tokens) const;

  // Registers the pages of `seq` that are now full of computed KV (tokens[0, num_computed)) in the prefix
  // cache. A page whose exact prefix is already cached is swapped for the cached page and released.
  void cache_full_pages(RequestId seq, std::span<const int32_t> tokens, int64_t num_computed);

  // Releases every page of `seq` (no-op for an unknown sequence).
  void free(RequestId seq);
  // Releases the pages of `seq` before page index `first_kept` (those a sliding window has passed for good); their
  // table entries become the null page 0, so the table keeps its positions. Cached pages stay findable in the
  // prefix cache until evicted, like a finished sequence's. Returns how many pages it released.
  int64_t release_before(RequestId seq, int64_t first_kept);

  // Releases the pages at the end of the table of `seq` beyond those holding num_tokens tokens (speculative
  // decoding's rejected drafts: their KV is not the sequence's). Pages reserved up front (contiguous layout) stay.
  // Returns how many pages it released.
  int64_t truncate(RequestId seq, int64_t num_tokens);

  std::span<const int32_t> page_table(RequestId seq) const;
  bool has_pages(RequestId seq) const { return seqs_.count(seq) != 0; }

  const PageGeometry& page() const { return opt_.page; }
  int64_t num_usable_pages() const { return opt_.num_pages - 1; }
  int64_t num_free_pages() const { return free_count_; }  // includes evictable cached pages
  int64_t num_used_pages() const { return num_usable_pages() - free_count_; }
  int64_t num_cached_pages() const { return static_cast<int64_t>(cache_.size()); }
  bool prefix_caching() const { return opt_.enable_prefix_caching; }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  int32_t ref_count(int32_t page) const { return pages_[static_cast<size_t>(page)].refs; }
  // The registration id of a page in the prefix cache (unique over the manager's life), 0 when it is not cached: what
  // the recurrent layers' state snapshots are keyed by.
  uint64_t registration(int32_t page) const {
    const Page& p = pages_[static_cast<size_t>(page)];
    return p.cached ? p.uid : 0;
  }

  // Tells `events` (null: nobody) of registrations and evictions from now on, as KV group `group` (the root of the
  // pages' content keys, content_key.h). Set before any page is registered.
  void set_events(PageEvents* events, uint32_t group) {
    events_ = events;
    group_ = group;
  }

  // Drops every unreferenced cached page (e.g. after weights change); referenced pages stay.
  void reset_prefix_cache();

  // Recounts references from the page tables and walks the free queue; throws on any inconsistency.
  void check_invariants() const;

 private:
  struct Page {
    int32_t refs = 0;
    bool cached = false;  // registered in cache_
    uint64_t key = 0;     // cache key (valid when cached)
    uint64_t uid = 0;     // registration id, unique over the manager's life (0 = none)
    uint64_t parent_uid = 0;
    ContentKey content;            // the whole prefix's content key (when cached), for the tiers
    std::vector<int32_t> tokens;   // the page's token ids (when cached), for the equality check on hit
    int32_t prev = -1, next = -1;  // free queue links
    bool in_free = false;
  };
  struct SeqPages {
    std::vector<int32_t> table;
    int64_t num_hashed = 0;   // leading pages whose chain position is known
    uint64_t last_key = 0;    // unmasked chain hash of the last hashed page
    uint64_t last_uid = 0;    // registration id of the last hashed page (0 = chain broken or root)
    ContentKey last_content;  // content key of the last hashed page
    bool chain_broken = false;
    int64_t num_released = 0;  // leading entries released by release_before (now the null page)
  };

  int32_t pop_free();  // front of the queue; evicts it from the cache if cached
  void push_free_front(int32_t page);
  void push_free_back(int32_t page);
  void unlink_free(int32_t page);
  void release(int32_t page);
  void uncache(int32_t page);

  PageManagerOptions opt_;
  std::vector<Page> pages_;
  int32_t free_head_ = -1, free_tail_ = -1;
  int64_t free_count_ = 0;
  std::unordered_map<uint64_t, int32_t> cache_;  // key -> page
  std::unordered_map<RequestId, SeqPages> seqs_;
  uint64_t next_uid_ = 1;
  PrefixCacheStats stats_;
  PageEvents* events_ = nullptr;
  uint32_t group_ = 0;
};

}  // namespace minfer
