#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/thread_pool.h"

namespace minfer {
namespace {

TEST(ThreadPool, RunsEveryIndexOnce) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(3);
    pool.run([&](int i, int n) {
      EXPECT_EQ(n, 3);
      hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ParallelForCoversRangeExactly) {
  ThreadPool pool(2);
  for (size_t n : {0ul, 1ul, 7ul, 64ul, 1001ul}) {
    std::vector<std::atomic<int>> seen(n);
    pool.parallel_for(n, 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) seen[i]++;
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int i, int) {
    if (i == 1) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  int ran = 0;
  pool.run([&](int i, int) {
    if (i == 0) ++ran;
  });
  EXPECT_EQ(ran, 1);
}

// `share` jobs claim work from a counter; interleaved with `run` jobs (which must still run every index exactly
// once), every item is done exactly once, whichever workers join and however late.
TEST(ThreadPool, SharedJobsInterleavedWithRuns) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 300; ++round) {
      const size_t n = static_cast<size_t>(round % 37);
      std::vector<std::atomic<int>> done(n);
      std::atomic<size_t> next{0};
      pool.share([&] {
        for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) done[i]++;
      });
      for (auto& d : done) ASSERT_EQ(d.load(), 1);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(threads));
      pool.run([&](int i, int) { hits[static_cast<size_t>(i)]++; });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, SharedJobPropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.share([] { throw std::runtime_error("boom"); }), std::runtime_error);
  std::atomic<int> ran{0};
  std::atomic<bool> claimed{false};
  pool.share([&] {
    if (!claimed.exchange(true)) ++ran;
  });
  EXPECT_EQ(ran.load(), 1);
}

TEST(SplitRange, AlignedToGrain) {
  auto [b0, e0] = split_range(100, 16, 0, 2);
  auto [b1, e1] = split_range(100, 16, 1, 2);
  EXPECT_EQ(b0, 0u);
  EXPECT_EQ(e0 % 16, 0u);
  EXPECT_EQ(e0, b1);
  EXPECT_EQ(e1, 100u);
}

// Guided chunks cover [0, n) exactly once, each a multiple of the grain but the last, and shrink: one thread
// claiming alone sees remaining / threads each time; four threads claiming at once still cover every item once.
TEST(GuidedChunks, CoverTheRangeOnceInShrinkingChunks) {
  GuidedChunks alone(1000, 64, 2);
  std::vector<std::pair<size_t, size_t>> got;
  for (auto c = alone.claim(); c.first < c.second; c = alone.claim()) got.push_back(c);
  const std::vector<std::pair<size_t, size_t>> want = {{0, 448},   {448, 704}, {704, 832},
                                                       {832, 896}, {896, 960}, {960, 1000}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(alone.claim(), std::make_pair(size_t{1000}, size_t{1000}));

  for (size_t n : {size_t{1}, size_t{63}, size_t{9728}, size_t{151936}}) {
    GuidedChunks shared(n, 16, 4);
    std::vector<std::atomic<int>> hits(n);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (auto [b, e] = shared.claim(); b < e; std::tie(b, e) = shared.claim()) {
          EXPECT_TRUE((e - b) % 16 == 0 || e == n) << b << " " << e;
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " item " << i;
  }
}

}  // namespace
}  // namespace minfer
