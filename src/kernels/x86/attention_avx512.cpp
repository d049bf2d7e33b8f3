// AVX-512 paged attention for one span (see kernels/leaf.h), f32 or bf16 KV (widened to f32 as loaded). The
// span's context range is visited once, in order, in blocks of kBlockKeys keys: one step of the online softmax
// (flash-attention style) per block, so the context length is unbounded while the per-block bookkeeping (the
// running max, the rescaling of the accumulators) is paid once per 128 keys instead of once per 16.
//  1. Scores: the block's keys are transposed 32 at a time into a [head_dim][32] slot, so every (token, head)
//     row scores 32 keys as two vectors (a broadcast of q[d] times row d of the slot: no horizontal sums, 16
//     independent FMA chains for 8 rows), scaled, masked (causal) and kept per row in scratch.
//  2. Softmax step, per row: the block's max, the correction of the running sum and accumulator, and the
//     weights exp(score - max) in place of the scores.
//  3. Values: up to 6 rows at a time accumulate weight x value over the block's keys, the value rows widened
//     as loaded and shared by all rows of the group, the accumulators in registers for the whole block.
// K/V pages lie anywhere in the pool, so the hardware prefetchers (which stay within a 4 KiB page) cannot run
// ahead: each block requests its own values and the next block's keys before it starts. Each row's arithmetic
// depends only on its own query and position, never on which rows share the span (a masked key adds an exact
// zero), so batching cannot change a row's result.
#include <algorithm>
#include <cmath>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int64_t kBlockKeys = kAttentionBlockKeys;  // keys per online-softmax step
constexpr int64_t kSlotKeys = 32;                    // keys transposed and scored together (two vectors)
constexpr int kScoreRows = 8;                        // rows scored together (16 FMA chains)
constexpr int kValueRows = 6;                        // rows accumulating values together (<= 24 accumulators)
constexpr int kValueVecs = 4;                        // head-dim vectors per value pass

int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

// kt[d * 32 + j] = element d of key j (at k + off[j]), for the slot's keys j < nk (zero beyond).
template <class L>
void transpose_slot(const typename L::Elem* k, const int64_t* off, int64_t nk, int64_t hd, float* kt) {
  for (int64_t h = 0; h < kSlotKeys; h += 16) {
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
      const __mmask16 dims = tail_mask(hd - d0);
      __m512 r[16];
      for (int64_t j = 0; j < 16; ++j) r[j] = h + j < nk ? L::load(k + off[h + j] + d0, dims) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t i = 0; i < 16 && d0 + i < hd; ++i) _mm512_storeu_ps(kt + (d0 + i) * kSlotKeys + h, r[i]);
    }
  }
}

// Requests `lines` cache lines from each of the n rows at base + off[j]. Written as inline asm because GCC
// deletes a loop whose only statements are __builtin_prefetch calls (it has no visible effect).
template <class T>
void prefetch_rows(const T* base, const int64_t* off, int64_t n, int64_t bytes) {
  for (int64_t j = 0; j < n; ++j) {
    const char* row = reinterpret_cast<const char*>(base + off[j]);
    for (int64_t b = 0; b < bytes; b += 64) asm volatile("prefetcht0 %0" : : "m"(row[b]));
  }
}

// Requests the keys of the first block of span `sp` (the one this thread runs next); off: kBlockKeys of room.
template <class Elem>
void prefetch_span_start(const KvLayerView& cache, const AttentionSpan& sp, int64_t* off) {
  const int64_t ps = cache.page_size, stride = cache.kv_heads * cache.head_dim;
  const int64_t end = std::min(sp.ctx_end, sp.first_pos + sp.ntok);
  const int64_t n = std::min(kBlockKeys, end - sp.ctx_begin);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t key = sp.ctx_begin + j;
    off[j] = (static_cast<int64_t>(sp.block_table[key / ps]) * ps + key % ps) * stride;
  }
  prefetch_rows(static_cast<const Elem*>(cache.k) + sp.kv_head * cache.head_dim, off, n,
                cache.head_dim * static_cast<int64_t>(sizeof(Elem)));
}

// s[i][0..1] = q_i . (the slot's 32 keys) for NR rows: two FMA chains per row over the head dim.
template <int NR>
void score_rows(const float* const* q, const float* kt, int64_t hd, __m512 (*s)[2]) {
  __m512 a0[NR], a1[NR];
  for (int i = 0; i < NR; ++i) a0[i] = a1[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m512 k0 = _mm512_loadu_ps(kt + d * kSlotKeys);
    const __m512 k1 = _mm512_loadu_ps(kt + d * kSlotKeys + 16);
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
#pragma GCC unroll 8
  for (int i = 0; i < NR; ++i) {
#pragma GCC unroll 4
    for (int u = 0; u < NV - 1; ++u) _mm512_storeu_ps(acc + i * hdp + 16 * u, a[i][u]);
    _mm512_mask_storeu_ps(acc + i * hdp + 16 * (NV - 1), last, a[i][NV - 1]);
  }
}

using ScoreFn = void (*)(const float* const*, const float*, int64_t, __m512 (*)[2]);
constexpr ScoreFn kScore[kScoreRows + 1] = {nullptr,       score_rows<1>, score_rows<2>, score_rows<3>, score_rows<4>,
                                            score_rows<5>, score_rows<6>, score_rows<7>, score_rows<8>};

template <class L>
struct ValueFns {
  using Fn = void (*)(float*, int64_t, const float*, const float*, const typename L::Elem*, const int64_t*, int64_t,
                      __mmask16);
  template <int NR>
  static constexpr Fn kRow[kValueVecs + 1] = {nullptr, value_rows<L, NR, 1>, value_rows<L, NR, 2>, value_rows<L, NR, 3>,
                                              value_rows<L, NR, 4>};
  static constexpr const Fn* kFor[kValueRows + 1] = {nullptr, kRow<1>, kRow<2>, kRow<3>, kRow<4>, kRow<5>, kRow<6>};
};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t hdp = pad16(hd);
  const int64_t ps = cache.page_size;
  const int64_t stride = cache.kv_heads * hd;  // between consecutive tokens of a page
  const int64_t nh = sp.head_end - sp.head_begin;
  const int64_t rows = sp.ntok * nh;
  // Scratch (see attention_scratch_floats): per row max, sum, correction, accumulator and block of scores /
  // weights; one transposed slot of keys.
  float* run_max = scratch;
  float* run_sum = run_max + pad16(rows);
  float* corr = run_sum + pad16(rows);
  float* acc = corr + pad16(rows);
  float* sc = acc + pad16(rows) * hdp;
  float* kt = sc + pad16(rows) * kBlockKeys;
  for (int64_t r = 0; r < rows; ++r) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
    for (int64_t d = 0; d < hdp; ++d) acc[r * hdp + d] = 0.0f;
  }
  const Elem* kbase = static_cast<const Elem*>(cache.k) + sp.kv_head * hd;
  const Elem* vbase = static_cast<const Elem*>(cache.v) + sp.kv_head * hd;
  const int64_t row_bytes = hd * static_cast<int64_t>(sizeof(Elem));
  const int64_t last_pos = sp.first_pos + sp.ntok - 1;
  const int64_t end = sp.ctx_end < last_pos + 1 ? sp.ctx_end : last_pos + 1;  // keys [ctx_begin, end) are read
  // Element offsets (from kbase / vbase) of keys [b0, b0 + n).
  // Page sizes are powers of two (EngineConfig): a shift and a mask instead of a division per key.
  const int page_shift = __builtin_ctzll(static_cast<unsigned long long>(ps));
  auto offsets = [&](int64_t b0, int64_t n, int64_t* off) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t key = b0 + j;
      off[j] = ((static_cast<int64_t>(sp.block_table[key >> page_shift]) << page_shift) + (key & (ps - 1))) * stride;
    }
  };
  int64_t off[kBlockKeys], next_off[kBlockKeys];
  int64_t nb = end - sp.ctx_begin < kBlockKeys ? end - sp.ctx_begin : kBlockKeys;
  if (nb > 0) {
    offsets(sp.ctx_begin, nb, off);
    prefetch_rows(kbase, off, nb, row_bytes);
  }
  for (int64_t b0 = sp.ctx_begin; b0 < end; b0 += kBlockKeys) {
    const int64_t nb_next = end - (b0 + kBlockKeys) < kBlockKeys ? end - (b0 + kBlockKeys) : kBlockKeys;
    prefetch_rows(vbase, off, nb, row_bytes);
    if (nb_next > 0) {
      offsets(b0 + kBlockKeys, nb_next, next_off);
      prefetch_rows(kbase, next_off, nb_next, row_bytes);
    } else if (sp.next) {
      prefetch_span_start<Elem>(cache, *sp.next, next_off);
    }
    // Rows whose position reaches the block: tokens from t_first on (rows are token-major).
    const int64_t t_first = b0 > sp.first_pos ? b0 - sp.first_pos : 0;
    const int64_t r_first = t_first * nh;
    // Keys of the block row r sees (at least one for r >= r_first).
    auto seen = [&](int64_t r) {
      const int64_t n = sp.first_pos + r / nh - b0 + 1;
      return n < nb ? n : nb;
    };

    // 1. Scores, scaled, -inf where the row may not look (causal) or past the block.
    const __m512 scale = _mm512_set1_ps(sp.scale);
    const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
    for (int64_t s0 = 0; s0 < nb; s0 += kSlotKeys) {
      transpose_slot<L>(kbase, off + s0, nb - s0 < kSlotKeys ? nb - s0 : kSlotKeys, hd, kt);
      for (int64_t r0 = r_first; r0 < rows; r0 += kScoreRows) {
        const int nr = static_cast<int>(rows - r0 < kScoreRows ? rows - r0 : kScoreRows);
        const float* q[kScoreRows];
        for (int i = 0; i < nr; ++i) {
          const int64_t r = r0 + i;
          q[i] = sp.q + ((r / nh) * sp.heads + sp.head_begin + r % nh) * hd;
        }
        __m512 s[kScoreRows][2];
        kScore[nr](q, kt, hd, s);
        for (int i = 0; i < nr; ++i) {
          const int64_t cnt = seen(r0 + i) - s0;  // may be <= 0: the whole slot is masked
          float* out = sc + (r0 + i) * kBlockKeys + s0;
          for (int h = 0; h < 2; ++h) {
            const __mmask16 m = tail_mask(cnt - 16 * h < 0 ? 0 : cnt - 16 * h);
            _mm512_storeu_ps(out + 16 * h, _mm512_mask_mul_ps(minus_inf, m, s[i][h], scale));
          }
        }
      }
    }

    // 2. The online-softmax step per row: scores become weights (zero past the keys the row sees).
    for (int64_t r = r_first; r < rows; ++r) {
      const int64_t cnt = seen(r);
      float* w = sc + r * kBlockKeys;
      __m512 mx = minus_inf;
      for (int64_t j = 0; j < cnt; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(w + j));  // masked lanes: -inf
      const float block_max = _mm512_reduce_max_ps(mx);
      const float new_max = run_max[r] > block_max ? run_max[r] : block_max;
      const __m512 m = _mm512_set1_ps(new_max);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j = 0; j < nb; j += 16) {
        const __mmask16 live = tail_mask(cnt - j < 0 ? 0 : cnt - j);
        const __m512 e = _mm512_maskz_mov_ps(live, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(w + j), m)));
        _mm512_storeu_ps(w + j, e);
        sum = _mm512_add_ps(sum, e);
      }
      corr[r] = std::exp(run_max[r] - new_max);  // 0 on the first block (max -inf)
      run_sum[r] = run_sum[r] * corr[r] + _mm512_reduce_add_ps(sum);
      run_max[r] = new_max;
    }

    // 3. Values: groups of up to 6 rows, as even as possible (7 heads: 4 + 3), over the keys the group's last
    // row sees (the others' weights are zero there).
    const int64_t live_rows = rows - r_first;
    const int64_t groups = (live_rows + kValueRows - 1) / kValueRows;
    for (int64_t g = 0, r0 = r_first; g < groups; ++g) {
      const int64_t nr = (rows - r0) / (groups - g);
      const int64_t nk = seen(r0 + nr - 1);
      for (int64_t d0 = 0; d0 < hd; d0 += 16 * kValueVecs) {
        const int64_t nv = (hd - d0 + 15) / 16 < kValueVecs ? (hd - d0 + 15) / 16 : kValueVecs;
        const __mmask16 last = tail_mask(hd - d0 - 16 * (nv - 1));
        ValueFns<L>::kFor[nr][nv](acc + r0 * hdp + d0, hdp, corr + r0, sc + r0 * kBlockKeys, vbase + d0, off, nk, last);
      }
      r0 += nr;
    }
    if (nb_next > 0) std::copy(next_off, next_off + nb_next, off);
    nb = nb_next;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r / nh, h = sp.head_begin + r % nh;
    if (sp.partial) {
      float* part = sp.partial + r * (hd + 2);
      part[0] = run_max[r];
      part[1] = run_sum[r];
      for (int64_t d = 0; d < hd; ++d) part[2 + d] = acc[r * hdp + d];
      continue;
    }
    const __m512 inv = _mm512_set1_ps(1.0f / run_sum[r]);
    float* o = sp.out + (t * sp.heads + h) * hd;
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 m = tail_mask(hd - d);
      _mm512_mask_storeu_ps(o + d, m, _mm512_mul_ps(_mm512_loadu_ps(acc + r * hdp + d), inv));
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
