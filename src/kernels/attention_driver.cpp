// Paged-attention driver: validates the batch and hands out spans (sequence x kv head x block of up to 16
// query tokens, and a part of the kv head's query group when there are too few spans to keep every thread
// busy) to the pool's threads through an atomic counter, so long and short sequences balance themselves.
// Long contexts are split into ranges of pages run as separate spans whose partial softmax results are merged
// afterwards (flash-decoding), so the decode of one or two long sequences still keeps every thread busy.
// A sliding window starts each span at the window of its first token, rounded down to the leaves' grid of
// online-softmax blocks: a row's blocks then lie where they would without the window, so its result still
// depends only on its own position (keys before its window are masked exactly, as causal ones are).
#include <algorithm>
#include <atomic>
#include <cmath>
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
  if (cache.head_dim <= 0 || cache.page.size() <= 0) {
    fail("paged_attention: head_dim {} and page_size {} must be positive", cache.head_dim, cache.page.size());
  }
  if (cache.code_bits() == 0) fail("paged_attention: KV cache of type {}", kv_cache_dtype_name(cache.dtype));
  if (kv_is_blocked(cache.dtype) && cache.head_dim % kKvBlockDims != 0) {
    fail("paged_attention: a {} KV cache needs head_dim a multiple of {}, got {}", kv_cache_dtype_name(cache.dtype),
         kKvBlockDims, cache.head_dim);
  }
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    const int64_t q_len = batch.q_len[s];
    const int64_t ctx = batch.context_len[s];
    if (q_len < 0 || ctx < q_len || batch.q_start[s] < 0) {
      fail("paged_attention: sequence {} has q_len {} and context_len {}", s, q_len, ctx);
    }
    // A bidirectional block may reach past the chunk's own tokens into keys the same step writes for the sequence
    // (a prompt split into one-token chunks that each sample): the page table must hold them.
    int64_t reach = ctx;
    for (int64_t t = 0; batch.key_limit && t < q_len; ++t) {
      const int64_t limit = batch.key_limit[batch.q_start[s] + t];
      const int64_t prev = t > 0 ? batch.key_limit[batch.q_start[s] + t - 1] : 0;
      if (limit < ctx - q_len + t + 1 || limit < prev) {
        fail("paged_attention: sequence {} token {} sees {} keys: fewer than its causal {} or than the token before", s,
             t, limit, ctx - q_len + t + 1);
      }
      reach = std::max(reach, limit);
    }
    if (cache.page.pages_for(reach) > batch.max_pages_per_seq) {
      fail("paged_attention: sequence {} needs {} pages of {} tokens but its page table holds {}", s,
           cache.page.pages_for(reach), cache.page.size(), batch.max_pages_per_seq);
    }
  }
}

// One unit of work: a span without its pointers (filled in by the thread that runs it).
struct Item {
  int64_t seq = 0;
  int64_t t0 = 0;  // first query token of the block, relative to the sequence's chunk
  int64_t ntok = 0;
  int64_t kv_head = 0;
  int64_t head_begin = 0, head_end = 0;
  int64_t ctx_begin = 0, ctx_end = INT64_MAX;
  int64_t partial = -1;   // offset of its partial result in the merge buffer; -1 = writes out directly
  int64_t num_parts = 1;  // on the first range of a split span: how many ranges follow (itself included)
};

// out row = sum_i exp(m_i - M) acc_i / sum_i exp(m_i - M) s_i over the ranges' partials (M = max m_i).
void merge_partials(const float* parts, int64_t num_parts, int64_t part_stride, int64_t head_dim, float* out) {
  float m = -INFINITY;
  for (int64_t i = 0; i < num_parts; ++i) m = std::max(m, parts[i * part_stride]);
  float sum = 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int64_t i = 0; i < num_parts; ++i) {
    const float* p = parts + i * part_stride;
    if (p[1] == 0.0f) continue;  // a range with no position for this row (max -inf)
    const float w = std::exp(p[0] - m);
    sum += w * p[1];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += w * p[2 + d];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

// How the batch is cut into items: parts of each kv head's query group (when there are too few spans to keep
// every thread busy), context ranges, and the grid of the leaves' online-softmax blocks.
struct SplitPlan {
  int64_t group = 0;  // query heads per kv head
  int64_t parts = 1;  // parts each group is cut into
  int64_t heads_per_part = 0;
  int64_t range_pages = 1;  // a context range: whole pages
  int64_t range_keys = 0;
  int64_t block_grid = 0;  // blocks of the leaves start at multiples of this
};

SplitPlan plan_split(int64_t heads, const KvLayerView& cache, int64_t token_blocks, int64_t threads,
                     const AttentionSplitOptions& split) {
  SplitPlan plan;
  plan.group = heads / cache.kv_heads;
  const int64_t base_items = token_blocks * cache.kv_heads;
  plan.parts = base_items >= 2 * threads ? 1 : std::min(plan.group, ceil_div(2 * threads, base_items));
  plan.heads_per_part = ceil_div(plan.group, plan.parts);
  // Contexts longer than one range are split at fixed multiples of the range, whatever the batch: a row's
  // result then depends only on its own position, so batching never changes it.
  const int64_t ps = cache.page.size();
  plan.range_pages = std::max<int64_t>(1, ceil_div(split.range_tokens, ps));
  plan.range_keys = plan.range_pages * ps;
  // Ranges and pages are powers of two of at least the leaves' block.
  plan.block_grid = std::max(kAttentionBlockKeys, ps);
  return plan;
}

// The items of the query tokens [t0, t0 + ntok) of sequence s: one per part of each kv head's group and context
// range (ranges wholly before every window of the tokens skipped). Split ranges get room in the merge buffer,
// counted in partial_floats.
void add_block_items(const SplitPlan& plan, const KvLayerView& cache, const AttentionBatch& batch,
                     const AttentionParams& params, int64_t s, int64_t t0, int64_t ntok, std::vector<Item>& items,
                     int64_t& partial_floats) {
  const int64_t q_len = batch.q_len[s];
  // Keys the block's last token reads.
  const int64_t ctx =
      batch.key_limit ? batch.key_limit[batch.q_start[s] + t0 + ntok - 1] : batch.context_len[s] - q_len + t0 + ntok;
  const int64_t ranges = ceil_div(ceil_div(ctx, cache.page.size()), plan.range_pages);
  // Keys before `start` lie outside every window of the block's tokens.
  int64_t start = 0;
  if (params.window > 0) {
    const int64_t lo = batch.context_len[s] - q_len + t0 - params.window + 1;
    start = lo > 0 ? lo / plan.block_grid * plan.block_grid : 0;
  }
  const int64_t first_range = start / plan.range_keys;
  for (int64_t g = 0; g < cache.kv_heads; ++g) {
    for (int64_t part = 0; part < plan.parts; ++part) {
      Item it;
      it.seq = s;
      it.t0 = t0;
      it.ntok = ntok;
      it.kv_head = g;
      it.head_begin = g * plan.group + part * plan.heads_per_part;
      it.head_end = std::min((g + 1) * plan.group, it.head_begin + plan.heads_per_part);
      if (it.head_begin >= it.head_end) continue;
      const int64_t part_floats = ntok * (it.head_end - it.head_begin) * (cache.head_dim + 2);
      it.ctx_begin = start;
      for (int64_t r = first_range; r < ranges; ++r) {
        it.num_parts = r == first_range ? ranges - first_range : 0;
        if (ranges - first_range > 1) {
          it.ctx_begin = std::max(start, r * plan.range_keys);
          it.ctx_end = std::min(ctx, (r + 1) * plan.range_keys);
          it.partial = partial_floats;
          partial_floats += part_floats;
        }
        items.push_back(it);
      }
    }
  }
}

// What the spans of one call point into: the queries and outputs, the batch's tables and the merge buffer.
struct SpanSource {
  const float* q;
  float* out;
  int64_t heads;
  int64_t head_dim;
  const AttentionBatch& batch;
  const AttentionParams& params;
  float* partials;

  void fill(const Item& it, AttentionSpan& span) const {
    const int64_t row = batch.q_start[it.seq] + it.t0;
    span.q = q + row * heads * head_dim;
    span.out = out + row * heads * head_dim;
    span.heads = heads;
    span.kv_head = it.kv_head;
    span.head_begin = it.head_begin;
    span.head_end = it.head_end;
    span.first_pos = batch.context_len[it.seq] - batch.q_len[it.seq] + it.t0;
    span.ntok = it.ntok;
    span.page_table = batch.page_tables + it.seq * batch.max_pages_per_seq;
    span.scale = params.scale;
    span.window = params.window;
    span.softcap = params.softcap;
    span.sinks = it.num_parts > 0 ? params.sinks : nullptr;  // the first range of a split context counts them
    span.ctx_begin = it.ctx_begin;
    span.ctx_end = it.ctx_end;
    span.partial = it.partial >= 0 ? partials + it.partial : nullptr;
    span.key_limit = batch.key_limit ? batch.key_limit + row : nullptr;
  }
};

// Runs the leaf on every item, the pool's threads claiming them from an atomic counter.
void run_items(AttentionSpanFn leaf, const KvLayerView& cache, const std::vector<Item>& items, const SpanSource& source,
               size_t scratch_floats, ThreadPool& pool) {
  const int64_t num_items = static_cast<int64_t>(items.size());
  const Item* const item_list = items.data();
  std::atomic<int64_t> next{0};
  auto body = [&]() {
    thread_local std::vector<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    // Each thread claims its next item one ahead, so the leaf can prefetch that item's first keys.
    AttentionSpan spans[2];
    int64_t i = next.fetch_add(1);
    if (i < num_items) source.fill(item_list[i], spans[0]);
    for (int cur = 0; i < num_items; cur ^= 1) {
      const int64_t j = next.fetch_add(1);
      AttentionSpan& span = spans[cur];
      span.next = nullptr;
      if (j < num_items) {
        source.fill(item_list[j], spans[cur ^ 1]);
        span.next = &spans[cur ^ 1];
      }
      leaf(cache, span, scratch.data());
      i = j;
    }
  };
  if (num_items == 1 || pool.size() == 1) {
    body();
  } else {
    pool.run([&body](int, int) { body(); });  // one captured reference: no std::function allocation
  }
}

// Merges the ranges of each split span into out (ranges of one span are consecutive items with equal layout).
void merge_split_spans(const std::vector<Item>& items, const SpanSource& source) {
  const int64_t hd = source.head_dim;
  for (const Item& it : items) {
    if (it.partial < 0 || it.num_parts == 0) continue;
    const int64_t nh = it.head_end - it.head_begin;
    const int64_t part_floats = it.ntok * nh * (hd + 2);
    const int64_t row0 = source.batch.q_start[it.seq] + it.t0;
    for (int64_t t = 0; t < it.ntok; ++t) {
      for (int64_t h = it.head_begin; h < it.head_end; ++h) {
        const int64_t r = t * nh + (h - it.head_begin);
        merge_partials(source.partials + it.partial + r * (hd + 2), it.num_parts, part_floats, hd,
                       source.out + ((row0 + t) * source.heads + h) * hd);
      }
    }
  }
}

}  // namespace

void run_paged_attention(AttentionSpanFn leaf, const float* q, float* out, int64_t heads, const KvLayerView& cache,
                         const AttentionBatch& batch, const AttentionParams& params, ThreadPool& pool,
                         const AttentionSplitOptions& split) {
  check_batch(heads, cache, batch);
  const bool rotated = kv_rotated(cache.dtype, cache.head_dim);
  if (rotated) q = rotate_queries(q, heads, cache.head_dim, batch);
  int64_t token_blocks = 0;
  for (int64_t s = 0; s < batch.num_seqs; ++s) token_blocks += ceil_div(batch.q_len[s], kAttentionMaxSpanTokens);
  if (token_blocks == 0) return;
  const SplitPlan plan = plan_split(heads, cache, token_blocks, pool.size(), split);

  thread_local std::vector<Item> items;
  thread_local std::vector<float> partials;
  items.clear();
  int64_t partial_floats = 0;
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    for (int64_t t0 = 0; t0 < batch.q_len[s]; t0 += kAttentionMaxSpanTokens) {
      const int64_t ntok = std::min(kAttentionMaxSpanTokens, batch.q_len[s] - t0);
      add_block_items(plan, cache, batch, params, s, t0, ntok, items, partial_floats);
    }
  }
  if (partials.size() < static_cast<size_t>(partial_floats)) partials.resize(static_cast<size_t>(partial_floats));
  const SpanSource source{q, out, heads, cache.head_dim, batch, params, partials.data()};
  const size_t scratch_floats =
      attention_scratch_floats(kAttentionMaxSpanTokens * plan.heads_per_part, cache.head_dim, cache.page.size());
  run_items(leaf, cache, items, source, scratch_floats, pool);
  merge_split_spans(items, source);
  if (rotated) unrotate_outputs(out, heads, cache.head_dim, batch);
}

}  // namespace minfer::kernels
