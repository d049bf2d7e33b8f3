// Paged attention and the KV-cache write: every ISA's table against the scalar paged reference and against a
// dense (unpaged, double-precision) reference on random batches: page sizes 8..256, GQA and MHA, decode steps,
// whole prompts and prompt chunks that attend to cached pages, every KV cache type (f32, bf16, f16, int8, fp8_e4m3,
// q8_0, q4_0: the kernels against the reference reading the same codes, the reference against a dense attention
// over the decoded values), and long contexts split into ranges whose partial softmax results are merged
// (flash-decoding).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <string>

#include "base/error.h"
#include "base/half.h"
#include "kernels/leaf.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::random_floats;

// Every KV cache type, and the head dims each is tested with (llama.cpp's blocks need multiples of 32).
constexpr KvCacheDtype kKvDtypes[] = {KvCacheDtype::kF32,  KvCacheDtype::kBf16,    KvCacheDtype::kF16,
                                      KvCacheDtype::kInt8, KvCacheDtype::kFp8E4m3, KvCacheDtype::kQ8_0,
                                      KvCacheDtype::kQ4_0};
std::string kv_name(KvCacheDtype d) { return kv_cache_dtype_name(d); }

struct Batch {
  int64_t heads, kv_heads, head_dim, page_size;
  KvCacheDtype dtype = KvCacheDtype::kF32;
  std::vector<uint8_t> k_codes, v_codes, k_scales, v_scales;  // the pools, as KvCache lays them out
  std::vector<float> q;
  std::vector<int32_t> q_start, q_len, context_len, page_tables;
  int64_t max_pages = 0;
  int64_t tokens = 0;
  // Per sequence, its whole context [ctx, kv_heads, head_dim] as the cache holds it (decoded): the dense
  // reference's input.
  std::vector<std::vector<float>> dense_k, dense_v;
  std::vector<int32_t> key_limit;  // per query row, or empty: causal
  KvLayerView view() {
    const bool scaled = !k_scales.empty();
    return KvLayerView{k_codes.data(),
                       v_codes.data(),
                       scaled ? k_scales.data() : nullptr,
                       scaled ? v_scales.data() : nullptr,
                       PageGeometry::of(page_size),
                       kv_heads,
                       head_dim,
                       dtype};
  }
  AttentionBatch batch() const {
    return AttentionBatch{static_cast<int64_t>(q_len.size()),
                          q_start.data(),
                          q_len.data(),
                          context_len.data(),
                          page_tables.data(),
                          max_pages,
                          key_limit.empty() ? nullptr : key_limit.data()};
  }
};

// Pools of `slots` token slots x kv heads, every value unwritten: NaN for the float types, NaN scales for the
// scaled ones (their codes are zero), so reading a slot that was never written poisons the result.
void allocate_poisoned(Batch& b, int64_t slots) {
  const int64_t hd = b.head_dim, groups = kv_scale_groups(b.dtype, hd);
  b.k_codes.assign(static_cast<size_t>(slots * hd * kv_code_bits(b.dtype) / 8 + 64), 0);
  b.k_scales.assign(static_cast<size_t>(slots * groups * kv_scale_bytes(b.dtype)), 0);
  const auto fill16 = [](std::vector<uint8_t>& pool, uint16_t bits) {
    for (size_t i = 0; i + 1 < pool.size(); i += 2) std::memcpy(pool.data() + i, &bits, 2);
  };
  const auto fill32 = [](std::vector<uint8_t>& pool) {
    const float nan = NAN;
    for (size_t i = 0; i + 3 < pool.size(); i += 4) std::memcpy(pool.data() + i, &nan, 4);
  };
  switch (b.dtype) {
    case KvCacheDtype::kF32: fill32(b.k_codes); break;
    case KvCacheDtype::kBf16: fill16(b.k_codes, f32_to_bf16(NAN)); break;
    case KvCacheDtype::kF16: fill16(b.k_codes, 0x7e00); break;
    case KvCacheDtype::kQ8_0:
    case KvCacheDtype::kQ4_0: fill16(b.k_scales, 0x7e00); break;
    default: fill32(b.k_scales); break;
  }
  b.v_codes = b.k_codes;
  b.v_scales = b.k_scales;
}

// x <- H x / sqrt(n) by the Sylvester matrix itself (H[i][j] = (-1)^popcount(i & j)), not the kernels' transform: the
// rotated types store H k and H v, so the dense reference gets the true vectors back (H H = I).
void unrotate(float* x, int64_t n) {
  std::vector<double> y(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      y[static_cast<size_t>(i)] += (std::popcount(static_cast<uint64_t>(i & j)) % 2 ? -1.0 : 1.0) * x[j];
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(y[static_cast<size_t>(i)] / std::sqrt(static_cast<double>(n)));
}

// Sequences with the given (context_len, q_len); pages assigned in a shuffled order from a pool with spare
// pages; every slot not written is poisoned (allocate_poisoned).
Batch make_batch(std::mt19937& rng, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t page_size,
                 const std::vector<std::pair<int32_t, int32_t>>& seqs, KvCacheDtype dtype = KvCacheDtype::kF32) {
  Batch b{heads, kv_heads, head_dim, page_size, dtype, {}, {}, {}, {}, {}, {}, {}, {}, {}, 0, 0, {}, {}};
  int64_t pages = 0;
  for (auto [ctx, ql] : seqs) {
    const int64_t need = (ctx + page_size - 1) / page_size;
    pages += need;
    b.max_pages = std::max(b.max_pages, need + 1);
  }
  const int64_t pool_pages = pages + 3;
  std::vector<int32_t> order(static_cast<size_t>(pool_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t row = static_cast<size_t>(kv_heads * head_dim);
  allocate_poisoned(b, pool_pages * page_size * kv_heads);
  size_t next_page = 0;
  for (auto [ctx, ql] : seqs) {
    b.q_start.push_back(static_cast<int32_t>(b.tokens));
    b.q_len.push_back(ql);
    b.context_len.push_back(ctx);
    b.tokens += ql;
    std::vector<int32_t> table(static_cast<size_t>(b.max_pages), order.back());  // spare page in unused entries
    for (int64_t j = 0; j < (ctx + page_size - 1) / page_size; ++j) table[static_cast<size_t>(j)] = order[next_page++];
    // Write the whole context (cached prefix and the new tokens) through the reference kv_write.
    std::vector<int64_t> slots(static_cast<size_t>(ctx));
    for (int64_t p = 0; p < ctx; ++p)
      slots[static_cast<size_t>(p)] = table[static_cast<size_t>(p / page_size)] * page_size + p % page_size;
    auto k = random_floats(rng, static_cast<size_t>(ctx) * row);
    auto v = random_floats(rng, static_cast<size_t>(ctx) * row);
    ref::kv_write(b.view(), k.data(), v.data(), slots.data(), ctx);
    for (int64_t p = 0; p < ctx; ++p) {
      const int64_t page = slots[static_cast<size_t>(p)] / page_size, t = p % page_size;
      for (int64_t g = 0; g < kv_heads; ++g) {
        for (int64_t d = 0; d < head_dim; ++d) {
          const auto i = static_cast<size_t>(p) * row + static_cast<size_t>(g * head_dim + d);
          k[i] = ref::kv_key_at(b.view(), page, g, t, d);
          v[i] = ref::kv_value_at(b.view(), page, g, t, d);
        }
        if (kv_rotated(dtype, head_dim)) {
          unrotate(k.data() + static_cast<size_t>(p) * row + static_cast<size_t>(g * head_dim), head_dim);
          unrotate(v.data() + static_cast<size_t>(p) * row + static_cast<size_t>(g * head_dim), head_dim);
        }
      }
    }
    b.dense_k.push_back(std::move(k));
    b.dense_v.push_back(std::move(v));
    b.page_tables.insert(b.page_tables.end(), table.begin(), table.end());
  }
  b.q = random_floats(rng, static_cast<size_t>(b.tokens * heads * head_dim), -2.0f, 2.0f);
  return b;
}

// Attention computed densely from each sequence's contiguous K/V, in double: no pages, no online softmax.
std::vector<float> dense_attention(const Batch& b, const AttentionParams& params) {
  std::vector<float> out(b.q.size(), NAN);
  const int64_t hd = b.head_dim, group = b.heads / b.kv_heads, row = b.kv_heads * hd;
  for (size_t s = 0; s < b.q_len.size(); ++s) {
    const std::vector<float>& k = b.dense_k[s];
    const std::vector<float>& v = b.dense_v[s];
    for (int64_t t = 0; t < b.q_len[s]; ++t) {
      const int64_t pos = b.context_len[s] - b.q_len[s] + t;
      for (int64_t h = 0; h < b.heads; ++h) {
        const float* qv = b.q.data() + ((b.q_start[s] + t) * b.heads + h) * hd;
        const int64_t g = h / group;
        const int64_t lo = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
        const int64_t end = b.key_limit.empty() ? pos + 1 : b.key_limit[static_cast<size_t>(b.q_start[s] + t)];
        std::vector<double> w(static_cast<size_t>(end), -INFINITY);
        // A sink: one more logit in the softmax, with no value.
        const double sink = params.sinks ? params.sinks[h] : -INFINITY;
        double mx = sink;
        for (int64_t j = lo; j < end; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double(qv[d]) * k[static_cast<size_t>(j * row + g * hd + d)];
          double score = dot * params.scale;
          if (params.softcap > 0) score = params.softcap * std::tanh(score / params.softcap);
          w[static_cast<size_t>(j)] = score;
          mx = std::max(mx, score);
        }
        double sum = params.sinks ? std::exp(sink - mx) : 0.0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        float* o = out.data() + ((b.q_start[s] + t) * b.heads + h) * hd;
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < end; ++j)
            acc += w[static_cast<size_t>(j)] * v[static_cast<size_t>(j * row + g * hd + d)];
          o[d] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

// The leaf sets this CPU runs, for driving run_paged_attention directly with forced context splits.
std::vector<const LeafKernels*> available_leaves() {
  std::vector<const LeafKernels*> out = {&kRefLeaves};
  if (kernel_table(Isa::kAvx2)) out.push_back(&kAvx2Leaves);
  if (kernel_table(Isa::kAvx512)) out.push_back(&kAvx512Leaves);
  return out;
}

void check_all_tables(Batch& b, const std::string& what, AttentionParams params = {}) {
  params.scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  const AttentionParams scale = params;
  std::vector<float> want(b.q.size(), NAN);
  ref::paged_attention(b.q.data(), want.data(), b.heads, b.view(), b.batch(), scale);
  for (float w : want) ASSERT_FALSE(std::isnan(w)) << what << ": reference read an unwritten slot";
  const std::vector<float> dense = dense_attention(b, scale);
  expect_close(want, dense, 1e-5f, 2e-6f, "paged reference vs dense " + what);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const KernelTable* t : available_tables()) {
      std::vector<float> out(b.q.size(), NAN);
      t->paged_attention(b.q.data(), out.data(), b.heads, b.view(), b.batch(), scale, pool);
      expect_close(out, want, 1e-5f, 2e-6f, std::string(t->name) + " " + what + " threads " + std::to_string(threads));
      expect_close(out, dense, 2e-5f, 4e-6f,
                   std::string(t->name) + " vs dense " + what + " threads " + std::to_string(threads));
    }
  }
  // Every context split into ranges of one page (or 3 pages), partial results merged.
  ThreadPool pool(2);
  for (const LeafKernels* leaf : available_leaves()) {
    for (int64_t range_pages : {1, 3}) {
      AttentionSplitOptions opt;
      opt.range_tokens = range_pages * b.page_size;
      std::vector<float> out(b.q.size(), NAN);
      run_paged_attention(leaf->attention_span, b.q.data(), out.data(), b.heads, b.view(), b.batch(), scale, pool, opt);
      expect_close(out, dense, 2e-5f, 4e-6f,
                   std::string(leaf->name) + " ranges of " + std::to_string(range_pages) + " pages vs dense " + what);
    }
  }
}

TEST(KernelsAttention, RandomBatchesMatchReference) {
  std::mt19937 rng(11);
  const std::tuple<int64_t, int64_t> groupings[] = {{8, 4}, {14, 2}, {4, 4}, {9, 3}};  // GQA, GQA 7:1, MHA, 3:1
  for (size_t di = 0; di < std::size(kKvDtypes); ++di) {
    const KvCacheDtype dtype = kKvDtypes[di];
    const bool full = dtype == KvCacheDtype::kF32 || dtype == KvCacheDtype::kBf16;
    for (size_t gi = 0; gi < std::size(groupings); ++gi) {
      const auto [heads, kv_heads] = groupings[gi];
      // The other types (at a runtime the sanitizer build can afford): 3:1 and one more grouping each, on every
      // other page size, alternating with the kv heads' parity, so each type still meets every page size.
      if (!full && gi != 3 && gi != di % 3) continue;
      const bool blocked = kv_is_blocked(dtype);
      const int64_t head_dims[] = {blocked ? 32 : 8, 64, blocked ? 96 : 72, 128};
      int config = 0, page_index = 0;
      for (int64_t page_size : {8, 16, 32, 64, 128, 256}) {
        if (!full && (page_index++ + kv_heads) % 2 == 1) continue;
        // Every head dim with every grouping and dtype, over the page sizes (the full cross product is slow).
        for (int64_t head_dim : {head_dims[config++ % 4], head_dims[(config + 1) % 4]}) {
          std::uniform_int_distribution<int32_t> ctx_dist(1, page_size >= 64 ? 600 : 150);
          std::vector<std::pair<int32_t, int32_t>> seqs;
          const int n = 1 + static_cast<int>(rng() % 4);
          for (int s = 0; s < n; ++s) {
            const int32_t ctx = ctx_dist(rng);
            const int kind = static_cast<int>(rng() % 3);  // decode, whole prompt, chunk after a cached prefix
            const int32_t ql = kind == 0   ? 1
                               : kind == 1 ? std::min(ctx, 24)
                                           : 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min(ctx, 24)));
            seqs.emplace_back(ctx, ql);
          }
          Batch b = make_batch(rng, heads, kv_heads, head_dim, page_size, seqs, dtype);
          check_all_tables(b, kv_name(dtype) + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) +
                                  " head_dim " + std::to_string(head_dim) + " page " + std::to_string(page_size));
        }
      }
    }
  }
}

TEST(KernelsAttention, LongContextDecodeAndEmptySequences) {
  // A float type, a token-scaled one and a blocked one (the random batches cover the others' code paths).
  for (KvCacheDtype dtype : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3, KvCacheDtype::kQ4_0}) {
    std::mt19937 rng(12);
    // A decode step over 3000 cached tokens (many pages: the online softmax rescales often), next to a
    // sequence with nothing to compute this step and a 40-token chunk over a 100-token prefix.
    Batch b = make_batch(rng, 14, 2, 64, 16, {{3000, 1}, {5, 0}, {140, 40}}, dtype);
    check_all_tables(b, kv_name(dtype) + " long context");
  }
}

// Sliding windows (shorter and longer than a page, a softmax block and a split range) and soft-capped scores
// against the dense reference; the pages wholly before the blocks a sequence's window needs are replaced by an
// unwritten (NaN) page, as freed pages would be, so a kernel that reads them fails.
TEST(KernelsAttention, SlidingWindowAndSoftcapMatchDense) {
  std::mt19937 rng(15);
  int config = 0;
  for (KvCacheDtype dtype : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kQ8_0, KvCacheDtype::kInt8}) {
    for (int64_t page_size : {8, 16, 64, 256}) {
      // The quantized types on two page sizes (a vector-narrow one and a long one): their scales, not the windows,
      // are what they add.
      if (kv_code_bits(dtype) <= 8 && page_size != 8 && page_size != 256) continue;
      for (int64_t window : {1, 7, 100, 128, 300, 700}) {
        const float softcap = config++ % 2 == 0 ? 0.0f : 1.5f;
        std::vector<std::pair<int32_t, int32_t>> seqs = {{900, 1}, {620, 24}, {5, 5}, {300, 17}};
        Batch b = make_batch(rng, 8, 2, 64, page_size, seqs, dtype);
        const int64_t grid = std::max<int64_t>(kAttentionBlockKeys, page_size);
        for (size_t s = 0; s < seqs.size(); ++s) {
          int32_t* table = b.page_tables.data() + static_cast<int64_t>(s) * b.max_pages;
          const int64_t lo = std::max<int64_t>(0, seqs[s].first - seqs[s].second - window + 1);
          for (int64_t j = 0; (j + 1) * page_size <= lo / grid * grid; ++j) table[j] = table[b.max_pages - 1];
        }
        check_all_tables(b,
                         kv_name(dtype) + " page " + std::to_string(page_size) + " window " + std::to_string(window) +
                             " softcap " + std::to_string(softcap),
                         {.window = window, .softcap = softcap});
      }
    }
  }
}

// Bidirectional blocks (an image's tokens, a vision encoder's patches): rows see keys up to their block's end
// (key_limit) instead of their own position, with windows, across split ranges and in every KV type.
TEST(KernelsAttention, BidirectionalBlocksMatchDense) {
  std::mt19937 rng(16);
  for (KvCacheDtype dtype : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kQ8_0, KvCacheDtype::kInt8}) {
    for (int64_t page_size : {8, 64}) {
      // An encoder's image (every row sees all 300 keys), a chunk holding an image block in the middle of text, a
      // chunk that is one image after a cached prefix, and a decode row.
      const std::vector<std::pair<int32_t, int32_t>> seqs = {{300, 300}, {200, 90}, {150, 40}, {77, 1}};
      Batch b = make_batch(rng, 8, 2, 64, page_size, seqs, dtype);
      for (size_t s = 0; s < seqs.size(); ++s) {
        const auto [ctx, ql] = seqs[s];
        for (int32_t t = 0; t < ql; ++t) {
          const int32_t pos = ctx - ql + t;
          int32_t limit = pos + 1;
          if (s == 0) limit = ctx;                             // the whole image
          if (s == 1 && pos >= 130 && pos < 181) limit = 181;  // an image at [130, 181) of the chunk
          if (s == 2) limit = ctx;                             // the chunk is one image
          b.key_limit.push_back(limit);
        }
      }
      for (int64_t window : {0, 50}) {
        check_all_tables(
            b,
            kv_name(dtype) + " bidirectional page " + std::to_string(page_size) + " window " + std::to_string(window),
            {.window = window});
      }
    }
  }
}

// A row's result does not depend on the batch: the same decode row alone, next to other sequences, and as
// the last row of a prefill chunk (all over a context that is split into ranges) is bit for bit the same, with
// and without a sliding window.
void split_context_rows_are_batch_invariant(const AttentionParams& params) {
  std::mt19937 rng(14);
  // Sequence 0: a 1500-token context whose last token decodes; 1: the same K/V, its last 20 tokens as a chunk.
  Batch b = make_batch(rng, 14, 2, 64, 16, {{1500, 1}, {1500, 20}, {300, 1}});
  const std::vector<float> dense = dense_attention(b, params);
  for (const LeafKernels* leaf : available_leaves()) {
    // Sequence 1 reads sequence 0's pages and K/V; its last query row is sequence 0's.
    Batch c = b;
    std::copy(c.page_tables.begin(), c.page_tables.begin() + c.max_pages, c.page_tables.begin() + c.max_pages);
    const int64_t row = b.heads * b.head_dim;
    std::copy(c.q.begin(), c.q.begin() + row, c.q.begin() + (c.q_start[1] + 19) * row);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> batched(c.q.size(), NAN);
      run_paged_attention(leaf->attention_span, c.q.data(), batched.data(), c.heads, c.view(), c.batch(), params, pool);
      Batch alone = c;
      alone.q_start = {0};
      alone.q_len = {1};
      alone.context_len = {1500};
      std::vector<float> lone(static_cast<size_t>(row), NAN);
      run_paged_attention(leaf->attention_span, c.q.data(), lone.data(), c.heads, alone.view(), alone.batch(), params,
                          pool);
      for (int64_t i = 0; i < row; ++i) {
        ASSERT_EQ(batched[static_cast<size_t>(i)], lone[static_cast<size_t>(i)]) << leaf->name << " element " << i;
        ASSERT_EQ(batched[static_cast<size_t>((c.q_start[1] + 19) * row + i)], lone[static_cast<size_t>(i)])
            << leaf->name << " prefill row, element " << i;
      }
      std::vector<float> first(dense.begin(), dense.begin() + row);
      expect_close(lone, first, 2e-5f, 4e-6f, std::string(leaf->name) + " split decode vs dense");
    }
  }
}

// Attention sinks (gpt-oss): one logit per query head in every row's softmax, against the dense reference, with
// windows (rows whose window holds few keys, where the sink dominates), long split contexts and both KV dtypes.
// Sinks from -3 to 6: below, near and above the scores (|q k| / sqrt(64) ~ 1).
TEST(KernelsAttention, SinksMatchDense) {
  std::mt19937 rng(16);
  for (KvCacheDtype dtype : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3, KvCacheDtype::kQ4_0}) {
    for (int64_t window : {0, 5, 128}) {
      Batch b = make_batch(rng, 8, 2, 64, 16, {{1300, 1}, {200, 30}, {7, 7}}, dtype);
      const std::vector<float> sinks = random_floats(rng, 8, -3.0f, 6.0f);
      check_all_tables(b, kv_name(dtype) + " sinks window " + std::to_string(window),
                       {.window = window, .sinks = sinks.data()});
    }
  }
}

constexpr float kSinks14[14] = {0.5f, -1.0f, 2.0f, 3.5f,  0.0f, 1.0f, -2.0f,
                                4.0f, 0.25f, 1.5f, -0.5f, 2.5f, 3.0f, -3.0f};

TEST(KernelsAttention, SplitContextRowsAreBatchInvariant) {
  for (const AttentionParams params :
       {AttentionParams{.scale = 0.125f}, AttentionParams{.scale = 0.125f, .window = 700, .softcap = 3.0f},
        AttentionParams{.scale = 0.125f, .sinks = kSinks14}}) {
    split_context_rows_are_batch_invariant(params);
  }
}

TEST(KernelsAttention, KvWriteRoundsToBf16) {
  const int64_t kv_heads = 1, head_dim = 4, page_size = 8;
  std::vector<uint16_t> kp(static_cast<size_t>(2 * page_size * head_dim), 0), vp = kp;
  const KvLayerView view{kp.data(), vp.data(),          nullptr, nullptr, PageGeometry::of(page_size), kv_heads,
                         head_dim,  KvCacheDtype::kBf16};
  const std::vector<float> k = {1.0f, 1.00390625f, -3.3f, 65504.0f}, v = {0.1f, -0.2f, 0.3f, 1e-3f};
  const std::vector<int64_t> slots = {9};  // page 1, place 1
  for (const KernelTable* t : available_tables()) {
    t->kv_write(view, k.data(), v.data(), slots.data(), 1);
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(kp[static_cast<size_t>(32 + d * 8 + 1)], f32_to_bf16(k[static_cast<size_t>(d)])) << t->name;
      EXPECT_EQ(vp[static_cast<size_t>(32 + 1 * 4 + d)], f32_to_bf16(v[static_cast<size_t>(d)])) << t->name;
    }
  }
}

// The page layout, element by element: per page and kv head a block of page_size x head_dim, keys transposed
// (element d of the page's key t at d * page_size + t), values row by row (t * head_dim + d).
TEST(KernelsAttention, KvWriteLaysOutPagesByHead) {
  const int64_t kv_heads = 2, head_dim = 3, page_size = 4, pages = 2;
  std::vector<float> kp(static_cast<size_t>(pages * page_size * kv_heads * head_dim), 0.0f);
  std::vector<float> vp = kp;
  const KvLayerView view{kp.data(), vp.data(), nullptr, nullptr, PageGeometry::of(page_size), kv_heads, head_dim};
  std::vector<float> k(3 * 6), v(3 * 6);  // 3 tokens x 2 heads x 3
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 100.0f);
  const std::vector<int64_t> slots = {5, -1, 0};  // token 0 -> page 1 place 1; token 1 skipped; token 2 -> page 0
  for (const KernelTable* t : available_tables()) {
    std::fill(kp.begin(), kp.end(), 0.0f);
    std::fill(vp.begin(), vp.end(), 0.0f);
    t->kv_write(view, k.data(), v.data(), slots.data(), 3);
    for (int64_t g = 0; g < kv_heads; ++g) {
      for (int64_t d = 0; d < head_dim; ++d) {
        const auto src = static_cast<size_t>(g * head_dim + d);
        EXPECT_EQ(kp[static_cast<size_t>(view.head_block(1, g) + d * page_size + 1)], k[src]) << t->name;
        EXPECT_EQ(vp[static_cast<size_t>(view.head_block(1, g) + 1 * head_dim + d)], v[src]) << t->name;
        EXPECT_EQ(kp[static_cast<size_t>(view.head_block(0, g) + d * page_size + 0)], k[12 + src]) << t->name;
        EXPECT_EQ(vp[static_cast<size_t>(view.head_block(0, g) + d)], v[12 + src]) << t->name;
      }
    }
    EXPECT_EQ(view.head_block(1, 1), 36);
    EXPECT_EQ(std::count(kp.begin(), kp.end(), 0.0f), static_cast<long>(kp.size()) - 12) << t->name;
    EXPECT_EQ(std::count(vp.begin(), vp.end(), 0.0f), static_cast<long>(vp.size()) - 12) << t->name;
  }
}

TEST(KernelsAttention, RejectsInconsistentBatches) {
  std::mt19937 rng(13);
  Batch b = make_batch(rng, 4, 4, 8, 8, {{20, 5}});
  ThreadPool pool(1);
  std::vector<float> out(b.q.size());
  b.context_len[0] = 3;  // fewer than q_len
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 4, b.view(), b.batch(), {1.0f}, pool), Error);
  b.context_len[0] = 1000;  // more pages than the page table holds
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 4, b.view(), b.batch(), {1.0f}, pool), Error);
  b.context_len[0] = 20;
  EXPECT_THROW(paged_attention(b.q.data(), out.data(), 6, b.view(), b.batch(), {1.0f}, pool), Error);  // 6 % 4
}

// Unmasked attention as GEMMs (a vision encoder's patches): awkward row counts (fewer and more than a query block),
// head widths that are not a vector's multiple, against softmax(q k^T) v in double.
TEST(KernelsAttention, EncoderAttentionMatchesDense) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  for (auto [n, heads, hd] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 8}, {37, 3, 16}, {600, 2, 72}}) {
    const int64_t w = heads * hd;
    const auto q = random_floats(rng, static_cast<size_t>(n * w), -2.0f, 2.0f);
    const auto k = random_floats(rng, static_cast<size_t>(n * w));
    const auto v = random_floats(rng, static_cast<size_t>(n * w));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> out(q.size(), NAN), want(q.size());
    encoder_attention(q.data(), k.data(), v.data(), out.data(), n, heads, hd, scale, pool);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> p(static_cast<size_t>(n));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += double(q[static_cast<size_t>(i * w + h * hd + d)]) * k[static_cast<size_t>(j * w + h * hd + d)];
          p[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) acc += p[static_cast<size_t>(j)] * v[static_cast<size_t>(j * w + h * hd + d)];
          want[static_cast<size_t>(i * w + h * hd + d)] = static_cast<float>(acc / sum);
        }
      }
    expect_close(out, want, 2e-5f, 4e-6f, "encoder attention n " + std::to_string(n));
  }
}

}  // namespace
}  // namespace minfer::kernels
