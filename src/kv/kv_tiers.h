// The KV cache beyond the pool: a host-RAM tier and a disk tier behind the prefix cache's eviction (SGLang's
// HiCache, vLLM's offloading connectors, llama.cpp's --cache-ram and slot files are the anchors).
//
// - A page evicted from the pool's prefix cache is copied to the RAM tier (ram_tier.h); pages the RAM tier evicts go
//   to the disk tier (disk_tier.h) when it lacks them.
// - With a disk tier, every page the pool registers (full of computed KV) is also written through to disk in the
//   background, so a crash loses at most the pages still queued; destruction (a clean shutdown) writes what is queued.
// - A prefix that continues past the pool's hit in the tiers is copied back into fresh pool pages by the tiers'
//   worker thread, not the step thread: the scheduler (scheduler.h) holds the sequence until its load is done.
//
// Entries are keyed by content keys (content_key.h) chained over the whole prefix per KV group, within the model's
// identity (model_identity.h). Copies out of the pool happen on the step thread, while the page still holds them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kv/content_key.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"
#include "kv/page_manager.h"
#include "kv/ram_tier.h"
#include "kv/state_pool.h"
#include "minfer/outputs.h"  // RequestId

namespace minfer {

struct KvTierOptions {
  int64_t ram_bytes = 0;  // 0: no RAM tier
  std::string dir;        // empty: no disk tier
  int64_t dir_bytes = 0;
  ContentKey identity;  // the model's (model_identity.h)
  int64_t page_size = 0;
  // Pages queued for the disk beyond this many bytes are not written (counted): a slow disk must not grow memory.
  int64_t max_queued_bytes = int64_t{512} << 20;
};

// Pages found and bytes moved, per tier.
struct KvTierCounters {
  int64_t hit_tokens = 0;     // prompt tokens whose KV a load brought back from the tier (KV group 0's pages)
  int64_t read_bytes = 0;     // brought back into the pool
  int64_t written_bytes = 0;  // stored into the tier
};

struct KvTierStats {
  bool ram_enabled = false;
  KvTierCounters ram, disk;
  RamTierStats ram_store;
  DiskTierStats disk_store;
  int64_t dropped_writes = 0;  // not written: the queue was full
  int64_t failed_loads = 0;    // loads that stopped at a missing or corrupt entry (the sequence recomputes instead)
};

// The group of the recurrent layers' state snapshots (state_pool.h) in the tiers: an entry holds the state after a
// page-aligned prefix (keyed by the prefix from this group's root), and a load restores it into a state slot.
inline constexpr uint32_t kStateTierGroup = 0xffff;

// One page for a load: the tier entry (group, key, tokens) and the pool page it goes into (the state slot for
// kStateTierGroup).
struct TierLoad {
  uint32_t group = 0;
  int32_t page = 0;
  ContentKey key;
  std::vector<int32_t> tokens;
};

class KvTiers : public PageEvents {
 public:
  // groups[g]: the pool of KV group g (the page managers' PageManagerOptions::group).
  KvTiers(const KvTierOptions& options, std::vector<KvCache*> groups);
  ~KvTiers() override;  // writes the queued pages, then stops the worker
  KvTiers(const KvTiers&) = delete;
  KvTiers& operator=(const KvTiers&) = delete;

  // Step thread, from the page managers: a page just registered in the prefix cache / about to be reused.
  void on_registered(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) override;
  void on_evicted(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) override;

  // Models with recurrent layers: the state pool whose snapshots go through the tiers too. A snapshot just saved from
  // `slot` after the prefix ending with the page `tokens` (key: state_key) is written through to both tiers; whether
  // a tier holds one.
  void set_state_pool(StatePool* states) { states_ = states; }
  void on_state_saved(const ContentKey& key, std::span<const int32_t> tokens, int32_t slot);
  bool holds(const ContentKey& key) const;

  // How many whole pages of `tokens` from page `first` on (at most max_pages) a tier holds for `group`, in a row.
  int64_t probe(uint32_t group, std::span<const int32_t> tokens, int64_t first, int64_t max_pages) const;
  // The load of tier pages into pool pages for `seq` (one at a time per sequence), run by the worker.
  void start_load(RequestId seq, std::vector<TierLoad> pages);
  // Not yet: nullopt; done: whether every page came back (the result is taken).
  std::optional<bool> poll(RequestId seq);
  bool wait(RequestId seq);  // blocks until the load of seq is done; its result (taken)

  KvTierStats stats() const;
  int64_t page_size() const { return opt_.page_size; }

 private:
  struct Write {
    TierPagePtr page;
  };
  TierPagePtr copy_out(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) const;
  void queue_write(TierPagePtr page);  // mu_ held
  bool load_page(const TierLoad& p);
  void run();  // the worker

  KvTierOptions opt_;
  std::vector<KvCache*> groups_;
  StatePool* states_ = nullptr;
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<DiskTier> disk_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<RequestId, std::vector<TierLoad>>> loads_;
  std::deque<Write> writes_;
  std::unordered_set<ContentKey, ContentKeyHash> queued_;  // keys in writes_
  int64_t queued_bytes_ = 0;
  std::map<RequestId, bool> results_;  // loads done, not yet polled
  std::unordered_set<RequestId> in_flight_;
  KvTierStats counts_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace minfer
