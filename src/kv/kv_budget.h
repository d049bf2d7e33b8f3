// Sizing the KV pool: how many pages a memory budget buys, and the start-up refusal (with the numbers and
// the knobs to turn) when it cannot hold one max_model_len sequence.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_cache.h"

namespace minfer {

struct KvPoolRequest {
  KvCacheShape shape;         // num_pages ignored
  int64_t budget_bytes = 0;   // what the pool may take
  std::string budget_source;  // how the budget was chosen, for messages (e.g. "kv_cache_memory")
  int64_t max_model_len = 0;
  int64_t max_useful_pages = 0;  // no point in more (max_num_seqs full-length sequences); 0 = no cap
};

struct KvPoolPlan {
  int64_t num_pages = 0;  // including the null page
  int64_t pages_per_max_seq = 0;
  int64_t bytes = 0;  // num_pages * bytes_per_page
};

// Throws minfer::Error when the budget cannot hold one sequence of max_model_len tokens.
KvPoolPlan plan_kv_pool(const KvPoolRequest& request);

}  // namespace minfer
