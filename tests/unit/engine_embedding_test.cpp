// The embedding engine (EngineTask::kEmbed) on stories260K: the pooled final hidden state is one unit vector per
// prompt, the same whether the prompt runs alone, batched, or in prefill chunks, fused or not; last and mean
// pooling differ. llama.cpp's embeddings of the same GGUF are the oracle in tests/e2e/test_embeddings.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "minfer/engine.h"

namespace minfer {
namespace {

const std::vector<std::string> kPrompts = {"Once upon a time there was a little girl", "The dog ran",
                                           "Lily and Ben went to the park to play with a ball"};

std::vector<std::vector<float>> embed(EngineConfig config, const std::vector<std::string>& prompts) {
  config.task = EngineTask::kEmbed;
  Engine engine(config);
  std::vector<std::vector<float>> out;
  for (const CompletionOutput& r : engine.generate(prompts, SamplingParams{})) {
    EXPECT_EQ(r.finish_reason, FinishReason::kStop);
    EXPECT_TRUE(r.token_ids.empty());
    out.push_back(r.embedding);
  }
  return out;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

void expect_near(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) ASSERT_NEAR(a[i][j], b[i][j], tol) << "prompt " << i << " dim " << j;
  }
}

TEST(EngineEmbedding, UnitVectorsIndependentOfBatchingChunkingAndFusion) {
  for (PoolingType pooling : {PoolingType::kLast, PoolingType::kMean}) {
    EngineConfig config = testing::small_engine_config();
    config.pooling = pooling;
    const std::vector<std::vector<float>> batched = embed(config, kPrompts);
    for (const auto& e : batched) {
      EXPECT_EQ(e.size(), 64u);  // stories260K's hidden size
      EXPECT_NEAR(norm(e), 1.0, 1e-5);
    }
    std::vector<std::vector<float>> alone;
    for (const std::string& p : kPrompts) alone.push_back(embed(config, {p})[0]);
    expect_near(batched, alone, 1e-5f);
    EngineConfig chunked = config;
    chunked.max_num_batched_tokens = 5;  // several prefill chunks per prompt
    expect_near(embed(chunked, kPrompts), batched, 1e-5f);
    EngineConfig unfused = config;
    unfused.fusion_strategy = FusionStrategy::kNone;
    expect_near(embed(unfused, kPrompts), batched, 1e-4f);
  }
}

TEST(EngineEmbedding, PoolingsDifferAndNormalisationCanBeOff) {
  EngineConfig last = testing::small_engine_config();
  EngineConfig mean = last;
  mean.pooling = PoolingType::kMean;
  const auto a = embed(last, {kPrompts[0]})[0];
  const auto b = embed(mean, {kPrompts[0]})[0];
  double dot = 0;
  for (size_t j = 0; j < a.size(); ++j) dot += static_cast<double>(a[j]) * b[j];
  EXPECT_LT(dot, 0.999);
  last.normalize_embeddings = false;
  EXPECT_GT(std::abs(norm(embed(last, {kPrompts[0]})[0]) - 1.0), 1e-3);
}

}  // namespace
}  // namespace minfer
