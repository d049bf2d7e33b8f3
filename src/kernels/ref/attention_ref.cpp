// Reference paged attention: for each (token, head) all scores over the context, then a two-pass softmax and
// the weighted sum of values. Also the reference KV-cache write.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens) {
  const int64_t row = cache.kv_heads * cache.head_dim;
  for (int64_t t = 0; t < tokens; ++t) {
    if (slot_mapping[t] < 0) continue;
    std::memcpy(cache.k + slot_mapping[t] * row, k + t * row, static_cast<size_t>(row) * sizeof(float));
    std::memcpy(cache.v + slot_mapping[t] * row, v + t * row, static_cast<size_t>(row) * sizeof(float));
  }
}

void attention_span(const KvLayerView& cache, const AttentionSpan& span, float* /*scratch*/) {
  const int64_t hd = cache.head_dim;
  const int64_t ps = cache.page_size;
  const int64_t row = cache.kv_heads * hd;
  std::vector<float> scores(static_cast<size_t>(span.first_pos + span.ntok));
  for (int64_t t = 0; t < span.ntok; ++t) {
    const int64_t ctx = span.first_pos + t + 1;
    for (int64_t h = span.head_begin; h < span.head_end; ++h) {
      const float* qv = span.q + (t * span.heads + h) * hd;
      float mx = -INFINITY;
      for (int64_t j = 0; j < ctx; ++j) {
        const int64_t slot = static_cast<int64_t>(span.block_table[j / ps]) * ps + j % ps;
        const float* kv = cache.k + slot * row + span.kv_head * hd;
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qv[d] * kv[d];
        scores[static_cast<size_t>(j)] = dot * span.scale;
        mx = scores[static_cast<size_t>(j)] > mx ? scores[static_cast<size_t>(j)] : mx;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < ctx; ++j) {
        scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - mx);
        sum += scores[static_cast<size_t>(j)];
      }
      float* ov = span.out + (t * span.heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) ov[d] = 0.0f;
      for (int64_t j = 0; j < ctx; ++j) {
        const int64_t slot = static_cast<int64_t>(span.block_table[j / ps]) * ps + j % ps;
        const float* vv = cache.v + slot * row + span.kv_head * hd;
        const float p = scores[static_cast<size_t>(j)] / sum;
        for (int64_t d = 0; d < hd; ++d) ov[d] += p * vv[d];
      }
    }
  }
}

void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache, const AttentionBatch& batch,
                     float scale) {
  MINFER_CHECK(cache.kv_heads > 0 && heads % cache.kv_heads == 0, "heads {} kv_heads {}", heads, cache.kv_heads);
  const int64_t group = heads / cache.kv_heads;
  for (int64_t s = 0; s < batch.num_seqs; ++s) {
    AttentionSpan span;
    span.q = q + batch.q_start[s] * heads * cache.head_dim;
    span.out = out + batch.q_start[s] * heads * cache.head_dim;
    span.heads = heads;
    span.ntok = batch.q_len[s];
    span.first_pos = batch.context_len[s] - batch.q_len[s];
    span.block_table = batch.block_tables + s * batch.max_blocks_per_seq;
    span.scale = scale;
    for (int64_t g = 0; g < cache.kv_heads; ++g) {
      span.kv_head = g;
      span.head_begin = g * group;
      span.head_end = (g + 1) * group;
      attention_span(cache, span, nullptr);
    }
  }
}

}  // namespace minfer::kernels::ref
