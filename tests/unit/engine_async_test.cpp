// AsyncEngine: requests from many threads stream the same tokens as the synchronous engine; abort from
// another thread; callbacks; shutdown that drains or aborts; destruction while requests run.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_support.h"
#include "minfer/engine.h"

namespace minfer {
namespace {

EngineConfig config() {
  EngineConfig c = testing::small_engine_config();
  c.kv_cache_memory = 4 << 20;
  c.kv_cache_dtype = KvCacheDtype::kAuto;
  return c;
}

using testing::greedy;

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

TEST(AsyncEngine, ListenerAndAbortFromAnotherThread) {
  AsyncEngine engine(config());
  std::atomic<int> updates{0};
  auto state = engine.add_request({1}, greedy(400), {.stream = false, .on_update = [&] { ++updates; }});
  while (updates < 5) std::this_thread::yield();
  std::thread([&] { engine.abort(state->id()); }).join();
  while (!state->wait_for(std::chrono::milliseconds(100))) {
  }
  const CompletionOutput r = state->result();
  EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
  EXPECT_LT(r.token_ids.size(), 400u);
  EXPECT_GE(updates.load(), static_cast<int>(r.token_ids.size()));
  EXPECT_TRUE(state->take().empty());  // not streaming: only the folded result is kept
  engine.shutdown();
  EXPECT_EQ(engine.stats().pages_used, 0);
}

TEST(AsyncEngine, StateFoldsWhatTheStreamCarries) {
  AsyncEngine engine(config());
  SamplingParams p = greedy(25);
  p.logprobs = 2;
  auto state = engine.add_request({1, 403}, p);
  std::vector<int32_t> ids;
  std::string text;
  size_t logprobs = 0;
  while (auto o = state->next(std::chrono::milliseconds(50))) {
    ids.insert(ids.end(), o->new_token_ids.begin(), o->new_token_ids.end());
    text += o->text_delta;
    logprobs += o->logprobs.size();
  }
  while (!state->done())
    for (RequestOutput& o : state->take()) {
      ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      text += o.text_delta;
      logprobs += o.logprobs.size();
    }
  const CompletionOutput r = state->result();
  EXPECT_EQ(r.token_ids, ids);
  EXPECT_EQ(r.text, text);
  EXPECT_EQ(r.logprobs.size(), 25u);
  EXPECT_EQ(logprobs, 25u);
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{1, 403}));
  ASSERT_TRUE(state->first_token_time().has_value());
  ASSERT_TRUE(state->finish_time().has_value());
  EXPECT_LE(state->arrival_time(), *state->first_token_time());
  EXPECT_LE(*state->first_token_time(), *state->finish_time());
}

TEST(AsyncEngine, ShutdownDrainsOrAborts) {
  {
    AsyncEngine engine(config());
    auto a = engine.add_request({1, 403}, greedy(30));
    auto b = engine.add_request({1}, greedy(10));
    engine.shutdown(/*drain=*/true);
    std::vector<RequestOutput> outs = a->take();
    ASSERT_FALSE(outs.empty());
    EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
    EXPECT_EQ(outs.back().output_tokens, 30);
    EXPECT_TRUE(b->finished());
    try {
      engine.add_request({1}, greedy(3));
      ADD_FAILURE() << "a request after shutdown was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    }
  }
  {
    AsyncEngine engine(config());
    auto a = engine.add_request({1, 403}, greedy(450));
    while (a->output_tokens() == 0) std::this_thread::yield();
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
