// AsyncEngine: requests from many threads stream the same tokens as the synchronous engine; abort from
// another thread; callbacks; shutdown that drains or aborts; destruction while requests run.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "minfer/engine.h"

namespace minfer {
namespace {

EngineConfig config() {
  EngineConfig c;
  c.model_path = std::string(MINFER_SHARED_DIR) + "/models/stories260K/stories260K.bin";
  c.num_threads = 1;
  c.kv_cache_memory = 4 << 20;
  return c;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<std::vector<int32_t>> prompts() {
  return {{1}, {1, 403, 407}, {1, 403, 407, 261, 378}, {1, 300, 301, 302, 303, 304, 305}, {1, 403}, {1, 9, 8, 7}};
}

TEST(AsyncEngine, ConcurrentCallersGetTheSynchronousTokens) {
  std::vector<CompletionOutput> expected;
  {
    Engine engine(config());
    for (const auto& p : prompts()) expected.push_back(engine.generate({p}, greedy(40))[0]);
  }
  AsyncEngine engine(config());
  const auto ps = prompts();
  std::vector<std::vector<int32_t>> got(ps.size());
  std::vector<std::string> text(ps.size());
  std::vector<std::thread> callers;
  for (size_t i = 0; i < ps.size(); ++i)
    callers.emplace_back([&, i] {
      auto stream = engine.add_request(ps[i], greedy(40));
      while (auto o = stream->next()) {
        got[i].insert(got[i].end(), o->new_token_ids.begin(), o->new_token_ids.end());
        text[i] += o->text_delta;
        if (o->finished) {
          EXPECT_EQ(o->finish_reason, FinishReason::kLength);
        }
      }
      EXPECT_TRUE(stream->finished());
    });
  for (auto& t : callers) t.join();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(got[i], expected[i].token_ids) << i;
    EXPECT_EQ(text[i], expected[i].text) << i;
  }
  engine.shutdown();
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.requests_finished, static_cast<int64_t>(ps.size()));
}

TEST(AsyncEngine, CallbacksAndAbortFromAnotherThread) {
  AsyncEngine engine(config());
  std::atomic<int> tokens{0};
  std::atomic<bool> done{false};
  std::atomic<int> reason{-1};
  const RequestId id = engine.add_request({1}, greedy(400), [&](const RequestOutput& o) {
    tokens += static_cast<int>(o.new_token_ids.size());
    if (o.finished) {
      reason = static_cast<int>(o.finish_reason);
      done = true;
    }
  });
  while (tokens < 5) std::this_thread::yield();
  std::thread([&] { engine.abort(id); }).join();
  while (!done) std::this_thread::yield();
  EXPECT_EQ(reason, static_cast<int>(FinishReason::kAbort));
  EXPECT_LT(tokens, 400);
  engine.shutdown();
  EXPECT_EQ(engine.stats().pages_used, 0);
}

TEST(AsyncEngine, ShutdownDrainsOrAborts) {
  {
    AsyncEngine engine(config());
    auto a = engine.add_request({1, 403}, greedy(30));
    auto b = engine.add_request({1}, greedy(10));
    engine.shutdown(/*drain=*/true);
    std::vector<RequestOutput> outs = a->drain();
    ASSERT_FALSE(outs.empty());
    EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
    EXPECT_EQ(outs.back().output_tokens, 30);
    EXPECT_TRUE(b->finished() || !b->drain().empty());
    EXPECT_THROW(engine.add_request({1}, greedy(3)), std::exception);
  }
  {
    AsyncEngine engine(config());
    auto a = engine.add_request({1, 403}, greedy(450));
    while (a->drain().empty()) std::this_thread::yield();
    engine.shutdown(/*drain=*/false);
    std::optional<RequestOutput> last;
    while (auto o = a->next()) last = std::move(o);
    ASSERT_TRUE(last.has_value());
    EXPECT_TRUE(last->finished);
    EXPECT_EQ(last->finish_reason, FinishReason::kAbort);
  }
  {
    // Destroyed with work in flight: aborts and joins, no hang.
    AsyncEngine engine(config());
    for (int i = 0; i < 4; ++i) engine.add_request({1, 403}, greedy(400));
  }
}

TEST(AsyncEngine, BadRequestsThrowOnTheCallersThread) {
  AsyncEngine engine(config());
  EXPECT_THROW(engine.add_request(std::vector<int32_t>(600, 5), greedy(3)), std::exception);
  SamplingParams bad = greedy(3);
  bad.temperature = -1;
  EXPECT_THROW(engine.add_request({1}, bad), std::exception);
  auto ok = engine.add_request("Once upon a time", greedy(3));
  int n = 0;
  while (auto o = ok->next()) n += static_cast<int>(o->new_token_ids.size());
  EXPECT_EQ(n, 3);
}

}  // namespace
}  // namespace minfer
