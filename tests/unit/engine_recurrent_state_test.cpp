// The recurrent layers' state under speculative decoding, at the model runner: a verification chunk that keeps the
// state after each of its tokens, then keeps the one after its last accepted draft, continues exactly as a sequence
// that decoded only the accepted tokens (the rows it computed for them and the next token's logits equal).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/model_runner.h"
#include "engine_test_support.h"
#include "kv/state_pool.h"
#include "model/model_weights.h"

namespace minfer {
namespace {

struct TestSequence {
  std::vector<int32_t> pages;
  int64_t computed = 0;
  RequestId id = 0;
};

std::vector<float> run(ModelRunner& runner, const KvCache& cache, StatePool& states, TestSequence& seq,
                       const std::vector<int32_t>& tokens, bool verify) {
  SequenceChunk c;
  c.tokens = tokens;
  c.start_position = static_cast<int32_t>(seq.computed);
  c.page_table = seq.pages;
  c.sample = true;
  c.sample_all = verify;
  c.state_slot = states.slot_of(seq.id);
  c.state_history = verify ? states.history_of(seq.id) : -1;
  const std::span<const float> rows = runner.execute(std::span(&c, 1), KvPools{&cache, nullptr, &states});
  seq.computed += static_cast<int64_t>(tokens.size());
  return {rows.begin(), rows.end()};
}

void expect_rows_near(std::span<const float> got, std::span<const float> want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * scale) << what << " at " << i;
}

class RecurrentHistory : public ::testing::TestWithParam<std::string> {};

TEST_P(RecurrentHistory, KeptDraftStateContinuesAsPlainDecoding) {
  const ModelWeights w = load_model(testing::tiny_model_dir(GetParam()));
  ThreadPool pool(2);
  ModelRunner runner(w, pool);
  KvCacheShape shape;
  for (int64_t i = 0; i < w.config.num_layers; ++i) shape.num_layers += w.config.is_recurrent(i) ? 0 : 1;
  shape.kv_heads = w.config.num_kv_heads;
  shape.head_dim = w.config.head_dim;
  shape.page = PageGeometry::of(16);
  shape.num_pages = 9;
  const KvCache cache(shape);
  constexpr int64_t kDrafts = 4;
  StatePool states(w.config, 2, 0, kDrafts + 1);
  TestSequence plain{{1, 2, 3, 4}, 0, 1}, spec{{5, 6, 7, 8}, 0, 2};
  ASSERT_TRUE(states.acquire(plain.id) && states.acquire(spec.id));
  const std::vector<int32_t> prompt = {3, 41, 7, 99, 12, 5, 60, 21, 8, 33, 17};
  run(runner, cache, states, plain, prompt, false);
  run(runner, cache, states, spec, prompt, false);
  // The spec sequence verifies [d0, d1, d2, d3, d4]; the plain one decoded d0, d1, d2 (two drafts accepted).
  const std::vector<int32_t> verify = {42, 8, 19, 77, 23};
  const int64_t vocab = runner.vocab_size();
  const std::vector<float> rows = run(runner, cache, states, spec, verify, true);
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<float> one = run(runner, cache, states, plain, {verify[static_cast<size_t>(i)]}, false);
    expect_rows_near(std::span(rows).subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab)), one,
                     "verification row");
  }
  states.keep_history(spec.id, 2);
  spec.computed -= 2;  // d3 and d4 rejected: their KV is overwritten by the next tokens
  for (int32_t next : {50, 51, 52}) {
    const std::vector<float> a = run(runner, cache, states, plain, {next}, false);
    const std::vector<float> b = run(runner, cache, states, spec, {next}, false);
    expect_rows_near(b, a, "after the kept draft");
  }
}

INSTANTIATE_TEST_SUITE_P(Hybrids, RecurrentHistory,
                         ::testing::Values("tiny-qwen3.5", "tiny-lfm2", "tiny-granite-4.0-h", "tiny-qwen3-next",
                                           "tiny-lfm2-moe", "tiny-nemotron-h"));

}  // namespace
}  // namespace minfer
