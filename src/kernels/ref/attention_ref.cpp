// Reference paged attention: for each (token, head) all scores over the context (or the span's range of it),
// then a two-pass softmax and the weighted sum of values; every KV type, each value decoded on its own
// (kv_codes_ref.cpp), in the page layout of KvLayerView.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/leaf.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

void attention_span(const KvLayerView& cache, const AttentionSpan& span, float* /*scratch*/) {
  const int64_t hd = cache.head_dim;
  const int64_t ps = cache.page.size();
  const int64_t nh = span.head_end - span.head_begin;
  std::vector<float> scores(static_cast<size_t>(seen_end(span, span.ntok - 1)));
  std::vector<float> acc(static_cast<size_t>(hd));
  for (int64_t t = 0; t < span.ntok; ++t) {
    // Keys [begin, end): the token's causal context (its window of it), cut to the span's range.
    const int64_t begin = std::max(span.ctx_begin, window_start(span, t));
    const int64_t end = std::min(seen_end(span, t), span.ctx_end);
    for (int64_t h = span.head_begin; h < span.head_end; ++h) {
      const float* qv = span.q + (t * span.heads + h) * hd;
      // A sink starts the softmax as a key scored sinks[h] whose value is zero.
      float mx = span.sinks ? span.sinks[h] : -INFINITY;
      for (int64_t j = begin; j < end; ++j) {
        const int64_t page = span.page_table[j / ps];
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qv[d] * kv_key_at(cache, page, span.kv_head, j % ps, d);
        float score = dot * span.scale;
        if (span.softcap > 0.0f) score = span.softcap * std::tanh(score / span.softcap);
        scores[static_cast<size_t>(j)] = score;
        mx = scores[static_cast<size_t>(j)] > mx ? scores[static_cast<size_t>(j)] : mx;
      }
      float sum = span.sinks ? std::exp(span.sinks[h] - mx) : 0.0f;
      for (int64_t j = begin; j < end; ++j) {
        scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - mx);
        sum += scores[static_cast<size_t>(j)];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = begin; j < end; ++j) {
        const int64_t page = span.page_table[j / ps];
        const float p = scores[static_cast<size_t>(j)];
        for (int64_t d = 0; d < hd; ++d)
          acc[static_cast<size_t>(d)] += p * kv_value_at(cache, page, span.kv_head, j % ps, d);
      }
      if (span.partial) {
        float* part = span.partial + (t * nh + (h - span.head_begin)) * (hd + 2);
        part[0] = mx;
        part[1] = sum;
        for (int64_t d = 0; d < hd; ++d) part[2 + d] = acc[static_cast<size_t>(d)];
      } else {
        float* ov = span.out + (t * span.heads + h) * hd;
        for (int64_t d = 0; d < hd; ++d) ov[d] = acc[static_cast<size_t>(d)] / sum;
      }
    }
  }
}

void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache, const AttentionBatch& batch,
                     const AttentionParams& params) {
  MINFER_CHECK(cache.kv_heads > 0 && heads % cache.kv_heads == 0, "heads {} kv_heads {}", heads, cache.kv_heads);
  const int64_t group = heads / cache.kv_heads;
  const bool rotated = kv_rotated(cache.dtype, cache.head_dim);
  if (rotated) q = rotate_queries(q, heads, cache.head_dim, batch);
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    AttentionSpan span;
    span.q = q + batch.q_start[s] * heads * cache.head_dim;
    span.out = out + batch.q_start[s] * heads * cache.head_dim;
    span.heads = heads;
    span.ntok = batch.q_len[s];
    span.first_pos = batch.context_len[s] - batch.q_len[s];
    span.page_table = batch.page_tables + s * batch.max_pages_per_seq;
    span.scale = params.scale;
    span.window = params.window;
    span.softcap = params.softcap;
    span.sinks = params.sinks;
    span.key_limit = batch.key_limit ? batch.key_limit + batch.q_start[s] : nullptr;
    for (int64_t g = 0; g < cache.kv_heads; ++g) {
      span.kv_head = g;
      span.head_begin = g * group;
      span.head_end = (g + 1) * group;
      attention_span(cache, span, nullptr);
    }
  }
  if (rotated) unrotate_outputs(out, heads, cache.head_dim, batch);
}

}  // namespace minfer::kernels::ref
