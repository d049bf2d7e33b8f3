// Reference paged attention: for each (token, head) all scores over the context (or the span's range of it),
// then a two-pass softmax and the weighted sum of values; f32 or bf16 KV, in the page layout of KvLayerView.
// Also the KV-cache write (the only one: it only stores).
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {

namespace {

// Element `i` of a K or V pool as f32.
float kv_at(const void* pool, DType dtype, int64_t i) {
  return dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(pool)[i]) : static_cast<const float*>(pool)[i];
}

// pool[offset + i * step] = src[i] for i < n, rounded to bf16 for a bf16 pool.
void put(void* pool, DType dtype, int64_t offset, int64_t step, const float* src, int64_t n) {
  if (dtype == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(pool)[offset + i * step] = f32_to_bf16(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(pool)[offset + i * step] = src[i];
  }
}

}  // namespace

void kv_write_head(const KvLayerView& cache, int64_t kv_head, const float* k, const float* v, int64_t slot) {
  MINFER_CHECK(cache.dtype == DType::F32 || cache.dtype == DType::BF16, "kv_write: KV cache of {}",
               dtype_name(cache.dtype));
  if (slot < 0) return;
  const int64_t ps = cache.page.size(), hd = cache.head_dim, t = cache.page.slot_in_page(slot);
  const int64_t block = cache.head_block(cache.page.page_of(slot), kv_head);
  put(cache.k, cache.dtype, block + t, ps, k, hd);  // transposed: element d at d * page_size + t
  put(cache.v, cache.dtype, block + t * hd, 1, v, hd);
}

void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens) {
  const int64_t hd = cache.head_dim, row = cache.kv_heads * hd;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t g = 0; g < cache.kv_heads; ++g)
      ref::kv_write_head(cache, g, k + t * row + g * hd, v + t * row + g * hd, slot_mapping[t]);
  }
}

void attention_span(const KvLayerView& cache, const AttentionSpan& span, float* /*scratch*/) {
  const int64_t hd = cache.head_dim;
  const int64_t ps = cache.page.size();
  const int64_t nh = span.head_end - span.head_begin;
  std::vector<float> scores(static_cast<size_t>(span.first_pos + span.ntok));
  std::vector<float> acc(static_cast<size_t>(hd));
  for (int64_t t = 0; t < span.ntok; ++t) {
    // Keys [begin, end): the token's causal context (its window of it), cut to the span's range.
    const int64_t begin = std::max(span.ctx_begin, window_start(span, t));
    const int64_t end = std::min(span.first_pos + t + 1, span.ctx_end);
    for (int64_t h = span.head_begin; h < span.head_end; ++h) {
      const float* qv = span.q + (t * span.heads + h) * hd;
      // A sink starts the softmax as a key scored sinks[h] whose value is zero.
      float mx = span.sinks ? span.sinks[h] : -INFINITY;
      for (int64_t j = begin; j < end; ++j) {
        const int64_t block = cache.head_block(span.page_table[j / ps], span.kv_head);
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qv[d] * kv_at(cache.k, cache.dtype, block + d * ps + j % ps);
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
        const int64_t base = cache.head_block(span.page_table[j / ps], span.kv_head) + (j % ps) * hd;
        const float p = scores[static_cast<size_t>(j)];
        for (int64_t d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += p * kv_at(cache.v, cache.dtype, base + d);
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
    for (int64_t g = 0; g < cache.kv_heads; ++g) {
      span.kv_head = g;
      span.head_begin = g * group;
      span.head_end = (g + 1) * group;
      attention_span(cache, span, nullptr);
    }
  }
}

}  // namespace minfer::kernels::ref
