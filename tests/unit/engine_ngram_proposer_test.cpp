// The prompt-lookup proposer (engine/ngram_proposer.h) against a brute-force reference on random token streams of
// small vocabularies (many repeats) and awkward lengths, plus the cases that define it: the longest suffix wins, the
// latest earlier occurrence wins, a draft stops at the end of the tokens, nothing is proposed without a match.
#include <gtest/gtest.h>

#include <random>

#include "engine/ngram_proposer.h"

namespace minfer {
namespace {

// Every (n, start) in the order the definition states, checked the slow way.
std::vector<int32_t> reference(const std::vector<int32_t>& t, const NgramOptions& o) {
  const int64_t len = static_cast<int64_t>(t.size());
  for (int64_t n = o.max_n; n >= o.min_n; --n) {
    if (n >= len) continue;
    for (int64_t start = len - n - 1; start >= 0; --start) {
      bool same = true;
      for (int64_t i = 0; i < n; ++i)
        same = same && t[static_cast<size_t>(start + i)] == t[static_cast<size_t>(len - n + i)];
      if (!same) continue;
      std::vector<int32_t> out;
      for (int64_t i = start + n; i < len && static_cast<int64_t>(out.size()) < o.k; ++i)
        out.push_back(t[static_cast<size_t>(i)]);
      return out;
    }
  }
  return {};
}

TEST(NgramProposer, DefiningCases) {
  const NgramOptions o{.min_n = 1, .max_n = 3, .k = 3};
  // "a b c d ... a b c" -> the 3-gram "a b c" matched at 0: propose "d e f".
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 1, 2, 3}, o), (std::vector<int32_t>{4, 5, 6}));
  // The longest suffix wins over a later, shorter match: "1 2 3" at 0 beats the "3" at 5.
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{1, 2, 3, 5, 0, 3, 6, 1, 2, 3}, o), (std::vector<int32_t>{5, 0, 3}));
  // Only a 1-gram repeats: what followed its latest earlier occurrence.
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{2, 3, 9, 8, 7, 3}, o), (std::vector<int32_t>{9, 8, 7}));
  // The latest earlier occurrence wins: "5 1 ... 6 1 ... 1" -> what followed the second 1.
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{1, 5, 1, 6, 1}, NgramOptions{.min_n = 1, .max_n = 1, .k = 2}),
            (std::vector<int32_t>{6, 1}));
  // A draft stops at the end of the tokens.
  EXPECT_EQ(propose_ngram(std::vector<int32_t>{4, 4}, o), (std::vector<int32_t>{4}));
  // No earlier occurrence, too short, or k = 0: nothing.
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, o).empty());
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{7}, o).empty());
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{}, o).empty());
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 1, 1}, NgramOptions{.k = 0}).empty());
  // min_n above every match length: nothing, though a shorter suffix repeats.
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 2, 9, 2}, NgramOptions{.min_n = 2, .max_n = 3, .k = 2}).empty());
}

TEST(NgramProposer, MatchesTheReferenceOnRandomStreams) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    std::uniform_int_distribution<int> vocab_dist(2, 6), len_dist(0, 67), n_dist(1, 5), k_dist(1, 9);
    const int vocab = vocab_dist(rng);
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    std::vector<int32_t> t(static_cast<size_t>(len_dist(rng)));
    for (int32_t& x : t) x = token(rng);
    const int a = n_dist(rng), b = n_dist(rng);
    const NgramOptions o{.min_n = std::min(a, b), .max_n = std::max(a, b), .k = k_dist(rng)};
    ASSERT_EQ(propose_ngram(t, o), reference(t, o)) << "trial " << trial;
  }
}

// An image's content-keyed tokens (negative, engine/seq_image.h) end a proposal: they are never drafted.
TEST(NgramProposer, ImageTokensAreNeverDrafted) {
  const std::vector<int32_t> t = {1, 2, 7, -5, -9, 8, 1, 2};
  EXPECT_EQ(propose_ngram(t, NgramOptions{.min_n = 2, .max_n = 2, .k = 4}), (std::vector<int32_t>{7}));
  const std::vector<int32_t> u = {1, 2, -5, 8, 1, 2};
  EXPECT_TRUE(propose_ngram(u, NgramOptions{.min_n = 2, .max_n = 2, .k = 4}).empty());
}

}  // namespace
}  // namespace minfer
