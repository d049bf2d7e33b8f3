// Paged-attention driver: validates the batch and hands out spans (sequence x kv head x block of up to 16
// query tokens, and a part of the kv head's query group when there are too few spans to keep every thread
// busy) to the pool's threads through an atomic counter, so long and short sequences balance themselves.
#include <algorithm>
#include <atomic>
#include <vector>

#include "base/error.h"
#include "kernels/leaf.h"

namespace minfer::kernels {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_batch(int64_t heads, const KvLayerView& cache, const AttentionBatch& batch) {
  if (cache.kv_heads <= 0 || heads <= 0 || heads % cache.kv_heads != 0) {
    fail("paged_attention: {} query heads cannot be grouped over {} kv heads", heads, cache.kv_heads);
  }
  if (cache.head_dim <= 0 || cache.page_size <= 0) {
    fail("paged_attention: head_dim {} and page_size {} must be positive", cache.head_dim, cache.page_size);
  }
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    const int64_t q_len = batch.q_len[s];
    const int64_t ctx = batch.context_len[s];
    if (q_len < 0 || ctx < q_len || batch.q_start[s] < 0) {
      fail("paged_attention: sequence {} has q_len {} and context_len {}", s, q_len, ctx);
    }
    if (ceil_div(ctx, cache.page_size) > batch.max_blocks_per_seq) {
      fail("paged_attention: sequence {} needs {} pages of {} tokens but its block table holds {}", s,
           ceil_div(ctx, cache.page_size), cache.page_size, batch.max_blocks_per_seq);
    }
  }
}

}  // namespace

void run_paged_attention(AttentionSpanFn leaf, const float* q, float* out, int64_t heads, const KvLayerView& cache,
                         const AttentionBatch& batch, float scale, ThreadPool& pool) {
  check_batch(heads, cache, batch);
  const int64_t group = heads / cache.kv_heads;
  const int64_t hd = cache.head_dim;
  int64_t token_blocks = 0;
  for (int64_t s = 0; s < batch.num_seqs; ++s) token_blocks += ceil_div(batch.q_len[s], kAttentionMaxSpanTokens);
  if (token_blocks == 0) return;
  const int64_t threads = pool.size();
  const int64_t base_items = token_blocks * cache.kv_heads;
  const int64_t parts = base_items >= 2 * threads ? 1 : std::min(group, ceil_div(2 * threads, base_items));
  const int64_t heads_per_part = ceil_div(group, parts);
  const int64_t items = base_items * parts;
  std::atomic<int64_t> next{0};

  auto body = [&]() {
    thread_local std::vector<float> scratch;
    const size_t need = attention_scratch_floats(kAttentionMaxSpanTokens * heads_per_part, hd, cache.page_size);
    if (scratch.size() < need) scratch.resize(need);
    // Items are taken in increasing order, so the sequence cursor only moves forward.
    int64_t seq = 0;
    int64_t seq_first_block = 0;  // global index of the first token block of `seq`
    for (int64_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) {
      const int64_t part = item % parts;
      const int64_t g = (item / parts) % cache.kv_heads;
      const int64_t block = item / (parts * cache.kv_heads);
      while (block >= seq_first_block + ceil_div(batch.q_len[seq], kAttentionMaxSpanTokens)) {
        seq_first_block += ceil_div(batch.q_len[seq], kAttentionMaxSpanTokens);
        ++seq;
      }
      const int64_t t0 = (block - seq_first_block) * kAttentionMaxSpanTokens;
      const int64_t q_len = batch.q_len[seq];
      AttentionSpan span;
      const int64_t row = batch.q_start[seq] + t0;
      span.q = q + row * heads * hd;
      span.out = out + row * heads * hd;
      span.heads = heads;
      span.kv_head = g;
      span.head_begin = g * group + part * heads_per_part;
      span.head_end = std::min((g + 1) * group, span.head_begin + heads_per_part);
      if (span.head_begin >= span.head_end) continue;
      span.first_pos = batch.context_len[seq] - q_len + t0;
      span.ntok = std::min(kAttentionMaxSpanTokens, q_len - t0);
      span.block_table = batch.block_tables + seq * batch.max_blocks_per_seq;
      span.scale = scale;
      leaf(cache, span, scratch.data());
    }
  };
  if (items == 1 || threads == 1) {
    body();
  } else {
    pool.run([&body](int, int) { body(); });  // one captured reference: no std::function allocation
  }
}

}  // namespace minfer::kernels
