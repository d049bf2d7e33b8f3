#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/sampler.h"
#include "minfer/sampling.h"

namespace minfer {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

SamplingParams params_with(float temperature, uint64_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// Brute-force reference of the filtered distribution: full sort (logit desc, id asc), top-k, top-p over the
// renormalised top-k survivors (keep while the mass strictly before a token is below top_p), min-p against the
// largest probability; all in double. Input logits are already penalised; temperature applied here.
std::vector<double> reference_probs(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<double> scaled(n);
  for (size_t i = 0; i < n; ++i) scaled[i] = static_cast<double>(logits[i] / p.temperature);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scaled[a] > scaled[b]; });
  size_t keep = n;
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  const double m = scaled[order[0]];
  std::vector<double> w(n, 0.0);
  double total = 0.0;
  for (size_t r = 0; r < keep; ++r) total += std::exp(scaled[order[r]] - m);
  double before = 0.0;
  for (size_t r = 0; r < keep; ++r) {
    const double e = std::exp(scaled[order[r]] - m);
    if (r > 0 && before >= static_cast<double>(p.top_p) * total) break;
    before += e;
    if (e >= static_cast<double>(p.min_p)) w[order[r]] = e;  // e = prob / max prob
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

// Draws `draws` tokens (each from a fresh copy of the logits) and returns the counts per id.
std::vector<int> draw_counts(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  Sampler sampler(p);
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> row;
  for (int i = 0; i < draws; ++i) {
    row = logits;
    const int32_t id = sampler.sample(row, {}, {});
    EXPECT_GE(id, 0);
    EXPECT_LT(static_cast<size_t>(id), logits.size());
    counts[static_cast<size_t>(id)]++;
  }
  return counts;
}

// Every id's empirical frequency within 5 standard errors of the expected probability; ids of probability 0
// never drawn. With a fixed seed the outcome is deterministic; the bound says the expectation is right.
void expect_matches(const std::vector<int>& counts, const std::vector<double>& expected, int draws) {
  ASSERT_EQ(counts.size(), expected.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    const double f = static_cast<double>(counts[i]) / draws;
    const double p = expected[i];
    if (p == 0.0) {
      EXPECT_EQ(counts[i], 0) << "id " << i << " must be filtered out";
    } else {
      const double sigma = std::sqrt(p * (1.0 - p) / draws);
      EXPECT_NEAR(f, p, 5.0 * sigma + 1e-12) << "id " << i;
    }
  }
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// A small known distribution: probabilities 0.4, 0.25, 0.15, 0.1, 0.06, 0.04.
const std::vector<double> kProbs = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
constexpr int kDraws = 20000;

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(params_with(0.0f));
  std::vector<float> a = {0.1f, 3.0f, -1.0f, 2.9f};
  EXPECT_EQ(s.sample(a, {}, {}), 1);
  std::vector<float> tie = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  EXPECT_EQ(s.sample(tie, {}, {}), 1);
  std::vector<float> nan_first = {std::nanf(""), -1.0f, -0.5f};
  EXPECT_EQ(s.sample(nan_first, {}, {}), 2);
  std::vector<float> all_neg_inf = {kNegInf, kNegInf};
  EXPECT_EQ(s.sample(all_neg_inf, {}, {}), 0);
  // Filters and seed do not matter for greedy.
  SamplingParams p = params_with(0.0f, 99);
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  Sampler s2(p);
  std::vector<float> b = {0.0f, 0.0f, 7.0f, 6.99f};
  EXPECT_EQ(s2.sample(b, {}, {}), 2);
  // A temperature below 1e-5 counts as greedy.
  Sampler s3(params_with(1e-6f));
  for (int i = 0; i < 50; ++i) {
    std::vector<float> c = {1.0f, 1.0001f, 0.5f};
    EXPECT_EQ(s3.sample(c, {}, {}), 1);
  }
}

TEST(Sampler, RepetitionPenaltyExactOverPromptAndGenerated) {
  SamplingParams p = params_with(0.0f);
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f, 3.0f};
  const std::vector<int32_t> prompt = {0, 1, 0, 4};
  const std::vector<int32_t> generated = {0, 2, 2};
  s.apply_penalties(logits, prompt, generated);
  // Each distinct seen id once, however often it appears: positive / p, non-positive * p.
  EXPECT_EQ(logits[0], 2.0f / 1.5f);
  EXPECT_EQ(logits[1], -2.0f * 1.5f);
  EXPECT_EQ(logits[2], 1.0f / 1.5f);
  EXPECT_EQ(logits[3], 0.5f);  // unseen
  EXPECT_EQ(logits[4], 0.0f);
  EXPECT_EQ(logits[5], 3.0f);  // unseen
}

TEST(Sampler, PresenceAndFrequencyPenaltiesOverGeneratedOnly) {
  SamplingParams p = params_with(0.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f, -3.0f};
  const std::vector<int32_t> prompt = {0, 1, 1};  // prompt ids are not penalised by these two
  const std::vector<int32_t> generated = {2, 3, 2, 2, 4};
  s.apply_penalties(logits, prompt, generated);
  EXPECT_EQ(logits[0], 1.0f);
  EXPECT_EQ(logits[1], 1.0f);
  EXPECT_EQ(logits[2], 1.0f - 3 * 0.25f - 0.5f);
  EXPECT_EQ(logits[3], 1.0f - 0.25f - 0.5f);
  EXPECT_EQ(logits[4], -3.0f - 0.25f - 0.5f);

  // Negative penalties encourage repetition; all three together compose (repetition first).
  SamplingParams q = params_with(0.0f);
  q.presence_penalty = -1.0f;
  q.frequency_penalty = -2.0f;
  q.repetition_penalty = 2.0f;
  Sampler t(q);
  std::vector<float> l2 = {4.0f, -4.0f, 0.0f};
  const std::vector<int32_t> gen2 = {1, 1};
  t.apply_penalties(l2, std::vector<int32_t>{0}, gen2);
  EXPECT_EQ(l2[0], 2.0f);
  EXPECT_EQ(l2[1], -4.0f * 2.0f + 2 * 2.0f + 1.0f);
  EXPECT_EQ(l2[2], 0.0f);
}

TEST(Sampler, PenaltiesChangeTheGreedyChoice) {
  SamplingParams p = params_with(0.0f);
  p.frequency_penalty = 1.0f;
  Sampler s(p);
  std::vector<float> logits = {5.0f, 4.5f};
  EXPECT_EQ(s.sample(logits, {}, std::vector<int32_t>{0}), 1);
  SamplingParams q = params_with(0.0f);
  q.repetition_penalty = 1.3f;
  Sampler t(q);
  std::vector<float> l2 = {5.0f, 4.5f};
  EXPECT_EQ(t.sample(l2, std::vector<int32_t>{0}, {}), 1);
}

TEST(Sampler, OutOfRangeIdsThrow) {
  SamplingParams p = params_with(1.0f);
  p.repetition_penalty = 1.1f;
  Sampler s(p);
  std::vector<float> logits = {1.0f, 2.0f};
  EXPECT_THROW(s.sample(logits, std::vector<int32_t>{2}, {}), Error);
  EXPECT_THROW(s.sample(logits, {}, std::vector<int32_t>{-1}), Error);
}

TEST(Sampler, PlainSamplingMatchesSoftmax) {
  const auto logits = log_probs(kProbs);
  const auto p = params_with(1.0f, 7);
  expect_matches(draw_counts(logits, p, kDraws), kProbs, kDraws);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const auto logits = log_probs(kProbs);
  for (float t : {0.5f, 2.0f}) {
    const auto p = params_with(t, 11);
    // p_i^(1/t) renormalised, computed independently of reference_probs.
    std::vector<double> expected;
    for (double q : kProbs) expected.push_back(std::pow(q, 1.0 / t));
    const double sum = std::accumulate(expected.begin(), expected.end(), 0.0);
    for (double& e : expected) e /= sum;
    expect_matches(draw_counts(logits, p, kDraws), expected, kDraws);
  }
}

TEST(Sampler, TopKKeepsTheKLargest) {
  const auto logits = log_probs(kProbs);
  auto p = params_with(1.0f, 21);
  p.top_k = 2;
  const std::vector<double> expected = {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0};
  expect_matches(draw_counts(logits, p, kDraws), expected, kDraws);
  p.top_k = 1;
  const auto counts = draw_counts(logits, p, 500);
  EXPECT_EQ(counts[0], 500);
  p.top_k = 100;  // larger than the vocabulary: off
  expect_matches(draw_counts(logits, p, kDraws), kProbs, kDraws);
  p.top_k = -1;  // off
  expect_matches(draw_counts(logits, p, kDraws), kProbs, kDraws);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  const auto logits = log_probs(kProbs);
  auto p = params_with(1.0f, 31);
  // Mass before each token: 0, 0.4, 0.65, 0.8, 0.9, 0.96.
  p.top_p = 0.6f;  // keeps 0.4, 0.25
  expect_matches(draw_counts(logits, p, kDraws), {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}, kDraws);
  p.top_p = 0.7f;  // keeps 0.4, 0.25, 0.15
  expect_matches(draw_counts(logits, p, kDraws), {0.4 / 0.8, 0.25 / 0.8, 0.15 / 0.8, 0, 0, 0}, kDraws);
  p.top_p = 0.05f;  // always at least one
  EXPECT_EQ(draw_counts(logits, p, 500)[0], 500);
}

TEST(Sampler, TopPAppliesToTheTopKSurvivors) {
  const auto logits = log_probs(kProbs);
  auto p = params_with(1.0f, 41);
  p.top_k = 3;     // 0.4, 0.25, 0.15 renormalised: 0.5, 0.3125, 0.1875
  p.top_p = 0.8f;  // mass before: 0, 0.5, 0.8125 -> keeps two
  expect_matches(draw_counts(logits, p, kDraws), {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0}, kDraws);
  EXPECT_EQ(reference_probs(logits, p)[2], 0.0);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheMax) {
  const auto logits = log_probs(kProbs);
  auto p = params_with(1.0f, 51);
  p.min_p = 0.3f;  // threshold 0.12: keeps 0.4, 0.25, 0.15
  expect_matches(draw_counts(logits, p, kDraws), {0.4 / 0.8, 0.25 / 0.8, 0.15 / 0.8, 0, 0, 0}, kDraws);
  p.min_p = 1.0f;  // only the max
  EXPECT_EQ(draw_counts(logits, p, 500)[0], 500);
  // Against the temperature-scaled distribution: at t = 0.5 the probabilities are ~ p^2, max 0.16 * c;
  // min_p 0.3 keeps p^2 >= 0.048, i.e. 0.4 and 0.25 only.
  p = params_with(0.5f, 52);
  p.min_p = 0.3f;
  const double a = 0.16, b = 0.0625;
  expect_matches(draw_counts(logits, p, kDraws), {a / (a + b), b / (a + b), 0, 0, 0, 0}, kDraws);
}

TEST(Sampler, AllFiltersTogetherMatchTheReference) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(40);
  for (float& l : logits) l = normal(gen);
  auto p = params_with(0.8f, 61);
  p.top_k = 20;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  expect_matches(draw_counts(logits, p, kDraws), reference_probs(logits, p), kDraws);
}

TEST(Sampler, TopPAloneOnARandomDistributionMatchesTheReference) {
  // Many distinct logits spread over many of the top-p histogram's buckets, with the cut inside one of them.
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(1000);
  for (float& l : logits) l = normal(gen);
  for (float top_p : {0.5f, 0.8f, 0.95f}) {
    auto p = params_with(1.0f, 91);
    p.top_p = top_p;
    expect_matches(draw_counts(logits, p, kDraws), reference_probs(logits, p), kDraws);
  }
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  // -inf (masked) and NaN logits get no mass on every path (no filter, top-k, top-p, min-p).
  std::vector<float> logits = {kNegInf, 0.0f, kNegInf, -1.0f, std::nanf(""), 0.5f, kNegInf};
  for (int path = 0; path < 4; ++path) {
    auto p = params_with(1.0f, 100 + static_cast<uint64_t>(path));
    if (path == 1) p.top_k = 5;
    if (path == 2) p.top_p = 0.99f;
    if (path == 3) p.min_p = 0.01f;
    const auto counts = draw_counts(logits, p, 3000);
    EXPECT_EQ(counts[0] + counts[2] + counts[4] + counts[6], 0) << "path " << path;
    EXPECT_GT(counts[1], 0);
    EXPECT_GT(counts[3], 0);
    EXPECT_GT(counts[5], 0);
  }
}

TEST(Sampler, TopPWithWideNucleusAndTiesBreaksTowardsLowIds) {
  // 300 ids share the top logit, scattered over 2000; the rest are far below. The nucleus is a prefix of the
  // tied group in id order, larger than the first partial-sort chunk, so the incremental sort is exercised.
  const size_t vocab = 2000;
  std::vector<float> logits(vocab, -5.0f);
  for (size_t i = 0; i < 300; ++i) logits[(i * 7 + 3) % vocab] = 0.0f;
  auto p = params_with(1.0f, 71);
  p.top_p = 0.9f;
  const auto expected = reference_probs(logits, p);
  const auto kept = std::count_if(expected.begin(), expected.end(), [](double x) { return x > 0; });
  EXPECT_GT(kept, 256);
  EXPECT_LT(kept, 300);
  const auto counts = draw_counts(logits, p, kDraws);
  expect_matches(counts, expected, kDraws);
  // Every nucleus member is drawn at least once in 20000 draws (each ~70 expected).
  for (size_t i = 0; i < vocab; ++i) {
    if (expected[i] > 0) {
      EXPECT_GT(counts[i], 0) << i;
    }
  }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  const auto logits = log_probs(kProbs);
  auto run = [&](uint64_t seed) {
    auto p = params_with(1.0f, seed);
    p.top_p = 0.95f;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> row = logits;
      out.push_back(s.sample(row, {}, {}));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, LargeVocabularyStaysInTheFilteredSet) {
  const size_t vocab = 151936;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(gen);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<int> rank(vocab);
  for (size_t r = 0; r < vocab; ++r) rank[static_cast<size_t>(order[r])] = static_cast<int>(r);

  struct Case {
    int32_t top_k;
    float top_p;
    float min_p;
  };
  for (const Case c :
       {Case{50, 1.0f, 0.0f}, Case{0, 0.9f, 0.0f}, Case{0, 1.0f, 0.05f}, Case{40, 0.8f, 0.1f}, Case{0, 1.0f, 0.0f}}) {
    auto p = params_with(1.0f, 81);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    const auto expected = reference_probs(logits, p);
    Sampler s(p);
    std::vector<float> row;
    const int draws = 200;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < draws; ++i) {
      row = logits;
      const int32_t id = s.sample(row, {}, {});
      ASSERT_GT(expected[static_cast<size_t>(id)], 0.0)
          << "id " << id << " of rank " << rank[static_cast<size_t>(id)] << " is outside the filtered set";
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / draws;
    std::printf("vocab %zu top_k %d top_p %.2f min_p %.2f: %.0f us per sample (incl. copy)\n", vocab, c.top_k,
                static_cast<double>(c.top_p), static_cast<double>(c.min_p), us);
  }
}

TEST(SamplingParams, DefaultsAndBoundariesAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate());
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.max_tokens = 1;
  EXPECT_NO_THROW(p.validate());
  p.min_p = 0.0f;
  p.top_k = 0;
  p.repetition_penalty = 0.01f;
  EXPECT_NO_THROW(p.validate());
}

void expect_invalid(const SamplingParams& p, const std::string& field, const std::string& range) {
  try {
    p.validate();
    ADD_FAILURE() << field << " should have been rejected";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(field), std::string::npos) << message;
    EXPECT_NE(message.find(range), std::string::npos) << message;
  }
}

TEST(SamplingParams, OutOfRangeValuesNameTheFieldAndRange) {
  const float nan = std::nanf("");
  auto with = [](auto change) {
    SamplingParams p;
    change(p);
    return p;
  };
  expect_invalid(with([](SamplingParams& p) { p.temperature = -0.1f; }), "temperature", ">= 0");
  expect_invalid(with([&](SamplingParams& p) { p.temperature = nan; }), "temperature", ">= 0");
  expect_invalid(with([](SamplingParams& p) { p.top_p = 0.0f; }), "top_p", "(0, 1]");
  expect_invalid(with([](SamplingParams& p) { p.top_p = 1.01f; }), "top_p", "(0, 1]");
  expect_invalid(with([&](SamplingParams& p) { p.top_p = nan; }), "top_p", "(0, 1]");
  expect_invalid(with([](SamplingParams& p) { p.top_k = -2; }), "top_k", ">= 0");
  expect_invalid(with([](SamplingParams& p) { p.min_p = -0.01f; }), "min_p", "[0, 1]");
  expect_invalid(with([](SamplingParams& p) { p.min_p = 1.5f; }), "min_p", "[0, 1]");
  expect_invalid(with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty", "> 0");
  expect_invalid(with([](SamplingParams& p) { p.repetition_penalty = -1.0f; }), "repetition_penalty", "> 0");
  expect_invalid(with([](SamplingParams& p) { p.presence_penalty = 2.5f; }), "presence_penalty", "[-2, 2]");
  expect_invalid(with([](SamplingParams& p) { p.presence_penalty = -2.01f; }), "presence_penalty", "[-2, 2]");
  expect_invalid(with([](SamplingParams& p) { p.frequency_penalty = 3.0f; }), "frequency_penalty", "[-2, 2]");
  expect_invalid(with([](SamplingParams& p) { p.max_tokens = 0; }), "max_tokens", ">= 1");
}

}  // namespace
}  // namespace minfer
