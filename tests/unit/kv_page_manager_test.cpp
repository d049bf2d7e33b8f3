// PageManager: ref counts, the free queue (LRU eviction), prefix-cache hits, and hash collisions that
// must never hand out a page with different tokens.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "kv/kv_budget.h"
#include "kv/kv_cache.h"
#include "kv/page_manager.h"

namespace minfer {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = start + i;
  return t;
}

PageManagerOptions opts(int64_t usable, int64_t page_size = 16, bool prefix = true) {
  PageManagerOptions o;
  o.num_pages = usable + 1;
  o.page = PageGeometry::of(page_size);
  o.enable_prefix_caching = prefix;
  return o;
}

TEST(PageManager, AllocatesOnDemandAndFreesEverything) {
  PageManager bm(opts(8));
  EXPECT_EQ(bm.num_free_pages(), 8);
  ASSERT_TRUE(bm.allocate(1, 17));  // 2 pages
  EXPECT_EQ(bm.page_table(1).size(), 2u);
  ASSERT_TRUE(bm.allocate(1, 32));  // still 2
  EXPECT_EQ(bm.page_table(1).size(), 2u);
  ASSERT_TRUE(bm.allocate(1, 33));
  EXPECT_EQ(bm.page_table(1).size(), 3u);
  for (int32_t p : bm.page_table(1)) EXPECT_GE(p, 1);  // never the null page
  EXPECT_EQ(bm.num_used_pages(), 3);
  EXPECT_FALSE(bm.allocate(2, 6 * 16));  // 6 > 5 free: nothing changes
  EXPECT_FALSE(bm.has_pages(2));
  EXPECT_EQ(bm.num_free_pages(), 5);
  EXPECT_FALSE(bm.allocate(2, 5 * 16, {}, /*keep_free=*/1));
  ASSERT_TRUE(bm.allocate(2, 5 * 16));
  EXPECT_EQ(bm.num_free_pages(), 0);
  bm.check_invariants();
  bm.free(1);
  bm.free(2);
  bm.free(3);  // unknown: no-op
  EXPECT_EQ(bm.num_free_pages(), 8);
  EXPECT_EQ(bm.num_used_pages(), 0);
  bm.check_invariants();
}

// A sliding window's pages: released from the front as the window passes them, the table keeping its positions
// (null entries), allocation continuing at the end; cached pages stay findable by a later prompt.
TEST(PageManager, ReleasesPagesBeforeTheWindow) {
  PageManager bm(opts(8));
  const std::vector<int32_t> tokens = iota_tokens(80);
  ASSERT_TRUE(bm.allocate(1, 64));  // 4 pages
  bm.cache_full_pages(1, tokens, 64);
  const std::vector<int32_t> before(bm.page_table(1).begin(), bm.page_table(1).end());
  EXPECT_EQ(bm.release_before(1, 2), 2);
  EXPECT_EQ(bm.release_before(1, 2), 0);  // already released
  EXPECT_EQ(std::vector<int32_t>(bm.page_table(1).begin(), bm.page_table(1).end()),
            (std::vector<int32_t>{0, 0, before[2], before[3]}));
  EXPECT_EQ(bm.num_used_pages(), 2);
  bm.check_invariants();
  ASSERT_TRUE(bm.allocate(1, 80));  // grows at the end, positions kept
  EXPECT_EQ(bm.page_table(1).size(), 5u);
  EXPECT_EQ(bm.pages_needed(1, 96), 1);
  bm.check_invariants();
  // The released pages were cached: another sequence with the same prompt still finds the whole prefix.
  EXPECT_EQ(bm.lookup_prefix(std::span<const int32_t>(tokens).first(65)).size(), 4u);
  bm.free(1);
  EXPECT_EQ(bm.num_used_pages(), 0);
  bm.check_invariants();
}

// Speculative decoding's rollback: pages past those holding the accepted tokens go back to the pool; hashed
// (cached) pages and a contiguous reservation stay.
TEST(PageManager, TruncateReleasesTrailingPagesOnly) {
  PageManager bm(opts(8));
  const std::vector<int32_t> tokens = iota_tokens(60);
  ASSERT_TRUE(bm.allocate(1, 60));     // 4 pages: 16 + 16 + 16 + 12 tokens
  bm.cache_full_pages(1, tokens, 33);  // 2 full pages hashed
  EXPECT_EQ(bm.truncate(1, 34), 1);    // 3 pages hold 34 tokens
  EXPECT_EQ(bm.page_table(1).size(), 3u);
  EXPECT_EQ(bm.truncate(1, 3), 1);  // never below the hashed pages
  EXPECT_EQ(bm.page_table(1).size(), 2u);
  EXPECT_EQ(bm.num_used_pages(), 2);
  EXPECT_EQ(bm.truncate(2, 5), 0);  // unknown sequence
  bm.check_invariants();
  ASSERT_TRUE(bm.allocate(1, 40));  // grows again
  EXPECT_EQ(bm.page_table(1).size(), 3u);
  bm.free(1);
  bm.check_invariants();
  EXPECT_EQ(bm.num_used_pages(), 0);

  PageManagerOptions o = opts(8);
  o.reserve_pages_per_seq = 4;
  PageManager contiguous(o);
  ASSERT_TRUE(contiguous.allocate(1, 5));
  EXPECT_EQ(contiguous.truncate(1, 5), 0);
  EXPECT_EQ(contiguous.page_table(1).size(), 4u);
}

TEST(PageManager, ContiguousLayoutReservesTheWholeContext) {
  PageManagerOptions o = opts(8);
  o.reserve_pages_per_seq = 4;
  PageManager bm(o);
  ASSERT_TRUE(bm.allocate(1, 1));
  EXPECT_EQ(bm.page_table(1).size(), 4u);
  ASSERT_TRUE(bm.allocate(2, 1));
  EXPECT_FALSE(bm.allocate(3, 1));
  bm.check_invariants();
}

TEST(PageManager, PrefixHitSharesPagesAndStopsOneTokenShort) {
  PageManager bm(opts(16));
  const std::vector<int32_t> a = iota_tokens(40);
  EXPECT_TRUE(bm.lookup_prefix(a).empty());
  ASSERT_TRUE(bm.allocate(1, 40));
  bm.cache_full_pages(1, a, 40);  // pages 0 and 1 are full; page 2 holds 8 tokens
  EXPECT_EQ(bm.num_cached_pages(), 2);

  std::vector<int32_t> b = iota_tokens(48);  // same first 40 tokens, then more
  const std::vector<int32_t> hit = bm.lookup_prefix(b);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], bm.page_table(1)[0]);
  EXPECT_EQ(hit[1], bm.page_table(1)[1]);
  ASSERT_TRUE(bm.allocate(2, 48, hit));
  EXPECT_EQ(bm.ref_count(hit[0]), 2);
  EXPECT_EQ(bm.page_table(2).size(), 3u);
  EXPECT_EQ(bm.num_used_pages(), 4);  // 3 of seq 1 + 1 fresh for seq 2

  // A prompt of exactly two full pages only hits one: its last token must be computed for logits.
  EXPECT_EQ(bm.lookup_prefix(iota_tokens(32)).size(), 1u);
  EXPECT_EQ(bm.lookup_prefix(iota_tokens(33)).size(), 2u);
  // A different second page stops the hit after the first.
  std::vector<int32_t> c = iota_tokens(40);
  c[20] = 999;
  EXPECT_EQ(bm.lookup_prefix(c).size(), 1u);
  // The same second page after a different first page is not a hit (chained).
  std::vector<int32_t> d = iota_tokens(40);
  d[0] = 999;
  EXPECT_TRUE(bm.lookup_prefix(d).empty());

  bm.free(1);
  bm.free(2);
  EXPECT_EQ(bm.num_used_pages(), 0);
  EXPECT_EQ(bm.num_free_pages(), 16);
  // Freed but still cached: a later request hits.
  EXPECT_EQ(bm.lookup_prefix(b).size(), 2u);
  bm.check_invariants();
}

TEST(PageManager, RecomputedDuplicatePagesAreMerged) {
  PageManager bm(opts(16));
  const std::vector<int32_t> t = iota_tokens(33);
  ASSERT_TRUE(bm.allocate(1, 33));
  ASSERT_TRUE(bm.allocate(2, 33));  // both prefill the same prompt at once: no hit for either
  bm.cache_full_pages(1, t, 33);
  bm.cache_full_pages(2, t, 33);
  EXPECT_EQ(bm.page_table(1)[0], bm.page_table(2)[0]);
  EXPECT_EQ(bm.page_table(1)[1], bm.page_table(2)[1]);
  EXPECT_NE(bm.page_table(1)[2], bm.page_table(2)[2]);
  EXPECT_EQ(bm.num_used_pages(), 4);
  bm.check_invariants();
}

TEST(PageManager, EvictsLeastRecentlyUsedDeepPagesFirst) {
  PageManager bm(opts(6));
  const std::vector<int32_t> a = iota_tokens(49, 0);
  const std::vector<int32_t> b = iota_tokens(49, 1000);
  ASSERT_TRUE(bm.allocate(1, 48));
  ASSERT_TRUE(bm.allocate(2, 48));
  bm.cache_full_pages(1, a, 48);
  bm.cache_full_pages(2, b, 48);
  bm.free(1);  // a released first: least recently used
  bm.free(2);
  EXPECT_EQ(bm.lookup_prefix(a).size(), 3u);
  ASSERT_TRUE(bm.allocate(3, 1));  // evicts a's last page
  EXPECT_EQ(bm.prefix_stats().evictions, 1);
  EXPECT_EQ(bm.lookup_prefix(a).size(), 2u);
  EXPECT_EQ(bm.lookup_prefix(b).size(), 3u);
  ASSERT_TRUE(bm.allocate(3, 3 * 16));  // two more: the rest of a
  EXPECT_TRUE(bm.lookup_prefix(a).empty());
  EXPECT_EQ(bm.lookup_prefix(b).size(), 3u);
  // A hit revives b's pages out of the free queue: they are not evicted while referenced.
  const auto hit = bm.lookup_prefix(b);
  ASSERT_TRUE(bm.allocate(4, 48, hit));
  EXPECT_EQ(bm.num_free_pages(), 0);
  EXPECT_FALSE(bm.allocate(5, 1));
  bm.check_invariants();
  bm.free(3);
  bm.free(4);
  EXPECT_EQ(bm.num_used_pages(), 0);
  bm.check_invariants();
}

TEST(PageManager, FullCollisionsNeverHitWrongTokens) {
  PageManagerOptions o = opts(32);
  o.hash_mask = 0;  // every page has the same key
  PageManager bm(o);
  const std::vector<int32_t> a = iota_tokens(40);
  ASSERT_TRUE(bm.allocate(1, 40));
  bm.cache_full_pages(1, a, 40);
  EXPECT_EQ(bm.num_cached_pages(), 1);  // page 1 collides with page 0: not registered
  std::vector<int32_t> b = a;
  b[3] = 77;
  EXPECT_TRUE(bm.lookup_prefix(b).empty());
  EXPECT_EQ(bm.lookup_prefix(a).size(), 1u);
  // A page with the same tokens as a's first page but at depth 1 must not match it either.
  std::vector<int32_t> c = iota_tokens(16, 500);
  c.insert(c.end(), a.begin(), a.begin() + 17);
  EXPECT_TRUE(bm.lookup_prefix(c).empty());
  bm.check_invariants();
}

// Random prompts over a tiny alphabet (so prefixes are shared) with a 3-bit key: hits must always hold
// exactly the query's tokens, and the books must balance after every operation.
TEST(PageManager, RandomOpsWithCollisionsKeepInvariants) {
  for (uint64_t mask : {uint64_t{7}, ~uint64_t{0}}) {
    PageManagerOptions o = opts(24, 8);
    o.hash_mask = mask;
    PageManager bm(o);
    std::mt19937 rng(42);
    std::map<int32_t, std::vector<int32_t>> content;  // page -> the full prefix it ends, when cached
    std::map<RequestId, std::vector<int32_t>> live;
    RequestId next = 1;
    int64_t hits = 0;
    for (int op = 0; op < 3000; ++op) {
      if (live.size() < 4 && rng() % 2 == 0) {
        std::vector<int32_t> t(static_cast<size_t>(1 + rng() % 40));
        for (auto& x : t) x = static_cast<int32_t>(rng() % 2);
        const auto hit = bm.lookup_prefix(t);
        for (size_t j = 0; j < hit.size(); ++j) {
          const std::vector<int32_t> want(t.begin(), t.begin() + static_cast<int64_t>((j + 1) * 8));
          ASSERT_EQ(content.at(hit[j]), want) << "page " << hit[j] << " at depth " << j;
        }
        hits += static_cast<int64_t>(hit.size());
        if (!bm.allocate(next, static_cast<int64_t>(t.size()), hit)) continue;
        bm.cache_full_pages(next, t, static_cast<int64_t>(t.size()));
        const auto table = bm.page_table(next);
        for (size_t j = 0; j < t.size() / 8; ++j)
          content[table[j]] = std::vector<int32_t>(t.begin(), t.begin() + static_cast<int64_t>((j + 1) * 8));
        live[next++] = t;
      } else if (!live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<int64_t>(rng() % live.size()));
        bm.free(it->first);
        live.erase(it);
      }
      bm.check_invariants();
    }
    for (auto& [id, t] : live) bm.free(id);
    EXPECT_EQ(bm.num_used_pages(), 0);
    EXPECT_GT(hits, 0);
    bm.check_invariants();
  }
}

TEST(KvBudget, RefusesWithTheNumbersAndTheKnobs) {
  KvPoolRequest r;
  r.shape.num_layers = 2;
  r.shape.kv_heads = 2;
  r.shape.head_dim = 8;
  r.shape.page = PageGeometry::of(16);  // 4 KiB a page
  r.max_model_len = 256;                // 16 pages
  r.budget_source = "kv_cache_memory";
  r.budget_bytes = 10 * 4096;
  try {
    plan_kv_pool(r);
    FAIL() << "expected a refusal";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("max_model_len=256"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kv_cache_memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at most 160"), std::string::npos) << msg;
    EXPECT_NE(msg.find("quantization"), std::string::npos) << msg;
  }
  r.budget_bytes = 17 * 4096;
  KvPoolPlan p = plan_kv_pool(r);
  EXPECT_EQ(p.num_pages, 17);  // 16 usable + null
  EXPECT_LE(p.bytes, r.budget_bytes);
  r.budget_bytes = 1000 * 4096;
  r.max_useful_pages = 64;
  EXPECT_EQ(plan_kv_pool(r).num_pages, 65);
}

// plan_kv_pool's refusal of r ("" when it plans a pool).
std::string refusal(const KvPoolRequest& r) {
  try {
    plan_kv_pool(r);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(KvBudget, PagesShrinkWithTheKvTypeAndRefusalsSuggestQuantizedKv) {
  KvPoolRequest r;
  r.shape.num_layers = 2;
  r.shape.kv_heads = 2;
  r.shape.head_dim = 8;
  r.shape.page = PageGeometry::of(16);
  r.max_model_len = 256;  // 16 pages
  r.budget_source = "kv_cache_memory";
  r.budget_bytes = 10 * 4096;
  EXPECT_EQ(r.shape.bytes_per_page(), 4096);
  std::string msg = refusal(r);
  EXPECT_NE(msg.find("--kv-cache-dtype int8"), std::string::npos) << msg;  // head_dim 8: no blocks of 32
  EXPECT_NE(msg.find("x f32)"), std::string::npos) << msg;
  r.shape.dtype = KvCacheDtype::kBf16;
  EXPECT_EQ(r.shape.bytes_per_page(), 2048);
  r.budget_bytes = 17 * 2048;
  EXPECT_EQ(plan_kv_pool(r).num_pages, 17);
  r.budget_bytes = 10 * 2048;
  msg = refusal(r);
  EXPECT_NE(msg.find("x bf16)"), std::string::npos) << msg;
  // 8-bit codes and a 4-byte scale per token and head: 8 + 4 bytes a head for head_dim 8.
  r.shape.dtype = KvCacheDtype::kInt8;
  EXPECT_EQ(r.shape.bytes_per_page(), 2 * 2 * 16 * 2 * 12);
  msg = refusal(r);
  EXPECT_EQ(msg.find("--kv-cache-dtype"), std::string::npos) << msg;  // already quantized: not offered again
  // llama.cpp's blocks: 34 and 18 bytes per 32 values.
  r.shape.head_dim = 64;
  r.shape.dtype = KvCacheDtype::kQ8_0;
  EXPECT_EQ(r.shape.bytes_per_page(), 2 * 2 * 16 * 2 * 68);
  r.shape.dtype = KvCacheDtype::kQ4_0;
  EXPECT_EQ(r.shape.bytes_per_page(), 2 * 2 * 16 * 2 * 36);
}

TEST(KvCache, Bf16PoolViewsHalfTheBytes) {
  KvCacheShape shape;
  shape.num_layers = 3;
  shape.kv_heads = 2;
  shape.head_dim = 8;
  shape.page = PageGeometry::of(16);
  shape.num_pages = 4;
  shape.dtype = KvCacheDtype::kBf16;
  KvCache cache(shape);
  ASSERT_EQ(cache.layers().size(), 3u);
  const int64_t layer_bytes = 4 * 16 * 2 * 8 * 2;
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(cache.layers()[l].dtype, KvCacheDtype::kBf16);
    EXPECT_EQ(cache.layers()[l].k_scale, nullptr);
    EXPECT_EQ(static_cast<char*>(cache.layers()[l].v) - static_cast<char*>(cache.layers()[l].k), layer_bytes);
  }
  EXPECT_EQ(static_cast<char*>(cache.layers()[1].k) - static_cast<char*>(cache.layers()[0].k), 2 * layer_bytes);
  shape.dtype = KvCacheDtype::kAuto;  // never a pool's type
  EXPECT_THROW(KvCache bad(shape), std::exception);
  shape.dtype = KvCacheDtype::kQ4_0;  // head_dim 8: no block of 32
  EXPECT_THROW(KvCache bad(shape), std::exception);
}

// A quantized pool: codes, then their scales, per layer, each region on a 64-byte boundary.
TEST(KvCache, QuantizedPoolsHoldCodesAndScales) {
  KvCacheShape shape{.num_layers = 2, .kv_heads = 2, .head_dim = 64, .page = PageGeometry::of(16), .num_pages = 4};
  for (KvCacheDtype d : {KvCacheDtype::kInt8, KvCacheDtype::kQ8_0, KvCacheDtype::kQ4_0}) {
    shape.dtype = d;
    KvCache cache(shape);
    const auto& l0 = cache.layers()[0];
    const int64_t codes = 4 * 16 * 2 * 64 * kv_code_bits(d) / 8;
    const int64_t scales = 4 * 16 * 2 * kv_scale_groups(d, 64) * kv_scale_bytes(d);
    EXPECT_EQ(static_cast<char*>(l0.v) - static_cast<char*>(l0.k), codes);
    EXPECT_EQ(static_cast<char*>(l0.k_scale) - static_cast<char*>(l0.k), 2 * codes);
    EXPECT_EQ(static_cast<char*>(l0.v_scale) - static_cast<char*>(l0.k_scale), scales);
    EXPECT_EQ(static_cast<char*>(cache.layers()[1].k) - static_cast<char*>(l0.k), 2 * (codes + scales));
  }
}

}  // namespace
}  // namespace minfer
