// AVX2 paged attention for one span (see kernels/leaf.h), f32 or bf16 KV (widened to f32 as loaded), in the
// page layout of KvLayerView (per page and kv head: keys transposed, values row by row). The same plan as the
// AVX-512 leaf (attention_avx512.cpp), at 8 lanes and with 16 registers: the span's context range is visited once,
// in blocks of kBlockKeys keys, one online-softmax step per block.
//  1. Scores, 16 keys at a time: row d of the transposed keys is two vectors of 8 keys straight from the page(s)
//     (pages hold at least 8 keys: EngineConfig), so up to 4 (token, head) rows score them as a broadcast of q[d]
//     times those vectors: 8 independent FMA chains, every key load shared by the rows (6 rows, 12 chains,
//     measured slower: too few registers left). Scaled, causally masked
//     and kept in scratch.
//  2. Softmax step, per row: the block's max, the correction of the running sum and accumulator, and the
//     weights exp(score - max) in place of the scores.
//  3. Values: up to 4 rows at a time accumulate weight x value over the block's keys, 16 head-dim floats per
//     pass, each value load shared by the rows of the group.
// As in the AVX-512 leaf, each 32 keys request their share of the block's values and of the next block's keys
// (or of the next span's first keys), and a row's arithmetic never depends on which rows share its span.
#include <cmath>

#include "kernels/x86/attention_common.h"
#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

using x86::BlockRequests;
using x86::BlockRows;
using x86::HeadPages;
using x86::keys_end;
using x86::pad16;
using x86::SpanState;

constexpr int64_t kBlockKeys = kAttentionBlockKeys;  // keys per online-softmax step
constexpr int64_t kSlotKeys = 16;                    // keys scored together (two vectors)
constexpr int64_t kRequestKeys = 32;                 // keys per batch of prefetch requests
constexpr int kScoreRows = 4;                        // rows scored together (8 FMA chains)
constexpr int kValueRows = 4;                        // rows accumulating values together
constexpr int kValueVecs = 2;                        // head-dim vectors per value pass (<= 8 accumulators)

// Lanes of the first n of 8, for any n (<= 0: none).
__m256 lanes(int64_t n) { return _mm256_castsi256_ps(lane_mask(n < 0 ? 0 : n)); }

// s[i][0..1] = q_i . (the slot's 16 keys) for NR rows: two FMA chains per row over the head dim. Row d of the
// slot's keys is 8 keys at h0 + d * ld and 8 at h1 + d * ld (the 8 lanes of each always inside one page).
template <class L, int NR>
void score_rows(const float* const* q, const typename L::Elem* h0, const typename L::Elem* h1, int64_t ld, int64_t hd,
                __m256 (*s)[2]) {
  __m256 a0[NR], a1[NR];
  for (int i = 0; i < NR; ++i) a0[i] = a1[i] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m256 k0 = L::load(h0 + d * ld);
    const __m256 k1 = L::load(h1 + d * ld);
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
      const __m256 qd = _mm256_broadcast_ss(q[i] + d);
      a0[i] = _mm256_fmadd_ps(qd, k0, a0[i]);
      a1[i] = _mm256_fmadd_ps(qd, k1, a1[i]);
    }
  }
  for (int i = 0; i < NR; ++i) s[i][0] = a0[i], s[i][1] = a1[i];
}

// acc_i[0:8NV] = acc_i * corr[i] + sum_{j < nk} p_i[j] * v_j[0:8NV] for NR rows (row i's accumulator at
// acc + i * hdp, padded so whole vectors fit; its weights at p + i * kBlockKeys); the last vector of each value
// holds `last` elements (never read past); value j at v + off[j].
template <class L, int NR, int NV>
void value_rows(float* acc, int64_t hdp, const float* corr, const float* p, const typename L::Elem* v,
                const int64_t* off, int64_t nk, int64_t last) {
  __m256 a[NR][NV];
#pragma GCC unroll 4
  for (int i = 0; i < NR; ++i) {
    const __m256 c = _mm256_set1_ps(corr[i]);
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u) a[i][u] = _mm256_mul_ps(_mm256_loadu_ps(acc + i * hdp + 8 * u), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    const typename L::Elem* row = v + off[j];
    __m256 vv[NV];
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u) vv[u] = u == NV - 1 && last < 8 ? L::load(row + 8 * u, last) : L::load(row + 8 * u);
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
      const __m256 pj = _mm256_broadcast_ss(p + i * kBlockKeys + j);
#pragma GCC unroll 2
      for (int u = 0; u < NV; ++u) a[i][u] = _mm256_fmadd_ps(pj, vv[u], a[i][u]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NR; ++i) {
#pragma GCC unroll 2
    for (int u = 0; u < NV; ++u) _mm256_storeu_ps(acc + i * hdp + 8 * u, a[i][u]);
  }
}

template <class L>
struct Fns {
  using Elem = typename L::Elem;
  using ScoreFn = void (*)(const float* const*, const Elem*, const Elem*, int64_t, int64_t, __m256 (*)[2]);
  static constexpr ScoreFn kScore[kScoreRows + 1] = {nullptr, score_rows<L, 1>, score_rows<L, 2>, score_rows<L, 3>,
                                                     score_rows<L, 4>};
  using ValueFn = void (*)(float*, int64_t, const float*, const float*, const Elem*, const int64_t*, int64_t, int64_t);
  template <int NR>
  static constexpr ValueFn kRow[kValueVecs + 1] = {nullptr, value_rows<L, NR, 1>, value_rows<L, NR, 2>};
  static constexpr const ValueFn* kValue[kValueRows + 1] = {nullptr, kRow<1>, kRow<2>, kRow<3>, kRow<4>};
};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t hdp = pad16(hd);
  const int64_t nh = sp.head_end - sp.head_begin;
  const int64_t rows = sp.ntok * nh;
  SpanState st(scratch, rows, hdp);
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
    const __m256 scale = _mm256_set1_ps(sp.scale);
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    for (int64_t s0 = 0; s0 < nb; s0 += kSlotKeys) {
      if (s0 % kRequestKeys == 0) request(s0, kRequestKeys);
      // Slots start at multiples of 8 keys of a page, so each half is 8 keys of one page row; lanes past the
      // block's keys read what the page holds there and are masked below.
      const Elem* h0 = pages.key_row(b0 + s0);
      const Elem* h1 = nb - s0 > 8 ? pages.key_row(b0 + s0 + 8) : h0;
      for (int64_t r0 = r_first; r0 < rows; r0 += kScoreRows) {
        const int nr = static_cast<int>(rows - r0 < kScoreRows ? rows - r0 : kScoreRows);
        const float* q[kScoreRows];
        for (int i = 0; i < nr; ++i) {
          const int64_t r = r0 + i;
          q[i] = sp.q + ((r / nh) * sp.heads + sp.head_begin + r % nh) * hd;
        }
        __m256 s[kScoreRows][2];
        Fns<L>::kScore[nr](q, h0, h1, cache.page.size(), hd, s);
        for (int i = 0; i < nr; ++i) {
          const int64_t cnt = block.seen(r0 + i) - s0;  // may be <= 0: the whole slot is masked
          float* out = st.sc + (r0 + i) * kBlockKeys + s0;
          for (int h = 0; h < 2; ++h) {
            _mm256_storeu_ps(out + 8 * h,
                             _mm256_blendv_ps(minus_inf, _mm256_mul_ps(s[i][h], scale), lanes(cnt - 8 * h)));
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
      __m256 mx = minus_inf;
      for (int64_t j = 0; j < cnt; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(w + j));  // masked lanes: -inf
      const float block_max = hmax(mx);
      const float new_max = st.run_max[r] > block_max ? st.run_max[r] : block_max;
      const __m256 m = _mm256_set1_ps(new_max);
      __m256 sum = _mm256_setzero_ps();
      for (int64_t j = 0; j < nb; j += 8) {
        const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(w + j), m)), lanes(cnt - j));
        _mm256_storeu_ps(w + j, e);
        sum = _mm256_add_ps(sum, e);
      }
      st.corr[r] = std::exp(st.run_max[r] - new_max);  // 0 on the first block (max -inf)
      st.run_sum[r] = st.run_sum[r] * st.corr[r] + hsum(sum);
      st.run_max[r] = new_max;
    }

    // 3. Values: groups of up to 4 rows, as even as possible (7 heads: 4 + 3), over the keys the group's last
    // row sees (the others' weights are zero there).
    const int64_t groups = (rows - r_first + kValueRows - 1) / kValueRows;
    for (int64_t g = 0, r0 = r_first; g < groups; ++g) {
      const int64_t nr = (rows - r0) / (groups - g);
      const int64_t nk = block.seen(r0 + nr - 1);
      for (int64_t d0 = 0; d0 < hd; d0 += 8 * kValueVecs) {
        const int64_t nv = (hd - d0 + 7) / 8 < kValueVecs ? (hd - d0 + 7) / 8 : kValueVecs;
        const int64_t last = hd - d0 - 8 * (nv - 1);
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

}  // namespace minfer::kernels::avx2
