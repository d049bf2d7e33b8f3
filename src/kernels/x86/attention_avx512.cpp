// AVX-512 paged attention for one span (see kernels/leaf.h), f32 or bf16 KV (widened to f32 as loaded). The
// pages of the span's context range are visited once, in order; for each page every (token, head) row of the
// span scores the page's keys, updates its running max and sum (online softmax, so the context length is
// unbounded) and accumulates the page's values. The page's keys and values stay in
// L1 while all rows of the query group use them, so K/V stream from memory once per span.
#include <cmath>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// Head dims are processed in chunks of up to kChunk vectors (128 floats) held in registers.
constexpr int kChunk = 8;

int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

// s[j] (+)= q[0:16NV] . k_j[0:16NV] for j < cnt; the last vector is masked by `last`. L loads K (f32 or bf16).
template <class L, int NV>
void score_chunk(const float* q, const void* kv, int64_t stride, int64_t cnt, __mmask16 last, float* s, bool add) {
  const auto* k = static_cast<const typename L::Elem*>(kv);
  __mmask16 mask[NV];
  __m512 qv[NV];
  for (int v = 0; v < NV; ++v) {
    mask[v] = v == NV - 1 ? last : __mmask16(0xffff);
    qv[v] = _mm512_maskz_loadu_ps(mask[v], q + 16 * v);
  }
  auto dot = [&](const typename L::Elem* kr) {
    __m512 a = _mm512_mul_ps(qv[0], L::load(kr, mask[0]));
    for (int v = 1; v < NV; ++v) a = _mm512_fmadd_ps(qv[v], L::load(kr + 16 * v, mask[v]), a);
    return a;
  };
  int64_t j = 0;
  for (; j + 4 <= cnt; j += 4) {
    __m128 r =
        hsum4(dot(k + j * stride), dot(k + (j + 1) * stride), dot(k + (j + 2) * stride), dot(k + (j + 3) * stride));
    if (add) r = _mm_add_ps(r, _mm_loadu_ps(s + j));
    _mm_storeu_ps(s + j, r);
  }
  for (; j < cnt; ++j) {
    const float d = hsum(dot(k + j * stride));
    s[j] = add ? s[j] + d : d;
  }
}

// acc[0:16NV] = acc * corr + sum_j p[j] * v_j[0:16NV]. L loads V (f32 or bf16).
template <class L, int NV>
void value_chunk(const void* vv, int64_t stride, const float* p, int64_t cnt, __mmask16 last, float corr, float* acc) {
  const auto* vbase = static_cast<const typename L::Elem*>(vv);
  __m512 a[NV];
  const __m512 c = _mm512_set1_ps(corr);
  for (int v = 0; v < NV; ++v) {
    a[v] = _mm512_mul_ps(_mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xffff), acc + 16 * v), c);
  }
  for (int64_t j = 0; j < cnt; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const auto* vr = vbase + j * stride;
    for (int v = 0; v < NV; ++v) {
      a[v] = _mm512_fmadd_ps(pj, L::load(vr + 16 * v, v == NV - 1 ? last : __mmask16(0xffff)), a[v]);
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(acc + 16 * v, v == NV - 1 ? last : __mmask16(0xffff), a[v]);
}

using ScoreFn = void (*)(const float*, const void*, int64_t, int64_t, __mmask16, float*, bool);
using ValueFn = void (*)(const void*, int64_t, const float*, int64_t, __mmask16, float, float*);
template <class L>
struct ChunkFns {
  static constexpr ScoreFn kScore[kChunk + 1] = {nullptr,           score_chunk<L, 1>, score_chunk<L, 2>,
                                                 score_chunk<L, 3>, score_chunk<L, 4>, score_chunk<L, 5>,
                                                 score_chunk<L, 6>, score_chunk<L, 7>, score_chunk<L, 8>};
  static constexpr ValueFn kValue[kChunk + 1] = {nullptr,           value_chunk<L, 1>, value_chunk<L, 2>,
                                                 value_chunk<L, 3>, value_chunk<L, 4>, value_chunk<L, 5>,
                                                 value_chunk<L, 6>, value_chunk<L, 7>, value_chunk<L, 8>};
};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t ps = cache.page_size;
  const int64_t stride = cache.kv_heads * hd;  // between consecutive tokens of a page
  const int64_t nh = sp.head_end - sp.head_begin;
  const int64_t rows = sp.ntok * nh;
  float* run_max = scratch;
  float* run_sum = run_max + pad16(rows);
  float* acc = run_sum + pad16(rows);
  float* s = acc + pad16(rows) * pad16(hd);
  for (int64_t r = 0; r < rows; ++r) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
    for (int64_t d = 0; d < hd; ++d) acc[r * pad16(hd) + d] = 0.0f;
  }
  const int64_t last_pos = sp.first_pos + sp.ntok - 1;
  for (int64_t pg = sp.ctx_begin / ps; pg * ps <= last_pos && pg * ps < sp.ctx_end; ++pg) {
    const int64_t page_first = pg * ps;
    const int64_t page_slot = static_cast<int64_t>(sp.block_table[pg]) * ps;
    const Elem* kpage = static_cast<const Elem*>(cache.k) + page_slot * stride + sp.kv_head * hd;
    const Elem* vpage = static_cast<const Elem*>(cache.v) + page_slot * stride + sp.kv_head * hd;
    const int64_t page_end = sp.ctx_end - page_first < ps ? sp.ctx_end - page_first : ps;  // keys of the range
    for (int64_t t = 0; t < sp.ntok; ++t) {
      const int64_t pos = sp.first_pos + t;
      if (pos < page_first) continue;
      const int64_t cnt = pos - page_first + 1 < page_end ? pos - page_first + 1 : page_end;
      for (int64_t h = sp.head_begin; h < sp.head_end; ++h) {
        const int64_t r = t * nh + (h - sp.head_begin);
        const float* q = sp.q + (t * sp.heads + h) * hd;
        for (int64_t d0 = 0; d0 < hd; d0 += 16 * kChunk) {
          const int64_t nv = (hd - d0 + 15) / 16 < kChunk ? (hd - d0 + 15) / 16 : kChunk;
          const __mmask16 last = tail_mask(hd - d0 - 16 * (nv - 1));
          ChunkFns<L>::kScore[nv](q + d0, kpage + d0, stride, cnt, last, s, d0 > 0);
        }
        // Online softmax update: new max, rescale of the running sum and accumulator, page weights.
        __m512 mx = _mm512_set1_ps(-INFINITY);
        const __m512 scale = _mm512_set1_ps(sp.scale);
        for (int64_t j = 0; j < cnt; j += 16) {
          const __mmask16 m = tail_mask(cnt - j);
          const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), scale);
          _mm512_mask_storeu_ps(s + j, m, v);
          mx = _mm512_mask_max_ps(mx, m, mx, v);
        }
        const float page_max = _mm512_reduce_max_ps(mx);
        const float new_max = page_max > run_max[r] ? page_max : run_max[r];
        const float corr = std::exp(run_max[r] - new_max);
        const __m512 vmax = _mm512_set1_ps(new_max);
        __m512 sum = _mm512_setzero_ps();
        for (int64_t j = 0; j < cnt; j += 16) {
          const __mmask16 m = tail_mask(cnt - j);
          const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vmax));
          _mm512_mask_storeu_ps(s + j, m, e);
          sum = _mm512_mask_add_ps(sum, m, sum, e);
        }
        run_sum[r] = run_sum[r] * corr + hsum(sum);
        run_max[r] = new_max;
        for (int64_t d0 = 0; d0 < hd; d0 += 16 * kChunk) {
          const int64_t nv = (hd - d0 + 15) / 16 < kChunk ? (hd - d0 + 15) / 16 : kChunk;
          const __mmask16 last = tail_mask(hd - d0 - 16 * (nv - 1));
          ChunkFns<L>::kValue[nv](vpage + d0, stride, s, cnt, last, corr, acc + r * pad16(hd) + d0);
        }
      }
    }
  }
  for (int64_t t = 0; t < sp.ntok; ++t) {
    for (int64_t h = sp.head_begin; h < sp.head_end; ++h) {
      const int64_t r = t * nh + (h - sp.head_begin);
      if (sp.partial) {
        float* part = sp.partial + r * (hd + 2);
        part[0] = run_max[r];
        part[1] = run_sum[r];
        for (int64_t d = 0; d < hd; ++d) part[2 + d] = acc[r * pad16(hd) + d];
        continue;
      }
      const __m512 inv = _mm512_set1_ps(1.0f / run_sum[r]);
      float* o = sp.out + (t * sp.heads + h) * hd;
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 m = tail_mask(hd - d);
        _mm512_mask_storeu_ps(o + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + r * pad16(hd) + d), inv));
      }
    }
  }
}

}  // namespace

void attention_span(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  if (cache.dtype == DType::BF16) {
    span_impl<Bf16W>(cache, sp, scratch);
  } else {
    span_impl<F32W>(cache, sp, scratch);
  }
}

}  // namespace minfer::kernels::avx512
