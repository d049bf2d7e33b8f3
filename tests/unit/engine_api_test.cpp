// The Engine API on the real stories260K checkpoint: text in and out, stop strings, limits and the
// errors a user sees, abort, stats, and generate() living beside step()-driven requests.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_access.h"
#include "engine_test_support.h"
#include "minfer/engine.h"

namespace minfer {
namespace {

const std::string kDir = std::string(MINFER_SHARED_DIR) + "/models/stories260K/";

std::string expected_text() {
  std::ifstream in(kDir + "expected_greedy_n200.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shared small engine over stories260K, with a 4 MiB pool (the page counts below assume it).
EngineConfig config() {
  EngineConfig c = testing::small_engine_config(kDir + "stories260K.bin");
  c.kv_cache_memory = 4 << 20;
  c.kv_cache_dtype = KvCacheDtype::kAuto;
  return c;
}

// Greedy, stopping at EOS.
SamplingParams greedy(int32_t max_tokens) { return testing::greedy(max_tokens, /*stop_at_eos=*/true); }

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(EngineApi, TextPromptContinuesTheReferenceStory) {
  Engine engine(config());
  const RequestId id = engine.add_request("Once upon a time", greedy(30));
  std::string text;
  std::vector<int32_t> ids;
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      ASSERT_EQ(o.id, id);
      text += o.text_delta;
      ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      EXPECT_EQ(o.output_tokens, static_cast<int64_t>(ids.size()));
      if (o.finished) {
        EXPECT_EQ(o.finish_reason, FinishReason::kLength);
      }
    }
  EXPECT_EQ(ids.size(), 30u);
  const std::string ref = expected_text().substr(std::string("Once upon a time").size());
  ASSERT_GT(text.size(), 40u);
  EXPECT_EQ(text, ref.substr(0, text.size()));
}

TEST(EngineApi, StopStringsEndTheTextBeforeThem) {
  Engine engine(config());
  const std::string ref = expected_text();
  SamplingParams p = greedy(150);
  p.stop = {"Lily"};
  auto r = engine.generate(std::vector<std::vector<int32_t>>{{1}}, p);
  EXPECT_EQ(r[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(r[0].stop_reason, "Lily");
  EXPECT_EQ(r[0].text, ref.substr(0, ref.find("Lily")));
  // One that spans tokens and words.
  p.stop = {"e girl na"};
  r = engine.generate(std::vector<std::vector<int32_t>>{{1}}, p);
  EXPECT_EQ(r[0].text, ref.substr(0, ref.find("e girl na")));
  // Streamed deltas add up to the same text, with no piece sent twice.
  engine.add_request(std::vector<int32_t>{1}, p);
  std::string streamed;
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) streamed += o.text_delta;
  EXPECT_EQ(streamed, r[0].text);
}

TEST(EngineApi, RejectsWhatCannotBeServed) {
  EngineConfig c = config();
  c.max_model_len = 32;
  Engine engine(c);
  const std::vector<int32_t> long_prompt(32, 300);
  std::string msg = expect_error([&] { engine.add_request(long_prompt, greedy(4)); });
  EXPECT_NE(msg.find("max_model_len is 32"), std::string::npos) << msg;
  EXPECT_NO_THROW(engine.add_request(std::vector<int32_t>(31, 300), greedy(4)));
  msg = expect_error([&] { engine.add_request(std::vector<int32_t>{}, greedy(4)); });
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  msg = expect_error([&] { engine.add_request(std::vector<int32_t>{1, 100000}, greedy(4)); });
  EXPECT_NE(msg.find("vocabulary"), std::string::npos) << msg;
  SamplingParams bad = greedy(4);
  bad.top_p = 0.0f;
  msg = expect_error([&] { engine.add_request(std::vector<int32_t>{1}, bad); });
  EXPECT_NE(msg.find("top_p"), std::string::npos) << msg;
  // A generate() with one bad prompt queues nothing.
  msg = expect_error([&] { engine.generate(std::vector<std::vector<int32_t>>{{1}, long_prompt}, greedy(4)); });
  EXPECT_EQ(engine.stats().num_waiting, 1);  // only the one added above
}

TEST(EngineApi, RefusesToStartWhenOneSequenceDoesNotFit) {
  EngineConfig c = config();
  c.kv_cache_memory = 100000;  // stories260K: 20 KiB a page, so under 5 pages; 512 tokens need 32
  c.max_model_len = 512;
  const std::string msg = expect_error([&] { Engine e(c); });
  EXPECT_NE(msg.find("max_model_len=512"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kv_cache_memory"), std::string::npos) << msg;
  // head_dim 8: llama.cpp's blocks of 32 do not apply, the per-token types do.
  EXPECT_NE(msg.find("--kv-cache-dtype int8"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("q8_0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("quantization"), std::string::npos) << msg;
  // With no max_model_len given, the model's 512 positions are cut to the 4 pages the budget holds, less the
  // null page.
  c.max_model_len = 0;
  Engine fitted(c);
  EXPECT_EQ(fitted.config().max_model_len, 48);
  c = config();
  c.page_size = 12;
  EXPECT_NE(expect_error([&] { Engine e(c); }).find("page_size"), std::string::npos);
  c = config();
  c.max_model_len = 100000;
  EXPECT_NE(expect_error([&] { Engine e(c); }).find("max_position_embeddings"), std::string::npos);
}

TEST(EngineApi, KvCacheDtypeAutoFollowsTheWeightsAndBf16HoldsTwiceTheTokens) {
  EngineConfig c = config();
  c.max_num_seqs = 64;
  Engine f32(c);  // stories260K has f32 weights: auto = f32
  EXPECT_EQ(f32.config().kv_cache_dtype, KvCacheDtype::kF32);
  c.kv_cache_dtype = KvCacheDtype::kBf16;
  Engine bf16(c);
  EXPECT_EQ(bf16.config().kv_cache_dtype, KvCacheDtype::kBf16);
  // The same 4 MiB budget buys twice the pages.
  EXPECT_NEAR(static_cast<double>(bf16.stats().pages_total), 2.0 * static_cast<double>(f32.stats().pages_total), 2.0);
  // bf16 KV rounds K and V, so the text may drift late, but the greedy continuation starts the same.
  const std::vector<std::vector<int32_t>> prompt = {{1}};
  const auto want = f32.generate(prompt, greedy(40))[0].token_ids;
  const auto got = bf16.generate(prompt, greedy(40))[0].token_ids;
  ASSERT_EQ(got.size(), 40u);
  EXPECT_TRUE(std::equal(want.begin(), want.begin() + 10, got.begin()));
  KvCacheDtype d = KvCacheDtype::kAuto;
  EXPECT_TRUE(parse_kv_cache_dtype("bf16", &d));
  EXPECT_EQ(d, KvCacheDtype::kBf16);
  EXPECT_TRUE(parse_kv_cache_dtype("f32", &d));
  EXPECT_EQ(d, KvCacheDtype::kF32);
  for (const char* name : {"f16", "int8", "fp8_e4m3", "q8_0", "q4_0"}) {
    EXPECT_TRUE(parse_kv_cache_dtype(name, &d)) << name;
    EXPECT_STREQ(kv_cache_dtype_name(d), name);
  }
  EXPECT_TRUE(parse_kv_cache_dtype("fp8", &d));
  EXPECT_EQ(d, KvCacheDtype::kFp8E4m3);
  EXPECT_FALSE(parse_kv_cache_dtype("q5_0", &d));
  EXPECT_STREQ(kv_cache_dtype_name(KvCacheDtype::kAuto), "auto");
}

TEST(EngineApi, DefaultBudgetIsAFractionOfFreeMemory) {
  EngineConfig c = config();
  c.kv_cache_memory = 0;
  c.max_num_seqs = 2;  // caps the pool at two full-length sequences
  Engine engine(c);
  const EngineStats s = engine.stats();
  EXPECT_GT(s.kv_pool_bytes, 0);
  EXPECT_EQ(s.pages_total, 2 * 512 / 16);
  EXPECT_EQ(engine.config().kv_cache_memory, s.kv_pool_bytes);
  EXPECT_EQ(engine.generate(std::vector<std::vector<int32_t>>{{1}}, greedy(5))[0].token_ids.size(), 5u);
}

// Inside a container whose cgroup leaves 64 MiB (simulated: MINFER_CGROUP_MEMORY_DIR), an explicit 40 GiB budget is
// refused at start with the numbers and the knobs, and the default budget is a fraction of those 64 MiB.
TEST(EngineApi, BudgetsBeyondTheMemoryLimitAreRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "minfer_engine_api_cgroup";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "memory.max") << (int64_t{128} << 20) << "\n";
  std::ofstream(dir / "memory.current") << (int64_t{64} << 20) << "\n";
  ::setenv("MINFER_CGROUP_MEMORY_DIR", dir.c_str(), 1);
  EngineConfig c = config();
  c.kv_cache_memory = int64_t{40} << 30;
  const std::string msg = expect_error([&] { Engine e(c); });
  EXPECT_NE(msg.find("40960 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cgroup limit 128 MiB with 64 MiB left"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--kv-cache-memory"), std::string::npos) << msg;
  c.kv_cache_memory = 0;
  c.kv_cache_memory_fraction = 0.5;
  Engine fits(c);
  EXPECT_LE(fits.stats().kv_pool_bytes, int64_t{32} << 20);
  ::unsetenv("MINFER_CGROUP_MEMORY_DIR");
  std::filesystem::remove_all(dir);
}

TEST(EngineApi, AbortEndsARequestAndFreesItsPages) {
  Engine engine(config());
  const RequestId a = engine.add_request(std::vector<int32_t>{1, 403}, greedy(100));
  const RequestId b = engine.add_request(std::vector<int32_t>{1, 403, 407}, greedy(20));
  for (int i = 0; i < 5; ++i) engine.step();
  EXPECT_GT(engine.stats().pages_used, 0);
  EXPECT_TRUE(engine.abort(a));
  EXPECT_FALSE(engine.abort(a));
  EXPECT_FALSE(engine.abort(12345));
  bool saw_abort = false;
  int64_t b_tokens = 0;
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      if (o.id == a) {
        EXPECT_TRUE(o.finished);
        EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
        EXPECT_TRUE(o.new_token_ids.empty());
        saw_abort = true;
      } else {
        b_tokens += static_cast<int64_t>(o.new_token_ids.size());
      }
    }
  EXPECT_TRUE(saw_abort);
  EXPECT_EQ(b_tokens, 20 - 5);
  EXPECT_EQ(b, a + 1);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.requests_finished, 2);
  EngineAccess::core(engine).page_manager().check_invariants();
}

TEST(EngineApi, ContextLimitEndsWithLength) {
  EngineConfig c = config();
  c.max_model_len = 16;
  Engine engine(c);
  const auto r = engine.generate(std::vector<std::vector<int32_t>>{std::vector<int32_t>(10, 300)}, greedy(100));
  EXPECT_EQ(r[0].token_ids.size(), 6u);
  EXPECT_EQ(r[0].finish_reason, FinishReason::kLength);
}

TEST(EngineApi, StatsCountTokensAndPrefixHits) {
  Engine engine(config());
  std::vector<int32_t> prompt(40, 300);
  prompt[0] = 1;
  engine.generate(std::vector<std::vector<int32_t>>{prompt}, greedy(5));
  engine.generate(std::vector<std::vector<int32_t>>{prompt}, greedy(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.prompt_tokens, 80);
  EXPECT_EQ(s.generated_tokens, 10);
  EXPECT_EQ(s.prefix_queried_tokens, 80);
  EXPECT_EQ(s.prefix_hit_tokens, 32);  // two full pages of 16 of the second prompt
  EXPECT_NEAR(s.prefix_cache_hit_rate, 32.0 / 80.0, 1e-9);
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_GT(s.pages_cached, 0);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
}

TEST(EngineApi, GenerateKeepsOtherRequestsOutputsForStep) {
  Engine engine(config());
  const std::vector<int32_t> pa = {1, 403, 407};
  const auto alone = engine.generate(std::vector<std::vector<int32_t>>{pa}, greedy(12));
  const RequestId a = engine.add_request(pa, greedy(12));
  const auto rb = engine.generate(std::vector<std::vector<int32_t>>{{1}}, greedy(30));
  EXPECT_EQ(rb[0].token_ids.size(), 30u);
  std::vector<int32_t> got;
  bool finished = false;
  while (!finished) {
    for (const RequestOutput& o : engine.step()) {
      ASSERT_EQ(o.id, a);
      got.insert(got.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      finished = o.finished;
    }
  }
  EXPECT_EQ(got, alone[0].token_ids);
}

}  // namespace
}  // namespace minfer
