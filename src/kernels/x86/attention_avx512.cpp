// AVX-512 paged attention for one span (see kernels/leaf.h), f32 or bf16 KV (widened to f32 as loaded), in the
// page layout of KvLayerView (per page and kv head: keys transposed, values row by row). The span's context
// range is visited once, in order, in blocks of kBlockKeys keys: one step of the online softmax (flash-attention
// style) per block, so the context length is unbounded while the per-block bookkeeping (the running max, the
// rescaling of the accumulators) is paid once per 128 keys.
//  1. Scores, 32 keys at a time: row d of the transposed keys is two vectors of 16 keys straight from the page,
//     so every (token, head) row scores 32 keys as a broadcast of q[d] times those vectors (no transpose, no
//     horizontal sums; 16 independent FMA chains for 8 rows), scaled, masked (causal) and kept in scratch.
//  2. Softmax step, per row: the block's max, the correction of the running sum and accumulator, and the
//     weights exp(score - max) in place of the scores.
//  3. Values: up to 6 rows at a time accumulate weight x value over the block's keys, the value rows widened
//     as loaded and shared by all rows of the group, the accumulators in registers for the whole block.
// A head's keys (and values) of a page are one contiguous run, but pages lie anywhere in the pool: while a block
// computes, each slot requests its share of the block's values and of the next block's keys (the last block:
// of the first keys of the span this thread runs next). Each row's arithmetic depends only on its own query and
// position, never on which rows share the span (a masked key adds an exact zero), so batching cannot change a row's
// result.
#include <algorithm>
#include <cmath>

#include "kernels/x86/attention_common.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

using x86::BlockRequests;
using x86::BlockRows;
using x86::HeadPages;
using x86::keys_end;
using x86::pad16;
using x86::SpanState;

constexpr int64_t kBlockKeys = kAttentionBlockKeys;  // keys per online-softmax step
constexpr int64_t kSlotKeys = 32;                    // keys scored together (two vectors)
constexpr int kScoreRows = 8;                        // rows scored together (16 FMA chains)
constexpr int kValueRows = 6;                        // rows accumulating values together (<= 24 accumulators)
constexpr int kValueVecs = 4;                        // head-dim vectors per value pass

// s[i][0..1] = q_i . (the slot's 32 keys) for NR rows: two FMA chains per row over the head dim. Row d of the
// slot's keys is 16 keys at h0 + d * ld and 16 at h1 + d * ld.
template <class L, int NR>
void score_rows(const float* const* q, const typename L::Elem* h0, const typename L::Elem* h1, int64_t ld, int64_t hd,
                __m512 (*s)[2]) {
  __m512 a0[NR], a1[NR];
  for (int i = 0; i < NR; ++i) a0[i] = a1[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m512 k0 = L::load(h0 + d * ld);
    const __m512 k1 = L::load(h1 + d * ld);
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i][d]);
      a0[i] = _mm512_fmadd_ps(qd, k0, a0[i]);
      a1[i] = _mm512_fmadd_ps(qd, k1, a1[i]);
    }
  }
  for (int i = 0; i < NR; ++i) s[i][0] = a0[i], s[i][1] = a1[i];
}

// acc_i[0:16NV] = acc_i * corr[i] + sum_{j < nk} p_i[j] * v_j[0:16NV] for NR rows (row i's accumulator at
// acc + i * hdp, its weights at p + i * kBlockKeys; the last vector masked by `last`); value j at v + off[j].
template <class L, int NR, int NV>
void value_rows(float* acc, int64_t hdp, const float* corr, const float* p, const typename L::Elem* v,
                const int64_t* off, int64_t nk, __mmask16 last) {
  __m512 a[NR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
    const __m512 c = _mm512_set1_ps(corr[i]);
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) a[i][u] = _mm512_mul_ps(_mm512_loadu_ps(acc + i * hdp + 16 * u), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    const typename L::Elem* row = v + off[j];
    __m512 vv[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) vv[u] = L::load(row + 16 * u, u == NV - 1 ? last : __mmask16(0xffff));
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i) {
      const __m512 pj = _mm512_set1_ps(p[i * kBlockKeys + j]);
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) a[i][u] = _mm512_fmadd_ps(pj, vv[u], a[i][u]);
    }
  }
  // Whole stores but the last: GCC keeps the accumulators in registers only when no masked store indexes them.
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
#pragma GCC unroll 4
    for (int u = 0; u < NV - 1; ++u) _mm512_storeu_ps(acc + i * hdp + 16 * u, a[i][u]);
    _mm512_mask_storeu_ps(acc + i * hdp + 16 * (NV - 1), last, a[i][NV - 1]);
  }
}

template <class L>
struct Fns {
  using Elem = typename L::Elem;
  using ScoreFn = void (*)(const float* const*, const Elem*, const Elem*, int64_t, int64_t, __m512 (*)[2]);
  static constexpr ScoreFn kScore[kScoreRows + 1] = {nullptr,          score_rows<L, 1>, score_rows<L, 2>,
                                                     score_rows<L, 3>, score_rows<L, 4>, score_rows<L, 5>,
                                                     score_rows<L, 6>, score_rows<L, 7>, score_rows<L, 8>};
  using ValueFn = void (*)(float*, int64_t, const float*, const float*, const Elem*, const int64_t*, int64_t,
                           __mmask16);
  template <int NR>
  static constexpr ValueFn kRow[kValueVecs + 1] = {nullptr, value_rows<L, NR, 1>, value_rows<L, NR, 2>,
                                                   value_rows<L, NR, 3>, value_rows<L, NR, 4>};
  static constexpr const ValueFn* kValue[kValueRows + 1] = {nullptr, kRow<1>, kRow<2>, kRow<3>,
                                                            kRow<4>, kRow<5>, kRow<6>};
};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t hdp = pad16(hd);
  const int64_t ps = cache.page.size();
  const int64_t nh = sp.head_end - sp.head_begin;
  const int64_t rows = sp.ntok * nh;
  SpanState st(scratch, rows, hdp);
  float* kt = st.rest;  // a slot of keys gathered from pages of fewer than 16 keys
  const HeadPages<Elem> pages(cache, sp);
  const int64_t end = keys_end(sp);
  if (sp.ctx_begin < end) pages.prefetch(sp.ctx_begin, std::min(end, sp.ctx_begin + kBlockKeys), true, false);
  int64_t voff[kBlockKeys];  // element offset of each value of the block from cache.v
  for (int64_t b0 = sp.ctx_begin; b0 < end; b0 += kBlockKeys) {
    const int64_t nb = end - b0 < kBlockKeys ? end - b0 : kBlockKeys;
    const BlockRequests<Elem> request(cache, sp, pages, b0, nb);
    for (int64_t j = 0; j < nb; ++j) voff[j] = pages.value_offset(b0 + j);
    const BlockRows block(sp, b0, nb);
    const int64_t r_first = block.r_first;

    // 1. Scores, scaled, -inf where the row may not look (causal) or past the block.
    const __m512 scale = _mm512_set1_ps(sp.scale);
    const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
    for (int64_t s0 = 0; s0 < nb; s0 += kSlotKeys) {
      request(s0, kSlotKeys);
      const int64_t ns = nb - s0 < kSlotKeys ? nb - s0 : kSlotKeys;
      // Row d of the slot's keys: from the page itself when a page holds 16 keys or more (slots start at
      // multiples of 16 then), else gathered 8 keys per page into kt. Lanes past the keys are never used.
      const Elem* h0;
      const Elem* h1;
      int64_t ld = ps;
      if (ps >= 16) {
        h0 = pages.key_row(b0 + s0);
        h1 = ns > 16 ? pages.key_row(b0 + s0 + 16) : h0;
      } else {
        for (int64_t q0 = 0; q0 < ns; q0 += ps) {
          const Elem* src = pages.key_row(b0 + s0 + q0);
          const __mmask16 lanes = tail_mask(ps);
          for (int64_t d = 0; d < hd; ++d)
            _mm512_mask_storeu_ps(kt + d * kSlotKeys + q0, lanes, L::load(src + d * ps, lanes));
        }
        ld = kSlotKeys;
      }
      for (int64_t r0 = r_first; r0 < rows; r0 += kScoreRows) {
        const int nr = static_cast<int>(rows - r0 < kScoreRows ? rows - r0 : kScoreRows);
        const float* q[kScoreRows];
        for (int i = 0; i < nr; ++i) {
          const int64_t r = r0 + i;
          q[i] = sp.q + ((r / nh) * sp.heads + sp.head_begin + r % nh) * hd;
        }
        __m512 s[kScoreRows][2];
        if (ps >= 16) {
          Fns<L>::kScore[nr](q, h0, h1, ld, hd, s);
        } else {
          Fns<F32W>::kScore[nr](q, kt, kt + 16, ld, hd, s);
        }
        for (int i = 0; i < nr; ++i) {
          const int64_t cnt = block.seen(r0 + i) - s0;  // may be <= 0: the whole slot is masked
          float* out = st.sc + (r0 + i) * kBlockKeys + s0;
          for (int h = 0; h < 2; ++h) {
            const __mmask16 m = tail_mask(cnt - 16 * h < 0 ? 0 : cnt - 16 * h);
            _mm512_storeu_ps(out + 16 * h, _mm512_mask_mul_ps(minus_inf, m, s[i][h], scale));
          }
        }
      }
    }

    // 2. The online-softmax step per row (after its window and soft-cap): scores become weights (zero past the keys
    // the row sees).
    for (int64_t r = r_first; r < rows; ++r) {
      const int64_t cnt = block.seen(r);
      float* w = st.sc + r * kBlockKeys;
      if (!block.window_and_cap(r, w)) {
        st.corr[r] = 1.0f;
        continue;
      }
      __m512 mx = minus_inf;
      for (int64_t j = 0; j < cnt; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(w + j));  // masked lanes: -inf
      const float block_max = _mm512_reduce_max_ps(mx);
      const float new_max = st.run_max[r] > block_max ? st.run_max[r] : block_max;
      const __m512 m = _mm512_set1_ps(new_max);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j = 0; j < nb; j += 16) {
        const __mmask16 live = tail_mask(cnt - j < 0 ? 0 : cnt - j);
        const __m512 e = _mm512_maskz_mov_ps(live, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(w + j), m)));
        _mm512_storeu_ps(w + j, e);
        sum = _mm512_add_ps(sum, e);
      }
      st.corr[r] = std::exp(st.run_max[r] - new_max);  // 0 on the first block (max -inf)
      st.run_sum[r] = st.run_sum[r] * st.corr[r] + _mm512_reduce_add_ps(sum);
      st.run_max[r] = new_max;
    }

    // 3. Values: groups of up to 6 rows, as even as possible (7 heads: 4 + 3), over the keys the group's last
    // row sees (the others' weights are zero there).
    const int64_t groups = (rows - r_first + kValueRows - 1) / kValueRows;
    for (int64_t g = 0, r0 = r_first; g < groups; ++g) {
      const int64_t nr = (rows - r0) / (groups - g);
      const int64_t nk = block.seen(r0 + nr - 1);
      for (int64_t d0 = 0; d0 < hd; d0 += 16 * kValueVecs) {
        const int64_t nv = (hd - d0 + 15) / 16 < kValueVecs ? (hd - d0 + 15) / 16 : kValueVecs;
        const __mmask16 last = tail_mask(hd - d0 - 16 * (nv - 1));
        Fns<L>::kValue[nr][nv](st.acc + r0 * hdp + d0, hdp, st.corr + r0, st.sc + r0 * kBlockKeys, pages.v + d0, voff,
                               nk, last);
      }
      r0 += nr;
    }
  }
  st.write(sp, hd);
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
