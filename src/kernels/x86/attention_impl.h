// Paged attention for one span (see kernels/leaf.h) on both x86 ISAs, written once over a vector-traits type V
// (vec_avx2.h, vec_avx512.h) and a KV type's codes K (attention_common.h); every KvCacheDtype, its codes widened to
// f32 as loaded (attention_codes.h), in the page layout of KvLayerView (per page and kv head: keys transposed,
// values row by row). Scales: a token's key scale multiplies its scores, a token's value scale its softmax weight
// (after the sum: the softmax itself is over the true scores); a blocked type's key scales multiply each block's
// partial scores, its value scales the value vectors as loaded. No f32 copy of a page is made (but for pages
// narrower than a vector: their keys are gathered, decoded, a slot at a time). The span's context range is visited
// once, in order, in blocks of kAttentionBlockKeys keys: one step of the online softmax (flash-attention style) per
// block, so the context length is unbounded while the per-block bookkeeping (the running max, the rescaling of the
// accumulators) is paid once per 128 keys.
//  1. Scores, a slot of two vectors of keys at a time (32 keys on AVX-512, 16 on AVX2): row d of the transposed
//     keys is two vectors straight from the page, so every (token, head) row scores the slot as a broadcast of
//     q[d] times those vectors (no transpose, no horizontal sums; two FMA chains per row, rows scored together up
//     to what the registers hold), scaled, masked (causal) and kept in scratch. Pages narrower than a vector
//     (8-key pages on AVX-512) are gathered into scratch first.
//  2. Softmax step, per row: the block's max, the correction of the running sum and accumulator, and the
//     weights exp(score - max) in place of the scores.
//  3. Values: groups of rows accumulate weight x value over the block's keys, the value rows widened as loaded
//     and shared by all rows of the group, the accumulators in registers for the whole block.
// A head's keys (and values) of a page are one contiguous run, but pages lie anywhere in the pool: while a block
// computes, each 32 keys request their share of the block's values and of the next block's keys (the last block:
// of the first keys of the span this thread runs next). Each row's arithmetic depends only on its own query and
// position, never on which rows share the span (a masked key adds an exact zero), so batching cannot change a
// row's result. Instantiated in leaves_<isa>.cpp through leaves_isa.inc (internal linkage).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/x86/attention_codes.h"
#include "kernels/x86/attention_common.h"
#include "kernels/x86/vec_common.h"

namespace minfer::kernels::x86 {
namespace {

template <class V>
struct AttentionShape {
  static constexpr int64_t kSlotKeys = 2 * V::kWidth;  // keys scored together (two vectors)
  static constexpr int64_t kRequestKeys = 32;          // keys per batch of prefetch requests
  // Rows scored together: two FMA chains each (AVX2: 6 rows, 12 chains, measured slower: too few registers left).
  static constexpr int kScoreRows = kWide<V> ? 8 : 4;
  static constexpr int kBlockedScoreRows = kWide<V> ? 6 : 2;  // four chains a row (score_rows_blocked)
  static constexpr int kValueRows = kWide<V> ? 6 : 4;         // rows accumulating values together
  static constexpr int kValueVecs = kWide<V> ? 4 : 2;  // head-dim vectors per value pass (<= 24 / 8 accumulators)
};

// s[i][0..1] = q_i . (the slot's keys) for NR rows: two FMA chains per row over the head dim. Row d of the slot's
// keys is a vector at h0 + d * ld and one at h1 + d * ld.
template <class V, class W, int NR>
void score_rows(const float* const* q, const typename W::Elem* h0, const typename W::Elem* h1, int64_t ld, int64_t hd,
                typename V::Reg (*s)[2]) {
  typename V::Reg a0[NR], a1[NR];
  for (int i = 0; i < NR; ++i) a0[i] = a1[i] = V::zero();
  for (int64_t d = 0; d < hd; ++d) {
    const typename V::Reg k0 = V::template load_weights<W>(h0 + d * ld);
    const typename V::Reg k1 = V::template load_weights<W>(h1 + d * ld);
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i) {
      const typename V::Reg qd = V::broadcast(q[i] + d);
      a0[i] = V::fmadd(qd, k0, a0[i]);
      a1[i] = V::fmadd(qd, k1, a1[i]);
    }
  }
  for (int i = 0; i < NR; ++i) s[i][0] = a0[i], s[i][1] = a1[i];
}

// Where a block's values are: value j's codes at v + off[j]; for the blocked types its scales at vs + soff[j].
template <class K>
struct ValueSource {
  const typename K::Elem* v;
  const int64_t* off;
  const typename K::ScaleElem* vs;
  const int64_t* soff;
};

// acc_i[0:L*NV] = acc_i * corr[i] + sum_{j < nk} p_i[j] * v_j[d0:d0+L*NV] for NR rows (row i's accumulator at
// acc + i * hdp, padded so whole vectors fit; its weights at p + i * kAttentionBlockKeys); the last vector of each
// value holds `last` elements (never read past).
template <class V, class K, int NR, int NV>
void value_rows(float* acc, int64_t hdp, const float* corr, const float* p, const ValueSource<K>& src, int64_t d0,
                int64_t nk, typename V::Tail last) {
  constexpr int64_t L = V::kWidth;
  typename V::Reg a[NR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
    const typename V::Reg c = V::set1(corr[i]);
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) a[i][u] = V::mul(V::load(acc + i * hdp + L * u), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    const typename K::Elem* row = src.v + src.off[j];
    typename V::Reg vv[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) {
      vv[u] = load_value<V, K>(row, d0 + L * u, u == NV - 1, last);
      if constexpr (K::kScaling == KvScaling::kPerBlock)
        vv[u] = V::mul(vv[u], V::set1(scale_value<K>(src.vs + src.soff[j] + (d0 + L * u) / kKvBlockDims)));
    }
#pragma GCC unroll 8
    for (int i = 0; i < NR; ++i) {
      const typename V::Reg pj = V::broadcast(p + i * kAttentionBlockKeys + j);
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) a[i][u] = V::fmadd(pj, vv[u], a[i][u]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
#pragma GCC unroll 4
    for (int u = 0; u < NV - 1; ++u) V::store(acc + i * hdp + L * u, a[i][u]);
    V::store_padded(acc + i * hdp + L * (NV - 1), last, a[i][NV - 1]);
  }
}

// The leaves' register tiles as tables indexed by the rows (and value vectors) a call covers.
template <class V, class K>
struct AttentionFns {
  using S = AttentionShape<V>;
  using Elem = typename K::Elem;
  using Reg2 = typename V::Reg (*)[2];
  using ScoreFn = void (*)(const float* const*, const Elem*, const Elem*, int64_t, int64_t, Reg2);
  using BlockedScoreFn = void (*)(const float* const*, const Elem*, const Elem*, const typename K::ScaleElem*,
                                  const typename K::ScaleElem*, int64_t, int64_t, Reg2);
  using ValueFn = void (*)(float*, int64_t, const float*, const float*, const ValueSource<K>&, int64_t, int64_t,
                           typename V::Tail);
  template <std::size_t... I>
  static constexpr std::array<ScoreFn, sizeof...(I) + 1> score_table(std::index_sequence<I...>) {
    return {nullptr, &score_rows<V, typename K::Load, static_cast<int>(I) + 1>...};
  }
  template <std::size_t... I>
  static constexpr std::array<BlockedScoreFn, sizeof...(I) + 1> blocked_table(std::index_sequence<I...>) {
    return {nullptr, &score_rows_blocked<V, K, static_cast<int>(I) + 1>...};
  }
  template <int NR, std::size_t... U>
  static constexpr std::array<ValueFn, sizeof...(U) + 1> value_row(std::index_sequence<U...>) {
    return {nullptr, &value_rows<V, K, NR, static_cast<int>(U) + 1>...};
  }
  template <std::size_t... I>
  static constexpr auto value_table(std::index_sequence<I...>) {
    using Row = std::array<ValueFn, S::kValueVecs + 1>;
    return std::array<Row, sizeof...(I) + 1>{
        Row{}, value_row<static_cast<int>(I) + 1>(std::make_index_sequence<S::kValueVecs>())...};
  }
};
// The tables, instantiated only for the codes each type reads (variable templates: a type without plain key rows,
// q4_0, never names kScoreFns).
template <class V, class K>
inline constexpr auto kScoreFns =
    AttentionFns<V, K>::score_table(std::make_index_sequence<AttentionShape<V>::kScoreRows>());
template <class V, class K>
inline constexpr auto kBlockedScoreFns =
    AttentionFns<V, K>::blocked_table(std::make_index_sequence<AttentionShape<V>::kBlockedScoreRows>());
template <class V, class K>
inline constexpr auto kValueFns =
    AttentionFns<V, K>::value_table(std::make_index_sequence<AttentionShape<V>::kValueRows>());

// Where a slot's keys are read from: in the pages (codes, and the scales of the scaled types), or decoded into kt.
template <class V, class K>
struct SlotKeys {
  const typename K::Elem *h0 = nullptr, *h1 = nullptr;                      // row 0 of the slot's two vectors
  const typename K::ScaleElem *s0 = nullptr, *s1 = nullptr;                 // their scales (blocked: of block 0)
  typename V::Reg token_scale[2] = {V::set1(K::kUnit), V::set1(K::kUnit)};  // per-token: the keys' scales
  bool gathered = false;                                                    // in kt, decoded

  SlotKeys(const KvLayerView& cache, const HeadPages<K>& pages, int64_t key, int64_t ns, float* kt) {
    constexpr int64_t L = V::kWidth;
    // Row d of the slot's keys: from the page itself when a page holds a vector of keys or more (slots start at
    // multiples of a vector then), else gathered a page at a time into kt. Lanes past the keys are never used.
    if (pages.ps < L) {
      gather_keys<V, K>(pages, cache, key, ns, kt, AttentionShape<V>::kSlotKeys);
      gathered = true;
      return;
    }
    h0 = pages.key_row(key);
    h1 = ns > L ? pages.key_row(key + L) : h0;
    if constexpr (K::kScaling != KvScaling::kNone) {
      const auto* ks = static_cast<const typename K::ScaleElem*>(cache.k_scale);
      s0 = ks + pages.key_scale_offset(key);
      s1 = ns > L ? ks + pages.key_scale_offset(key + L) : s0;  // the next page when a page is one vector
    }
    if constexpr (K::kScaling == KvScaling::kPerToken) {
      token_scale[0] = V::mul(token_scale[0], V::template load_weights<typename K::ScaleLoad>(s0));
      token_scale[1] = V::mul(token_scale[1], V::template load_weights<typename K::ScaleLoad>(s1));
    }
  }

  // s[i][0..1] for the nr rows of q.
  void score(const float* const* q, int nr, const float* kt, int64_t ps, int64_t hd, typename V::Reg (*s)[2]) const {
    constexpr int64_t L = V::kWidth;
    if (gathered) {
      kScoreFns<V, KvCodes<typename V::F32, KvScaling::kNone>>[static_cast<size_t>(nr)](
          q, kt, kt + L, AttentionShape<V>::kSlotKeys, hd, s);
    } else if constexpr (K::kScaling == KvScaling::kPerBlock) {
      kBlockedScoreFns<V, K>[static_cast<size_t>(nr)](q, h0, h1, s0, s1, ps, hd, s);
    } else {
      kScoreFns<V, K>[static_cast<size_t>(nr)](q, h0, h1, ps, hd, s);
      if constexpr (K::kScaling == KvScaling::kPerToken)
        for (int i = 0; i < nr; ++i)
          s[i][0] = V::mul(s[i][0], token_scale[0]), s[i][1] = V::mul(s[i][1], token_scale[1]);
    }
  }
};

// Step 1 for one slot: scores of rows [r_first, rows), scaled, -inf where a row may not look.
template <class V, class K>
[[gnu::always_inline]] inline void score_slot(const KvLayerView& cache, const AttentionSpan& sp,
                                              const HeadPages<K>& pages, const BlockRows& block, int64_t b0, int64_t s0,
                                              int64_t ns, int64_t rows, float* kt, float* sc) {
  using S = AttentionShape<V>;
  constexpr int64_t L = V::kWidth;
  constexpr int kRows = K::kScaling == KvScaling::kPerBlock ? S::kBlockedScoreRows : S::kScoreRows;
  const int64_t hd = cache.head_dim, ps = cache.page.size(), nh = sp.head_end - sp.head_begin;
  const SlotKeys<V, K> keys(cache, pages, b0 + s0, ns, kt);
  const typename V::Reg scale = V::set1(sp.scale), minus_inf = V::set1(-INFINITY);
  for (int64_t r0 = block.r_first; r0 < rows; r0 += kRows) {
    const int nr = static_cast<int>(rows - r0 < kRows ? rows - r0 : kRows);
    const float* q[kRows];
    for (int i = 0; i < nr; ++i) {
      const int64_t r = r0 + i;
      q[i] = sp.q + ((r / nh) * sp.heads + sp.head_begin + r % nh) * hd;
    }
    typename V::Reg s[kRows][2];
    keys.score(q, nr, kt, ps, hd, s);
    for (int i = 0; i < nr; ++i) {
      const int64_t cnt = block.seen(r0 + i) - s0;  // may be <= 0: the whole slot is masked
      float* out = sc + (r0 + i) * kAttentionBlockKeys + s0;
      for (int h = 0; h < 2; ++h)
        V::store(out + L * h, V::select_first(minus_inf, V::mul(s[i][h], scale), cnt - L * h));
    }
  }
}

// Step 2 for one row: the online-softmax step (after its window and soft-cap); scores become weights (zero past
// the keys the row sees), times the keys' value scales when given (the per-token types).
template <class V>
[[gnu::always_inline]] inline void softmax_step(SpanState& st, const BlockRows& block, int64_t r, int64_t nb,
                                                const float* value_scales) {
  constexpr int64_t L = V::kWidth;
  const int64_t cnt = block.seen(r);
  float* w = st.sc + r * kAttentionBlockKeys;
  if (!block.window_and_cap(r, w)) {
    st.corr[r] = 1.0f;
    return;
  }
  typename V::Reg mx = V::set1(-INFINITY);
  for (int64_t j = 0; j < cnt; j += L) mx = V::max(mx, V::load(w + j));  // masked lanes: -inf
  const float block_max = V::reduce_max(mx);
  const float new_max = st.run_max[r] > block_max ? st.run_max[r] : block_max;
  const typename V::Reg m = V::set1(new_max);
  typename V::Reg sum = V::zero();
  for (int64_t j = 0; j < nb; j += L) {
    const typename V::Reg e = V::select_first(V::zero(), V::exp(V::sub(V::load(w + j), m)), cnt - j);
    V::store(w + j, value_scales ? V::mul(e, V::load(value_scales + j)) : e);
    sum = V::add(sum, e);
  }
  st.corr[r] = std::exp(st.run_max[r] - new_max);  // 0 on the first block (max -inf)
  st.run_sum[r] = st.run_sum[r] * st.corr[r] + V::reduce_add(sum);
  st.run_max[r] = new_max;
}

// The per-key state of one block of keys: where each value (and its scales) is, and for the per-token types each
// value's scale (times the codes' unit), zero past the block so a whole vector of weights can be scaled.
template <class K>
struct BlockValues {
  int64_t off[kAttentionBlockKeys];   // element offset of each value from cache.v
  int64_t soff[kAttentionBlockKeys];  // blocked types: of its scales from cache.v_scale
  alignas(64) float scale[kAttentionBlockKeys];

  void fill(const KvLayerView& cache, const HeadPages<K>& pages, int64_t b0, int64_t nb) {
    for (int64_t j = 0; j < nb; ++j) off[j] = pages.value_offset(b0 + j);
    if constexpr (K::kScaling == KvScaling::kPerBlock)
      for (int64_t j = 0; j < nb; ++j) soff[j] = pages.value_scale_offset(b0 + j);
    if constexpr (K::kScaling == KvScaling::kPerToken) {
      const auto* vs = static_cast<const typename K::ScaleElem*>(cache.v_scale);
      for (int64_t j = 0; j < nb; ++j) scale[j] = scale_value<K>(vs + pages.value_scale_offset(b0 + j)) * K::kUnit;
      std::fill(scale + nb, scale + kAttentionBlockKeys, 0.0f);
    }
  }
  const float* weight_scales() const { return K::kScaling == KvScaling::kPerToken ? scale : nullptr; }
};

template <class V, class K>
void attention_span(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using S = AttentionShape<V>;
  constexpr int64_t L = V::kWidth;
  const int64_t hd = cache.head_dim, hdp = pad16(hd), rows = sp.ntok * (sp.head_end - sp.head_begin);
  SpanState st(scratch, rows, hdp);
  st.start_at_sinks(sp);
  float* kt = st.rest;  // a slot of keys gathered from pages narrower than a vector
  const HeadPages<K> pages(cache, sp);
  const int64_t end = keys_end(sp);
  if (sp.ctx_begin < end) pages.prefetch(sp.ctx_begin, std::min(end, sp.ctx_begin + kAttentionBlockKeys), true, false);
  BlockValues<K> values;
  const ValueSource<K> src{pages.v, values.off, static_cast<const typename K::ScaleElem*>(cache.v_scale), values.soff};
  for (int64_t b0 = sp.ctx_begin; b0 < end; b0 += kAttentionBlockKeys) {
    const int64_t nb = end - b0 < kAttentionBlockKeys ? end - b0 : kAttentionBlockKeys;
    const BlockRequests<K> request(cache, sp, pages, b0, nb);
    values.fill(cache, pages, b0, nb);
    const BlockRows block(sp, b0, nb);
    for (int64_t s0 = 0; s0 < nb; s0 += S::kSlotKeys) {
      if (s0 % S::kRequestKeys == 0) request(s0, S::kRequestKeys);
      score_slot<V, K>(cache, sp, pages, block, b0, s0, std::min(nb - s0, S::kSlotKeys), rows, kt, st.sc);
    }
    for (int64_t r = block.r_first; r < rows; ++r) softmax_step<V>(st, block, r, nb, values.weight_scales());
    // 3. Values: groups of rows, as even as possible (7 heads: 4 + 3), over the keys the group's last row sees
    // (the others' weights are zero there).
    const int64_t groups = (rows - block.r_first + S::kValueRows - 1) / S::kValueRows;
    for (int64_t g = 0, r0 = block.r_first; g < groups; ++g) {
      const int64_t nr = (rows - r0) / (groups - g);
      const int64_t nk = block.seen(r0 + nr - 1);
      for (int64_t d0 = 0; d0 < hd; d0 += L * S::kValueVecs) {
        const int64_t nv = std::min<int64_t>((hd - d0 + L - 1) / L, S::kValueVecs);
        const typename V::Tail last = V::tail(hd - d0 - L * (nv - 1));
        kValueFns<V, K>[static_cast<size_t>(nr)][static_cast<size_t>(nv)](
            st.acc + r0 * hdp + d0, hdp, st.corr + r0, st.sc + r0 * kAttentionBlockKeys, src, d0, nk, last);
      }
      r0 += nr;
    }
  }
  st.write(sp, hd);
}

}  // namespace
}  // namespace minfer::kernels::x86
