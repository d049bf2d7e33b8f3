// Paged attention and the KV-cache write: every ISA's table against the scalar reference on random batches
// (page sizes, GQA groupings, decode steps, whole prompts and prompt chunks that attend to cached pages).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "base/error.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::random_floats;

struct Batch {
  int64_t heads, kv_heads, head_dim, page_size;
  std::vector<float> k_pool, v_pool, q;
  std::vector<int32_t> q_start, q_len, context_len, block_tables;
  int64_t max_blocks = 0;
  int64_t tokens = 0;
  KvLayerView view() { return KvLayerView{k_pool.data(), v_pool.data(), page_size, kv_heads, head_dim}; }
  AttentionBatch batch() const {
    return AttentionBatch{static_cast<int64_t>(q_len.size()),
                          q_start.data(),
                          q_len.data(),
                          context_len.data(),
                          block_tables.data(),
                          max_blocks};
  }
};

// Sequences with the given (context_len, q_len); pages assigned in a shuffled order from a pool with spare
// pages; every slot not written holds NaN, so reading past a sequence's context poisons the result.
Batch make_batch(std::mt19937& rng, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t page_size,
                 const std::vector<std::pair<int32_t, int32_t>>& seqs) {
  Batch b{heads, kv_heads, head_dim, page_size, {}, {}, {}, {}, {}, {}, {}};
  int64_t pages = 0;
  for (auto [ctx, ql] : seqs) {
    const int64_t need = (ctx + page_size - 1) / page_size;
    pages += need;
    b.max_blocks = std::max(b.max_blocks, need + 1);
  }
  const int64_t pool_pages = pages + 3;
  std::vector<int32_t> order(static_cast<size_t>(pool_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t row = static_cast<size_t>(kv_heads * head_dim);
  b.k_pool.assign(static_cast<size_t>(pool_pages * page_size) * row, NAN);
  b.v_pool = b.k_pool;
  size_t next_page = 0;
  for (auto [ctx, ql] : seqs) {
    b.q_start.push_back(static_cast<int32_t>(b.tokens));
    b.q_len.push_back(ql);
    b.context_len.push_back(ctx);
    b.tokens += ql;
    std::vector<int32_t> table(static_cast<size_t>(b.max_blocks), order.back());  // spare page in unused entries
    for (int64_t j = 0; j < (ctx + page_size - 1) / page_size; ++j) table[static_cast<size_t>(j)] = order[next_page++];
    // Write the whole context (cached prefix and the new tokens) through the reference kv_write.
    std::vector<int64_t> slots(static_cast<size_t>(ctx));
    for (int64_t p = 0; p < ctx; ++p)
      slots[static_cast<size_t>(p)] = table[static_cast<size_t>(p / page_size)] * page_size + p % page_size;
    const auto k = random_floats(rng, static_cast<size_t>(ctx) * row);
    const auto v = random_floats(rng, static_cast<size_t>(ctx) * row);
    ref::kv_write(b.view(), k.data(), v.data(), slots.data(), ctx);
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
  }
  b.q = random_floats(rng, static_cast<size_t>(b.tokens * heads * head_dim), -2.0f, 2.0f);
  return b;
}

void check_all_tables(Batch& b, const std::string& what) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  std::vector<float> want(b.q.size(), NAN);
  ref::paged_attention(b.q.data(), want.data(), b.heads, b.view(), b.batch(), scale);
  for (float w : want) ASSERT_FALSE(std::isnan(w)) << what << ": reference read an unwritten slot";
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const KernelTable* t : available_tables()) {
      std::vector<float> out(b.q.size(), NAN);
      t->paged_attention(b.q.data(), out.data(), b.heads, b.view(), b.batch(), scale, pool);
      expect_close(out, want, 1e-5f, 2e-6f, std::string(t->name) + " " + what + " threads " + std::to_string(threads));
    }
  }
}

TEST(KernelsAttention, RandomBatchesMatchReference) {
  std::mt19937 rng(11);
  const std::tuple<int64_t, int64_t> groupings[] = {{8, 4}, {14, 2}, {4, 4}};
  for (auto [heads, kv_heads] : groupings) {
    for (int64_t head_dim : {8, 64, 72, 128}) {
      for (int64_t page_size : {8, 16, 32}) {
        std::uniform_int_distribution<int32_t> ctx_dist(1, 150);
        std::vector<std::pair<int32_t, int32_t>> seqs;
        const int n = 1 + static_cast<int>(rng() % 4);
        for (int s = 0; s < n; ++s) {
          const int32_t ctx = ctx_dist(rng);
          const int kind = static_cast<int>(rng() % 3);  // decode, whole prompt, chunk after a cached prefix
          const int32_t ql = kind == 0   ? 1
                             : kind == 1 ? ctx
                                         : 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(ctx));
          seqs.emplace_back(ctx, ql);
        }
        Batch b = make_batch(rng, heads, kv_heads, head_dim, page_size, seqs);
        check_all_tables(b, "heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) + " head_dim " +
                                std::to_string(head_dim) + " page " + std::to_string(page_size));
      }
    }
  }
}

TEST(KernelsAttention, LongContextDecodeAndEmptySequences) {
  std::mt19937 rng(12);
  // A decode step over 3000 cached tokens (many pages: the online softmax rescales often), next to a
  // sequence with nothing to compute this step and a 40-token chunk over a 100-token prefix.
  Batch b = make_batch(rng, 14, 2, 64, 16, {{3000, 1}, {5, 0}, {140, 40}});
  check_all_tables(b, "long context");
}

TEST(KernelsAttention, KvWriteSkipsNegativeSlots) {
  const int64_t kv_heads = 2, head_dim = 3, page_size = 4, pages = 2;
  std::vector<float> kp(static_cast<size_t>(pages * page_size * kv_heads * head_dim), 0.0f);
  std::vector<float> vp = kp;
  const KvLayerView view{kp.data(), vp.data(), page_size, kv_heads, head_dim};
  std::vector<float> k(3 * 6), v(3 * 6);
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 100.0f);
  const std::vector<int64_t> slots = {5, -1, 0};
  for (const KernelTable* t : available_tables()) {
    std::fill(kp.begin(), kp.end(), 0.0f);
    std::fill(vp.begin(), vp.end(), 0.0f);
    t->kv_write(view, k.data(), v.data(), slots.data(), 3);
    for (int d = 0; d < 6; ++d) {
      EXPECT_EQ(kp[static_cast<size_t>(5 * 6 + d)], k[static_cast<size_t>(d)]);
      EXPECT_EQ(vp[static_cast<size_t>(5 * 6 + d)], v[static_cast<size_t>(d)]);
      EXPECT_EQ(kp[static_cast<size_t>(d)], k[static_cast<size_t>(12 + d)]);
    }
    EXPECT_EQ(std::count(kp.begin(), kp.end(), 0.0f), static_cast<long>(kp.size()) - 12) << t->name;
  }
}

TEST(KernelsAttention, RejectsInconsistentBatches) {
  std::mt19937 rng(13);
  Batch b = make_batch(rng, 4, 4, 8, 8, {{20, 5}});
  ThreadPool pool(1);
  std::vector<float> out(b.q.size());
  b.context_len[0] = 3;  // fewer than q_len
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 4, b.view(), b.batch(), 1.0f, pool), Error);
  b.context_len[0] = 1000;  // more pages than the block table holds
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 4, b.view(), b.batch(), 1.0f, pool), Error);
  b.context_len[0] = 20;
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 6, b.view(), b.batch(), 1.0f, pool), Error);  // 6 % 4
}

}  // namespace
}  // namespace minfer::kernels
