// The KV tiers' stores on their own: the disk tier's files (round trip, torn, truncated and corrupt files removed and
// never used, another model's folder never read, the size bound, orphaned temporary files, a read-only folder), the
// RAM tier's bound, and KvTiers moving real pool pages out and back (bit-exact) for every KV type's layout.
#include "kv/kv_tiers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "kv/content_key.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"
#include "kv/ram_tier.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("minfer_kv_tiers_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::vector<int32_t> page_tokens(int32_t first, int n = 16) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

std::vector<unsigned char> payload(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> p(n);
  for (auto& b : p) b = static_cast<unsigned char>(rng());
  return p;
}

const ContentKey kModelA{1, 2}, kModelB{3, 4};

TEST(DiskTier, RoundTripAcrossInstances) {
  const fs::path dir = fresh_dir("round_trip");
  const std::vector<int32_t> tokens = page_tokens(100);
  const ContentKey key = chain_content_key(root_content_key(0), tokens);
  const std::vector<unsigned char> data = payload(5000, 1);
  {
    DiskTier disk(dir, 1 << 20, kModelA);
    ASSERT_TRUE(disk.enabled());
    EXPECT_TRUE(disk.write(key, tokens, data));
    EXPECT_FALSE(disk.write(key, tokens, data)) << "present: not written twice";
  }
  DiskTier again(dir, 1 << 20, kModelA);
  ASSERT_TRUE(again.contains(key));
  std::vector<unsigned char> back;
  ASSERT_EQ(again.read(key, tokens, 5000, back), TierRead::kOk);
  EXPECT_EQ(back, data);
  // The same key asked with other tokens is not a hit (and the entry stays).
  EXPECT_EQ(again.read(key, page_tokens(7), 5000, back), TierRead::kMissing);
  EXPECT_TRUE(again.contains(key));
  fs::remove_all(dir);
}

TEST(DiskTier, AnotherModelNeverReadsTheEntries) {
  const fs::path dir = fresh_dir("other_model");
  const std::vector<int32_t> tokens = page_tokens(5);
  const ContentKey key = chain_content_key(root_content_key(0), tokens);
  DiskTier({dir, 1 << 20, kModelA}).write(key, tokens, payload(100, 2));
  DiskTier other(dir, 1 << 20, kModelB);
  EXPECT_FALSE(other.contains(key));
  std::vector<unsigned char> back;
  EXPECT_EQ(other.read(key, tokens, 100, back), TierRead::kMissing);
  EXPECT_EQ(other.stats().entries, 0);
  EXPECT_GT(other.stats().bytes, 0) << "the folder's size bound counts the other model's entries";
  // A file of model A copied into B's folder under the same name is refused by its header's identity.
  fs::copy_file(dir / kModelA.hex() / (key.hex() + ".kv"), other.folder() / (key.hex() + ".kv"));
  DiskTier planted(dir, 1 << 20, kModelB);
  ASSERT_TRUE(planted.contains(key));
  EXPECT_EQ(planted.read(key, tokens, 100, back), TierRead::kCorrupt);
  EXPECT_FALSE(fs::exists(other.folder() / (key.hex() + ".kv")));
  fs::remove_all(dir);
}

// Every way a file can be damaged is caught: removed, counted, never used.
TEST(DiskTier, TornTruncatedAndCorruptFilesAreRemoved) {
  const fs::path dir = fresh_dir("corrupt");
  const size_t bytes = 4096;
  std::vector<std::pair<std::vector<int32_t>, ContentKey>> pages;
  {
    DiskTier disk(dir, 1 << 20, kModelA);
    for (int i = 0; i < 5; ++i) {
      const std::vector<int32_t> t = page_tokens(10 * i);
      pages.emplace_back(t, chain_content_key(root_content_key(0), t));
      ASSERT_TRUE(disk.write(pages.back().second, t, payload(bytes, static_cast<uint32_t>(i))));
    }
  }
  const fs::path folder = dir / kModelA.hex();
  auto file = [&](int i) { return folder / (pages[static_cast<size_t>(i)].second.hex() + ".kv"); };
  auto flip = [](const fs::path& p, std::streamoff at) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    const char c = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(at);
    f.put(c);
  };
  fs::resize_file(file(0), fs::file_size(file(0)) / 2);                     // torn: half written
  fs::resize_file(file(1), fs::file_size(file(1)) + 7);                     // trailing garbage
  flip(file(2), static_cast<std::streamoff>(fs::file_size(file(2)) - 10));  // payload bit rot
  flip(file(3), 20);                                                        // header field
  flip(file(4), 100);                                                       // a stored token id
  DiskTier disk(dir, 1 << 20, kModelA);
  std::vector<unsigned char> back;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(disk.read(pages[static_cast<size_t>(i)].second, pages[static_cast<size_t>(i)].first, bytes, back),
              TierRead::kCorrupt)
        << "file " << i;
    EXPECT_FALSE(fs::exists(file(i))) << "file " << i;
    EXPECT_FALSE(disk.contains(pages[static_cast<size_t>(i)].second));
  }
  EXPECT_EQ(disk.stats().corrupt_removed, 5);
  EXPECT_EQ(disk.stats().entries, 0);
  fs::remove_all(dir);
}

TEST(DiskTier, SizeBoundEvictsLeastRecentlyUsed) {
  const fs::path dir = fresh_dir("lru");
  const size_t bytes = 10000;
  DiskTier disk(dir, 35000, kModelA);  // three entries fit
  std::vector<std::pair<std::vector<int32_t>, ContentKey>> pages;
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> t = page_tokens(100 * i);
    pages.emplace_back(t, chain_content_key(root_content_key(0), t));
  }
  std::vector<unsigned char> back;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(
        disk.write(pages[static_cast<size_t>(i)].second, pages[static_cast<size_t>(i)].first, payload(bytes, 1)));
  ASSERT_EQ(disk.read(pages[0].second, pages[0].first, bytes, back), TierRead::kOk);  // 0 becomes the newest
  ASSERT_TRUE(disk.write(pages[3].second, pages[3].first, payload(bytes, 1)));
  EXPECT_TRUE(disk.contains(pages[0].second));
  EXPECT_FALSE(disk.contains(pages[1].second)) << "the least recently used goes first";
  EXPECT_TRUE(disk.contains(pages[2].second));
  EXPECT_TRUE(disk.contains(pages[3].second));
  EXPECT_LE(disk.stats().bytes, 35000);
  EXPECT_EQ(disk.stats().evictions, 1);
  // A restart with a smaller bound trims the folder, oldest first.
  DiskTier smaller(dir, 15000, kModelA);
  EXPECT_EQ(smaller.stats().entries, 1);
  EXPECT_LE(smaller.stats().bytes, 15000);
  fs::remove_all(dir);
}

TEST(DiskTier, OrphanedTemporaryFilesAreRemovedAtStart) {
  const fs::path dir = fresh_dir("orphans");
  fs::create_directories(dir / kModelA.hex());
  const fs::path dead = dir / kModelA.hex() / ".0123456789abcdef0123456789abcdef.999999999.0.tmp";
  std::ofstream(dead) << "half a page";
  DiskTier disk(dir, 1 << 20, kModelA);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_EQ(disk.stats().entries, 0);
  fs::remove_all(dir);
}

TEST(DiskTier, UnwritableFolderTurnsTheTierOff) {
  if (::geteuid() == 0) {
    // root writes anywhere: a path under a regular file stands in for a folder that cannot be made.
    const fs::path file = fresh_dir("not_a_folder");
    std::ofstream(file) << "x";
    DiskTier disk(file / "kv", 1 << 20, kModelA);
    EXPECT_FALSE(disk.enabled());
    EXPECT_FALSE(disk.write(ContentKey{1, 1}, page_tokens(0), payload(10, 1)));
    fs::remove(file);
    return;
  }
  const fs::path dir = fresh_dir("read_only");
  fs::create_directories(dir / kModelA.hex());
  fs::permissions(dir / kModelA.hex(), fs::perms::owner_read | fs::perms::owner_exec);
  DiskTier disk(dir, 1 << 20, kModelA);
  EXPECT_FALSE(disk.enabled());
  fs::permissions(dir / kModelA.hex(), fs::perms::owner_all);
  fs::remove_all(dir);
}

TEST(RamTier, BoundedLeastRecentlyUsed) {
  RamTier ram(3 * (1000 + 64 + static_cast<int64_t>(sizeof(TierPage))));
  std::vector<TierPagePtr> pages;
  for (int i = 0; i < 4; ++i) {
    auto p = std::make_shared<TierPage>();
    p->tokens = page_tokens(i * 16);
    p->key = chain_content_key(root_content_key(0), p->tokens);
    p->payload = payload(1000, static_cast<uint32_t>(i));
    pages.push_back(p);
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ram.put(pages[static_cast<size_t>(i)]).empty());
  EXPECT_NE(ram.get(pages[0]->key, pages[0]->tokens), nullptr);  // 0 becomes the newest
  EXPECT_EQ(ram.get(pages[1]->key, page_tokens(999)), nullptr) << "other tokens under the key: no hit";
  const std::vector<TierPagePtr> out = ram.put(pages[3]);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->key, pages[1]->key);
  EXPECT_TRUE(ram.contains(pages[0]->key));
  EXPECT_EQ(ram.stats().entries, 3);
  EXPECT_EQ(ram.stats().evictions, 1);
}

KvTierOptions tier_options(const fs::path& dir, int64_t ram_bytes) {
  KvTierOptions o;
  o.ram_bytes = ram_bytes;
  o.dir = dir.string();
  o.dir_bytes = 1 << 24;
  o.identity = kModelA;
  o.page_size = 16;
  return o;
}

// Loads the tiers' page `key` into `page` of `pool` (as sequence `seq`): its bytes, or empty when the load failed.
std::vector<unsigned char> load(KvTiers& tiers, KvCache& pool, RequestId seq, int32_t page, const ContentKey& key,
                                const std::vector<int32_t>& tokens) {
  tiers.start_load(seq, {TierLoad{0, page, key, tokens}});
  if (!tiers.wait(seq)) return {};
  std::vector<unsigned char> back(static_cast<size_t>(pool.page_payload_bytes()));
  pool.copy_page_out(page, back.data());
  return back;
}

// A pool page copied out (eviction into the RAM tier, write-through to disk) and loaded into another page comes back
// bit-exact, for the layouts of every KV type (codes and scales).
TEST(KvTiers, PagesComeBackBitExact) {
  for (KvCacheDtype dtype : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kInt8, KvCacheDtype::kQ4_0}) {
    SCOPED_TRACE(kv_cache_dtype_name(dtype));
    KvCacheShape shape;
    shape.num_layers = 3;
    shape.kv_heads = 2;
    shape.head_dim = 64;
    shape.page = PageGeometry::of(16);
    shape.num_pages = 6;
    shape.dtype = dtype;
    KvCache pool(shape);
    std::vector<unsigned char> page3 = payload(static_cast<size_t>(pool.page_payload_bytes()), 3);
    pool.copy_page_in(3, page3.data());
    const fs::path dir = fresh_dir("pool");
    const std::vector<int32_t> tokens = page_tokens(40);
    const ContentKey key = chain_content_key(root_content_key(0), tokens);
    {
      KvTiers tiers(tier_options(dir, 1 << 20), {&pool});
      tiers.on_registered(0, 3, key, tokens);  // written through
      tiers.on_evicted(0, 3, key, tokens);     // and kept in RAM
      EXPECT_EQ(tiers.probe(0, tokens, 0, 1), 1);
      EXPECT_EQ(load(tiers, pool, 7, 5, key, tokens), page3);
      EXPECT_EQ(tiers.stats().ram.hit_tokens, 16);
    }  // destruction writes what is queued
    KvCache fresh(shape);
    KvTiers restarted(tier_options(dir, 0), {&fresh});
    ASSERT_EQ(restarted.probe(0, tokens, 0, 1), 1);
    EXPECT_EQ(load(restarted, fresh, 1, 2, key, tokens), page3);
    EXPECT_EQ(restarted.stats().disk.hit_tokens, 16);
    // A page the tiers do not hold fails the load (the sequence recomputes it).
    EXPECT_TRUE(load(restarted, fresh, 2, 2, ContentKey{9, 9}, tokens).empty());
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace minfer
