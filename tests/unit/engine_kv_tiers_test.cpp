// The engine with KV tiers behind its prefix cache: a prompt served from pages of the RAM tier (after the pool evicted
// them) or of the disk tier (after a restart) gives exactly the greedy tokens of an engine without tiers, reports them
// as cached, and never reads pages of another model or KV type, nor a corrupt file. With many requests at once,
// preemption and tier loads in flight, batched output still equals each request alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_access.h"
#include "engine_test_support.h"
#include "minfer/engine.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using testing::greedy;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("minfer_engine_tiers_" + name + "_" + std::to_string(::getpid()));
  return dir;
}

// A fresh folder, removed after the engines declared after it are gone (their destructors write to it).
struct ScopedDir {
  fs::path path;
  explicit ScopedDir(const std::string& name) : path(fresh_dir(name)) {}
  ~ScopedDir() { fs::remove_all(path); }
};

std::vector<int32_t> random_prompt(size_t n, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(1 + rng() % static_cast<uint32_t>(vocab - 1));
  return p;
}

// Recurrent-layer models keep a state snapshot every 2 pages (32 tokens), in the state pool and the tiers.
EngineConfig tier_config(const std::string& model, const fs::path& dir, int64_t ram = 0) {
  EngineConfig c = testing::small_engine_config(model, 1, 256);
  c.state_snapshot_pages = 2;
  c.kv_cache_dtype = KvCacheDtype::kBf16;
  if (!dir.empty()) c.kv_cache_dir = dir.string();
  c.kv_offload_ram = ram;
  return c;
}

CompletionOutput run_one(Engine& engine, const std::vector<int32_t>& prompt, int32_t n = 12) {
  return engine.generate(std::vector<std::vector<int32_t>>{prompt}, greedy(n))[0];
}

// Bytes of one page of the engine's pool (its budget over its pages, the null page included).
int64_t page_bytes(const Engine& engine) {
  const EngineStats s = engine.stats();
  return s.kv_pool_bytes / (s.pages_total + 1);
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".kv") out.push_back(e.path());
  return out;
}

class EngineKvTiers : public ::testing::TestWithParam<std::string> {};

// Restart on the same folder: the prefix comes from disk, the tokens equal an engine's without tiers.
TEST_P(EngineKvTiers, RestartServesThePrefixFromDisk) {
  const std::string model = testing::tiny_model_dir(GetParam());
  const ScopedDir scoped("restart_" + GetParam());
  const fs::path& dir = scoped.path;
  const std::vector<int32_t> prompt = random_prompt(150, 3, 200);
  std::vector<int32_t> plain;
  {
    EngineConfig c = tier_config(model, {});
    Engine engine(c);
    plain = run_one(engine, prompt).token_ids;
  }
  {
    Engine first(tier_config(model, dir));
    EXPECT_EQ(run_one(first, prompt).token_ids, plain);
  }  // a clean shutdown writes what is queued
  ASSERT_GE(entries(dir).size(), 9u) << "150 prompt tokens hold 9 full pages of 16";
  Engine second(tier_config(model, dir));
  const CompletionOutput o = run_one(second, prompt);
  EXPECT_EQ(o.token_ids, plain);
  // 9 pages from disk; with recurrent layers, up to the last state snapshot on disk (after 128 tokens).
  const int64_t hit = GetParam() == "tiny-qwen3.5" ? 128 : 144;
  EXPECT_EQ(o.cached_tokens, hit);
  const EngineStats s = second.stats();
  EXPECT_EQ(s.disk_tier.hit_tokens, hit);
  EXPECT_EQ(s.prefix_hit_tokens, 0) << "the pool itself had nothing";
  EXPECT_GT(s.disk_tier.read_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, EngineKvTiers, ::testing::Values("tiny-llama", "tiny-gemma3", "tiny-qwen3.5"));

TEST(EngineKvTiersRam, EvictedPagesComeBackFromRam) {
  const std::string model = testing::tiny_model_dir("tiny-llama");
  EngineConfig c = tier_config(model, {}, int64_t{64} << 20);
  c.kv_cache_memory = 0;
  Engine probe(c);
  c.kv_cache_memory = page_bytes(probe) * 24;  // 23 pages: one 256-token sequence and a little more
  Engine engine(c);
  const std::vector<int32_t> a = random_prompt(150, 1, 200);
  const std::vector<int32_t> plain = run_one(engine, a).token_ids;
  for (uint32_t seed = 10; seed < 14; ++seed) run_one(engine, random_prompt(150, seed, 200));  // evict a's pages
  const CompletionOutput again = run_one(engine, a);
  EXPECT_EQ(again.token_ids, plain);
  const EngineStats s = engine.stats();
  EXPECT_GT(s.ram_tier.hit_tokens, 0);
  EXPECT_GT(s.ram_tier.entries, 0);
  EXPECT_EQ(again.cached_tokens, 144);
}

// Other weights, or another KV type, on the same folder: no hit, and the first model's entries stay.
TEST(EngineKvTiersIdentity, AnotherModelOrKvTypeGetsNoHits) {
  const ScopedDir scoped("identity");
  const fs::path& dir = scoped.path;
  const std::vector<int32_t> prompt = random_prompt(100, 5, 200);
  {
    Engine first(tier_config(testing::tiny_model_dir("tiny-llama"), dir));
    run_one(first, prompt);
  }
  const size_t written = entries(dir).size();
  ASSERT_GT(written, 0u);
  {
    Engine other_weights(tier_config(testing::tiny_model_dir("tiny-llama", 8), dir));
    EXPECT_EQ(run_one(other_weights, prompt).cached_tokens, 0);
    EXPECT_EQ(other_weights.stats().disk_tier.hit_tokens, 0);
  }
  {
    EngineConfig c = tier_config(testing::tiny_model_dir("tiny-llama"), dir);
    c.kv_cache_dtype = KvCacheDtype::kF32;
    Engine other_dtype(c);
    EXPECT_EQ(run_one(other_dtype, prompt).cached_tokens, 0);
  }
  int folders = 0;
  for (const auto& e : fs::directory_iterator(dir)) folders += e.is_directory() ? 1 : 0;
  EXPECT_EQ(folders, 3) << "a folder per identity";
  Engine same(tier_config(testing::tiny_model_dir("tiny-llama"), dir));
  EXPECT_EQ(run_one(same, prompt).cached_tokens, 96);
}

// A corrupt entry in the middle of the prefix: the load stops there, the sequence recomputes, the output is unchanged.
TEST(EngineKvTiersIntegrity, CorruptEntryIsRecomputedNotUsed) {
  const std::string model = testing::tiny_model_dir("tiny-llama");
  const ScopedDir scoped("corrupt");
  const fs::path& dir = scoped.path;
  const std::vector<int32_t> prompt = random_prompt(150, 9, 200);
  std::vector<int32_t> plain;
  {
    Engine first(tier_config(model, dir));
    plain = run_one(first, prompt).token_ids;
  }
  std::vector<fs::path> files = entries(dir);
  ASSERT_GE(files.size(), 9u);
  for (size_t i = 0; i < files.size(); i += 3) {  // a third of the pages: payload bytes flipped
    std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  Engine second(tier_config(model, dir));
  const CompletionOutput o = run_one(second, prompt);
  EXPECT_EQ(o.token_ids, plain);
  const EngineStats s = second.stats();
  EXPECT_GE(s.disk_tier.corrupt_removed, 1);
  EXPECT_TRUE(s.disk_tier.enabled);
  // The load stops at the first corrupt page of the prefix (removed); the rest were not read.
  EXPECT_LT(o.cached_tokens, 144);
}

// Many requests sharing prefixes, a pool small enough to preempt, RAM and disk tiers on: each request's tokens equal
// its tokens alone, and no page leaks.
class EngineKvTiersBatching : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineKvTiersBatching, ConcurrentWithLoadsEqualsAlone) {
  const std::string model = testing::tiny_model_dir(GetParam());
  const ScopedDir scoped("batched_" + GetParam());
  const fs::path& dir = scoped.path;
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> shared = random_prompt(70, 21, 200);
  for (uint32_t i = 0; i < 10; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    const std::vector<int32_t> tail = random_prompt(20 + 9 * i, 30 + i, 200);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> alone;
  {
    Engine engine(tier_config(model, {}));
    for (const auto& p : prompts) alone.push_back(run_one(engine, p, 10).token_ids);
  }
  EngineConfig c = tier_config(model, dir, int64_t{16} << 20);
  Engine probe(c);
  // Preemption from a pool of 25 pages; a recurrent model's state slots and snapshots come from the same budget, so
  // it keeps the default (a 26-page budget would leave it no snapshot to hit).
  if (!EngineAccess::core(probe).model_config().has_recurrent_layers()) c.kv_cache_memory = page_bytes(probe) * 26;
  for (int round = 0; round < 2; ++round) {  // the second round finds the first's pages in the tiers
    Engine engine(c);
    const std::vector<CompletionOutput> outs = engine.generate(prompts, greedy(10));
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(outs[i].token_ids, alone[i]) << "round " << round << " request " << i;
    EXPECT_EQ(engine.stats().pages_used, 0);
    EngineAccess::core(engine).page_manager().check_invariants();
    if (round == 1) {
      EXPECT_GT(engine.stats().disk_tier.hit_tokens + engine.stats().ram_tier.hit_tokens, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, EngineKvTiersBatching, ::testing::Values("tiny-llama", "tiny-qwen3.5"));

TEST(EngineKvTiersConfig, RefusedWhereTheyCannotWork) {
  EngineConfig c = tier_config(testing::tiny_model_dir("tiny-llama"), fresh_dir("refused"));
  c.enable_prefix_caching = false;
  EXPECT_THROW(Engine{c}, Error);
  c = tier_config(testing::tiny_model_dir("tiny-llama"), {});
  c.kv_offload_ram = -1;
  EXPECT_THROW(Engine{c}, Error);
  c = tier_config(testing::tiny_model_dir("tiny-llama"), fresh_dir("refused"));
  c.kv_cache_dir_size = 1000;
  EXPECT_THROW(Engine{c}, Error);
}

}  // namespace
}  // namespace minfer
