// How the x86 attention leaves (attention_impl.h) read the quantized KV types' codes in registers: a pair of key
// dimensions of a vector of keys, a vector of a value's dimensions, the scores of llama.cpp's blocked types (one
// scale per 32 dimensions of each key), and the keys of pages narrower than a vector gathered (and scaled) into
// scratch. Written once over the vector-traits type V and a KvCodes trait K (attention_common.h); internal linkage.
#pragma once

#include <cstdint>

#include "kernels/kv_format.h"
#include "kernels/x86/attention_common.h"
#include "kernels/x86/vec_common.h"

namespace minfer::kernels::x86 {
namespace {

// One scale as f32 (f16 through F16C, which both ISAs' files are built with).
template <class K>
inline float scale_value(const typename K::ScaleElem* p) {
  if constexpr (sizeof(typename K::ScaleElem) == 2) {
    return _cvtsh_ss(*p);
  } else {
    return *p;
  }
}

// Dimensions d and d + 1 (d even) of the vector of keys whose row 0 is at h (rows ld apart; q4_0: one row of
// bytes holds both).
template <class V, class K>
[[gnu::always_inline]] inline void load_key_pair(const typename K::Elem* h, int64_t d, int64_t ld, typename V::Reg& r0,
                                                 typename V::Reg& r1) {
  if constexpr (K::kQ4) {
    K::Load::load(h + (d / 2) * ld, r0, r1);
  } else {
    r0 = V::template load_weights<typename K::Load>(h + d * ld);
    r1 = V::template load_weights<typename K::Load>(h + (d + 1) * ld);
  }
}

// Dimensions [dim, dim + width) of the value whose codes start at row (the last vector of a head: `last` lanes).
template <class V, class K>
[[gnu::always_inline]] inline typename V::Reg load_value(const typename K::Elem* row, int64_t dim, bool is_last,
                                                         typename V::Tail last) {
  if constexpr (K::kQ4) {  // block_q4_0: byte i of a block holds elements i (low nibble) and 16 + i (high)
    typename V::Reg low, high;
    K::Load::load(row + (dim / kKvBlockDims) * 16 + dim % 16, low, high);
    return dim % kKvBlockDims >= 16 ? high : low;
  } else {
    return is_last ? V::template load_weights_tail<typename K::Load>(row + dim, last)
                   : V::template load_weights<typename K::Load>(row + dim);
  }
}

// s[i][0..1] = q_i . (the slot's keys) for NR rows of a blocked type: per block of 32 dimensions, two FMA chains a
// row over the codes, then times the block's scales of the slot's keys (a vector at sc0 + b * ld and one at
// sc1 + b * ld) into the row's sums.
template <class V, class K, int NR>
void score_rows_blocked(const float* const* q, const typename K::Elem* h0, const typename K::Elem* h1,
                        const typename K::ScaleElem* sc0, const typename K::ScaleElem* sc1, int64_t ld, int64_t hd,
                        typename V::Reg (*s)[2]) {
  using Reg = typename V::Reg;
  Reg a0[NR], a1[NR];
  for (int i = 0; i < NR; ++i) a0[i] = a1[i] = V::zero();
  for (int64_t b = 0; b < hd; b += kKvBlockDims) {
    Reg p0[NR], p1[NR];
    for (int i = 0; i < NR; ++i) p0[i] = p1[i] = V::zero();
    for (int64_t d = b; d < b + kKvBlockDims; d += 2) {
      Reg k00, k01, k10, k11;
      load_key_pair<V, K>(h0, d, ld, k00, k01);
      load_key_pair<V, K>(h1, d, ld, k10, k11);
#pragma GCC unroll 8
      for (int i = 0; i < NR; ++i) {
        const Reg qa = V::broadcast(q[i] + d), qb = V::broadcast(q[i] + d + 1);
        p0[i] = V::fmadd(qb, k01, V::fmadd(qa, k00, p0[i]));
        p1[i] = V::fmadd(qb, k11, V::fmadd(qa, k10, p1[i]));
      }
    }
    const int64_t at = (b / kKvBlockDims) * ld;
    const Reg c0 = V::template load_weights<typename K::ScaleLoad>(sc0 + at);
    const Reg c1 = V::template load_weights<typename K::ScaleLoad>(sc1 + at);
    for (int i = 0; i < NR; ++i) a0[i] = V::fmadd(p0[i], c0, a0[i]), a1[i] = V::fmadd(p1[i], c1, a1[i]);
  }
  for (int i = 0; i < NR; ++i) s[i][0] = a0[i], s[i][1] = a1[i];
}

// Keys [key0, key0 + n) of pages narrower than a vector, decoded to f32 (scales applied) into kt: dimension d of
// key key0 + j at kt[d * ld + j].
template <class V, class K>
void gather_keys(const HeadPages<K>& pages, const KvLayerView& cache, int64_t key0, int64_t n, float* kt, int64_t ld) {
  using Reg = typename V::Reg;
  const int64_t ps = pages.ps, hd = pages.hd;
  const auto* kscale = static_cast<const typename K::ScaleElem*>(cache.k_scale);
  const typename V::Tail tail = V::tail(ps);
  for (int64_t q0 = 0; q0 < n; q0 += ps) {
    const typename K::Elem* src = pages.key_row(key0 + q0);
    const int64_t s_at = K::kScaling == KvScaling::kNone ? 0 : pages.key_scale_offset(key0 + q0);
    Reg token_scale = V::set1(K::kUnit);
    if constexpr (K::kScaling == KvScaling::kPerToken)
      token_scale = V::mul(token_scale, V::template load_weights_tail<typename K::ScaleLoad>(kscale + s_at, tail));
    // The scale of dimension d: the token's, or its block's.
    const auto scale_of = [&](int64_t d) {
      if constexpr (K::kScaling == KvScaling::kPerBlock) {
        return V::template load_weights_tail<typename K::ScaleLoad>(kscale + s_at + (d / kKvBlockDims) * ps, tail);
      } else {
        return token_scale;
      }
    };
    if constexpr (K::kQ4) {
      for (int64_t d = 0; d < hd; d += 2) {
        Reg r0, r1;
        K::Load::load(src + (d / 2) * ps, r0, r1);  // reads a vector of bytes: the pool has more past a page
        V::store_tail(kt + d * ld + q0, ps, V::mul(r0, scale_of(d)));
        V::store_tail(kt + (d + 1) * ld + q0, ps, V::mul(r1, scale_of(d)));
      }
    } else {
      for (int64_t d = 0; d < hd; ++d) {
        const Reg r = V::template load_weights_tail<typename K::Load>(src + d * ps, tail);
        V::store_tail(kt + d * ld + q0, ps, V::mul(r, scale_of(d)));
      }
    }
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
