// Batching must not change results: N concurrent greedy requests of different lengths give exactly the
// tokens each gives alone (f32), with prefix caching on and off, with preemption forced by a tiny KV
// budget, with chunked prefill, in static mode and in the contiguous layout. On the real stories260K
// checkpoint and on tiny HF-layout Llama and Qwen2 models.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_access.h"
#include "engine_test_support.h"
#include "kv/state_pool.h"
#include "minfer/engine.h"
#include "model/test_model_writer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(MINFER_SHARED_DIR) + "/models/stories260K/stories260K.bin";

struct Request {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
};

// Prompts of different lengths; half share a 40-token prefix so the prefix cache has something to find.
std::vector<Request> make_requests(int n, int32_t vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = static_cast<int32_t>(1 + rng() % static_cast<uint32_t>(vocab - 1));
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    if (i % 2 == 0) r.prompt = shared;
    const int extra = 1 + static_cast<int>(rng() % 50);
    for (int j = 0; j < extra; ++j)
      r.prompt.push_back(static_cast<int32_t>(1 + rng() % static_cast<uint32_t>(vocab - 1)));
    r.max_tokens = 4 + static_cast<int32_t>(rng() % 40);
    out.push_back(std::move(r));
  }
  return out;
}

using testing::greedy;

// Recurrent-layer models keep a state snapshot every 2 pages (32 tokens), so the shared 40-token prefix gives hits.
EngineConfig base_config(const std::string& model) {
  EngineConfig c = testing::small_engine_config(model, 1, 128);
  c.state_snapshot_pages = 2;
  return c;
}

// Each request alone in a fresh engine.
std::vector<std::vector<int32_t>> run_alone(const std::string& model, const std::vector<Request>& reqs,
                                            KvCacheDtype kv_dtype = KvCacheDtype::kF32) {
  EngineConfig c = base_config(model);
  c.enable_prefix_caching = false;
  c.kv_cache_dtype = kv_dtype;
  Engine engine(c);
  std::vector<std::vector<int32_t>> out;
  for (const Request& r : reqs) out.push_back(engine.generate({r.prompt}, greedy(r.max_tokens))[0].token_ids);
  return out;
}

// All requests at once; new ones arrive while others run (continuous admission mid-flight).
std::vector<std::vector<int32_t>> run_batched(const EngineConfig& c, const std::vector<Request>& reqs,
                                              EngineStats* stats_out) {
  Engine engine(c);
  std::vector<std::vector<int32_t>> out(reqs.size());
  std::vector<RequestId> ids;
  size_t next = 0;
  auto add = [&] {
    ids.push_back(engine.add_request(reqs[next].prompt, greedy(reqs[next].max_tokens)));
    ++next;
  };
  while (next < reqs.size() / 2) add();
  int steps = 0;
  while (engine.has_unfinished() || next < reqs.size()) {
    if (next < reqs.size() && steps % 3 == 0) add();
    for (const RequestOutput& o : engine.step()) {
      const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), o.id) - ids.begin());
      out[i].insert(out[i].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        EXPECT_EQ(o.finish_reason, FinishReason::kLength);
      }
    }
    EngineAccess::core(engine).page_manager().check_invariants();
    if (const PageManager* window = EngineAccess::core(engine).window_page_manager()) window->check_invariants();
    ++steps;
    EXPECT_LT(steps, 20000) << "no progress";
    if (steps >= 20000) break;
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.pages_used, 0) << "pages leaked";
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  if (stats_out) *stats_out = s;
  return out;
}

class BatchingTest : public ::testing::TestWithParam<std::string> {
 protected:
  static std::string model_path(const std::string& name) {
    return name == "stories260K" ? kStories : testing::tiny_model_dir(name);
  }
};

TEST_P(BatchingTest, ConcurrentGreedyEqualsAlone) {
  const std::string model = model_path(GetParam());
  int32_t vocab = 0;
  {
    Engine probe(base_config(model));
    vocab = static_cast<int32_t>(EngineAccess::core(probe).model_config().vocab_size);
  }
  const std::vector<Request> reqs = make_requests(16, std::min<int32_t>(vocab, 500), 11);
  const auto alone = run_alone(model, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) ASSERT_EQ(alone[i].size(), static_cast<size_t>(reqs[i].max_tokens));

  struct Variant {
    const char* name;
    EngineConfig config;
  };
  std::vector<Variant> variants;
  EngineConfig c = base_config(model);
  variants.push_back({"prefix caching on", c});
  c.enable_prefix_caching = false;
  variants.push_back({"prefix caching off", c});
  c = base_config(model);
  c.max_num_batched_tokens = 7;  // chunked prefill in pieces of 7 tokens
  variants.push_back({"chunked prefill", c});
  c = base_config(model);
  // Room for one max_model_len sequence and a little more: forces preemption and recompute.
  const int64_t page_bytes = 2 * 16 * 4 * [&] {
    Engine probe(base_config(model));
    const ModelConfig& m = EngineAccess::core(probe).model_config();
    return m.num_layers * m.num_kv_heads * m.head_dim;
  }();
  c.kv_cache_memory = page_bytes * (128 / 16 + 3);
  variants.push_back({"tiny KV budget (preemption)", c});
  c.enable_prefix_caching = false;
  variants.push_back({"tiny KV budget, no prefix caching", c});
  c = base_config(model);
  c.enable_continuous_batching = false;
  c.max_num_seqs = 4;
  variants.push_back({"static batching", c});
  c = base_config(model);
  c.kv_layout = KvLayout::kContiguous;
  variants.push_back({"contiguous layout", c});

  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    EngineStats stats;
    const auto batched = run_batched(v.config, reqs, &stats);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
    const std::string name = v.name;
    std::printf("%-34s steps %5ld  computed %6ld  preemptions %4ld  prefix hits %5ld  max running %ld\n", v.name,
                static_cast<long>(stats.num_steps), static_cast<long>(stats.computed_tokens),
                static_cast<long>(stats.num_preemptions), static_cast<long>(stats.prefix_hit_tokens),
                static_cast<long>(stats.max_num_running));
    // The Mamba2 models' state slots (tiny-granite-4.0-h's 30 KiB each) take most of the tiny budget: admission can
    // wait for a slot before pages run short, so their tiny-budget runs test slot-bound batching, not preemption.
    const bool mamba2 = GetParam() == "tiny-granite-4.0-h" || GetParam() == "tiny-nemotron-h";
    if (name.starts_with("tiny") && !mamba2) {
      EXPECT_GT(stats.num_preemptions, 0);
    }
    if (name == "prefix caching on") {
      EXPECT_GT(stats.prefix_hit_tokens, 0);
    }
    if (name == "prefix caching off") {
      EXPECT_EQ(stats.prefix_hit_tokens, 0);
    }
    EXPECT_GT(stats.max_num_running, 1);
  }
}

// The same with 16-bit and quantized KV caches: rounding K and V changes the tokens against f32, but batched and
// alone still agree exactly, with and without prefix caching, and under preemption (the quantization is per token
// as it is written, and attention's result per row does not depend on the batch).
TEST_P(BatchingTest, QuantizedKvCacheBatchedEqualsAlone) {
  const std::string model = model_path(GetParam());
  const std::vector<Request> reqs = make_requests(8, 250, 13);
  const ModelConfig m = [&] {
    Engine probe(base_config(model));
    return EngineAccess::core(probe).model_config();
  }();
  const int64_t head_dim = m.head_dim;
  for (KvCacheDtype dtype : {KvCacheDtype::kBf16, testing::quantized_kv_for(GetParam(), head_dim)}) {
    SCOPED_TRACE(kv_cache_dtype_name(dtype));
    const auto alone = run_alone(model, reqs, dtype);
    EngineConfig c = base_config(model);
    c.kv_cache_dtype = dtype;
    for (bool prefix : {true, false}) {
      SCOPED_TRACE(prefix ? "prefix caching on" : "prefix caching off");
      c.enable_prefix_caching = prefix;
      EngineStats stats;
      const auto batched = run_batched(c, reqs, &stats);
      for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
    }
    if (dtype == KvCacheDtype::kBf16) continue;
    // Preemption: room for one max_model_len sequence and a little more (and two state slots for a hybrid).
    const int64_t page_bytes = 2 * 16 * m.num_attention_layers() * m.num_kv_heads * kv_head_bytes(dtype, head_dim);
    c.kv_cache_memory = page_bytes * (128 / 16 + 3) + (m.has_recurrent_layers() ? 2 * StatePool::slot_bytes(m) : 0);
    EngineStats stats;
    const auto preempted = run_batched(c, reqs, &stats);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(preempted[i], alone[i]) << "preempted, request " << i;
  }
}

// Sliding-window layers hold their window, not the context: tiny-gemma3 (a 24-position window on two of its three
// layers) generating 300 tokens keeps at most the window's pages in the window pool (from the 128-key block the
// attention reads from to the page of the next token) while the full-attention layer's pages grow with the sequence.
// (That freeing changes no token is ConcurrentGreedyEqualsAlone's tiny-gemma3 case and the oracle tests.)
TEST(WindowPages, ReleasedBehindTheWindow) {
  const fs::path dir = fs::temp_directory_path() / "minfer_engine_test_window_pages";
  TestModelOptions o;
  o.preset = "tiny-gemma3";
  o.out_dir = dir.string();
  o.dtype = DType::F32;
  o.seed = 7;
  o.sliding_window = 24;
  write_test_model(o);
  EngineConfig c = base_config(dir.string());
  c.max_model_len = 512;
  Engine engine(c);
  SamplingParams p = greedy(300);
  p.ignore_eos = true;
  engine.add_request(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, p);
  int64_t most_window_pages = 0;
  while (engine.has_unfinished()) {
    engine.step();
    most_window_pages = std::max(most_window_pages, engine.stats().window_pages_used);
  }
  const EngineStats s = engine.stats();
  // 308 tokens: 20 pages of 16 in the full pool; the window pool held at most ceil((24 + 128) / 16) + 1 pages.
  EXPECT_LE(most_window_pages, (24 + 128 + 15) / 16 + 1);
  EXPECT_GE(s.window_pages_released, 308 / 16 - ((24 + 128 + 15) / 16 + 1));
  EXPECT_GT(s.window_pages_total, 0);
  EngineAccess::core(engine).page_manager().check_invariants();
  EngineAccess::core(engine).window_page_manager()->check_invariants();
}

INSTANTIATE_TEST_SUITE_P(Models, BatchingTest,
                         ::testing::Values("stories260K", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2",
                                           "tiny-gemma3", "tiny-mistral", "tiny-phi3", "tiny-qwen3-moe", "tiny-mixtral",
                                           "tiny-smollm3", "tiny-olmo2", "tiny-olmo3", "tiny-granite", "tiny-gpt-oss",
                                           "tiny-qwen3.5", "tiny-lfm2", "tiny-granite-4.0-h", "tiny-qwen3-next",
                                           "tiny-lfm2-moe", "tiny-nemotron-h"));

TEST(EngineStories260K, GreedyFromBosMatchesLlama2cReferenceInABatch) {
  std::ifstream in(std::string(MINFER_SHARED_DIR) + "/models/stories260K/greedy_t0_n200.ids");
  std::vector<int32_t> expected;
  int32_t id = 0;
  while (in >> id) expected.push_back(id);
  ASSERT_EQ(expected.size(), 200u);
  EngineConfig c = base_config(kStories);
  c.max_model_len = 0;  // the model's 512
  Engine engine(c);
  std::vector<std::vector<int32_t>> prompts = {{1}, {1, 403, 407}, {1}, {1, 403, 407, 261, 378}};
  const auto results = engine.generate(prompts, greedy(200));
  EXPECT_EQ(results[0].token_ids, expected);
  EXPECT_EQ(results[2].token_ids, expected);
  EXPECT_GT(engine.stats().prefix_hit_tokens, -1);
}

TEST(EngineStories260K, SeededSamplingIsRepeatableInAnyBatch) {
  Engine engine(base_config(kStories));
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.9f;
  p.seed = 1234;
  p.max_tokens = 40;
  p.ignore_eos = true;
  const auto alone = engine.generate(std::vector<std::vector<int32_t>>{{1, 403}}, p);
  SamplingParams other = p;
  other.seed = 99;
  const auto batched = engine.generate(std::vector<std::vector<int32_t>>{{1, 403, 407, 261}, {1, 403}, {1}}, other);
  std::vector<std::vector<int32_t>> mixed = {{1, 403, 407, 261}, {1, 403}, {1}};
  Engine engine2(base_config(kStories));
  std::vector<RequestId> ids;
  ids.push_back(engine2.add_request(mixed[0], other));
  ids.push_back(engine2.add_request(mixed[1], p));
  ids.push_back(engine2.add_request(mixed[2], other));
  std::vector<int32_t> got;
  while (engine2.has_unfinished())
    for (const RequestOutput& o : engine2.step())
      if (o.id == ids[1]) got.insert(got.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  EXPECT_EQ(got, alone[0].token_ids);
  EXPECT_EQ(batched[1].token_ids.size(), 40u);
}

}  // namespace
}  // namespace minfer
