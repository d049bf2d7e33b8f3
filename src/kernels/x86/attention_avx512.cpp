// AVX-512 paged attention for one span (see kernels/leaf.h), f32 or bf16 KV (widened to f32 as loaded). The
// span's context range is visited once, in order, in groups of up to 16 keys (a page, or a 16-key part of a
// larger page). Each group's keys are transposed once into a [head_dim][16] block and its values widened once,
// so that every (token, head) row of the span then scores the 16 keys as one vector (a broadcast of q[d]
// times row d of the block: no horizontal sums), updates its running max and sum on that vector (online
// softmax: the context length is unbounded) and accumulates the values, 4 rows at a time sharing each value
// load. K/V stream from memory once per span and stay in L1 while all rows use them. Each row's arithmetic
// depends only on its own query and position, never on which rows share the span, so batching cannot change
// a row's result.
#include <cmath>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int64_t kGroupKeys = 16;  // keys scored together (one vector)
constexpr int kScoreRows = 8;       // rows scored together (8 independent FMA chains)
constexpr int kValueRows = 4;       // rows accumulating values together
constexpr int kValueVecs = 4;       // head-dim vectors per value pass (4 x 4 accumulators)

int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

// kt[d * 16 + j] = key j's element d, for keys j < nk (zero beyond) of a group whose first key is at `k`.
template <class L>
void transpose_keys(const typename L::Elem* k, int64_t stride, int64_t nk, int64_t hd, float* kt) {
  for (int64_t d0 = 0; d0 < hd; d0 += 16) {
    const __mmask16 dims = tail_mask(hd - d0);
    __m512 r[16];
    for (int64_t j = 0; j < 16; ++j) r[j] = j < nk ? L::load(k + j * stride + d0, dims) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t i = 0; i < 16 && d0 + i < hd; ++i) _mm512_storeu_ps(kt + (d0 + i) * 16, r[i]);
  }
}

// vf[j * hdp + d] = value j's element d as f32, for j < nk.
template <class L>
void widen_values(const typename L::Elem* v, int64_t stride, int64_t nk, int64_t hd, int64_t hdp, float* vf) {
  for (int64_t j = 0; j < nk; ++j) {
    for (int64_t d = 0; d < hd; d += 16)
      _mm512_storeu_ps(vf + j * hdp + d, L::load(v + j * stride + d, tail_mask(hd - d)));
  }
}

// Requests rows [0, n) of `hd` elements, `stride` elements apart, into L1. Written as inline asm because GCC
// deletes a loop whose only statements are __builtin_prefetch calls (it has no visible effect).
template <class T>
void prefetch_rows(const T* p, int64_t stride, int64_t n, int64_t hd) {
  for (int64_t j = 0; j < n; ++j) {
    const char* row = reinterpret_cast<const char*>(p + j * stride);
    for (int64_t b = 0; b < hd * static_cast<int64_t>(sizeof(T)); b += 64)
      asm volatile("prefetcht0 %0" : : "m"(row[b]));
  }
}

// s[i] = (q_i . key j for the group's 16 keys j) for NR rows: one FMA chain per row over the head dim.
template <int NR>
void score_rows(const float* const* q, const float* kt, int64_t hd, __m512* s) {
  __m512 a[NR];
  for (int i = 0; i < NR; ++i) a[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + d * 16);
    for (int i = 0; i < NR; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d]), k, a[i]);
  }
  for (int i = 0; i < NR; ++i) s[i] = a[i];
}

// acc_i[0:16NV] = acc_i * corr_i + sum_j p_i[j] * v_j[0:16NV] for NR rows (the last vector masked by `last`);
// corr_i is lane lane0 + i of `corr`. Row weights and corrections are taken from vectors by permutes rather
// than as scalars from memory: they were just stored as whole vectors, and a scalar load from a recent vector
// store cannot be forwarded (it waits for the store to reach the cache).
template <int NR, int NV>
void value_rows(float* const* acc, __m512 corr, int lane0, const float* const* p, const float* vf, int64_t hdp,
                int64_t nk, __mmask16 last) {
  __m512 a[NR][NV];
  __m512 pv[NR];
  for (int i = 0; i < NR; ++i) {
    const __m512 c = _mm512_permutexvar_ps(_mm512_set1_epi32(lane0 + i), corr);
    for (int v = 0; v < NV; ++v) a[i][v] = _mm512_mul_ps(_mm512_loadu_ps(acc[i] + 16 * v), c);
    pv[i] = _mm512_loadu_ps(p[i]);
  }
  for (int64_t j = 0; j < nk; ++j) {
    __m512 vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = _mm512_loadu_ps(vf + j * hdp + 16 * v);
    const __m512i lane = _mm512_set1_epi32(static_cast<int>(j));
    for (int i = 0; i < NR; ++i) {
      const __m512 pj = _mm512_permutexvar_ps(lane, pv[i]);
      for (int v = 0; v < NV; ++v) a[i][v] = _mm512_fmadd_ps(pj, vv[v], a[i][v]);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(acc[i] + 16 * v, v == NV - 1 ? last : __mmask16(0xffff), a[i][v]);
}

using ScoreFn = void (*)(const float* const*, const float*, int64_t, __m512*);
constexpr ScoreFn kScore[kScoreRows + 1] = {nullptr,       score_rows<1>, score_rows<2>, score_rows<3>, score_rows<4>,
                                            score_rows<5>, score_rows<6>, score_rows<7>, score_rows<8>};
using ValueFn = void (*)(float* const*, __m512, int, const float* const*, const float*, int64_t, int64_t, __mmask16);
template <int NR>
struct ValueFns {
  static constexpr ValueFn kFor[kValueVecs + 1] = {nullptr, value_rows<NR, 1>, value_rows<NR, 2>, value_rows<NR, 3>,
                                                   value_rows<NR, 4>};
};
constexpr const ValueFn* kValue[kValueRows + 1] = {nullptr, ValueFns<1>::kFor, ValueFns<2>::kFor, ValueFns<3>::kFor,
                                                   ValueFns<4>::kFor};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t hdp = pad16(hd);
  const int64_t ps = cache.page_size;
  const int64_t stride = cache.kv_heads * hd;  // between consecutive tokens of a page
  const int64_t nh = sp.head_end - sp.head_begin;
  const int64_t rows = sp.ntok * nh;
  // Scratch (see attention_scratch_floats): per row max, sum, accumulator and page weights; the
  // group's transposed keys and widened values.
  float* run_max = scratch;
  float* run_sum = run_max + pad16(rows);
  float* acc = run_sum + pad16(rows);
  float* p = acc + pad16(rows) * hdp;
  float* kt = p + pad16(rows) * kGroupKeys;
  float* vf = kt + hdp * kGroupKeys;
  for (int64_t r = 0; r < rows; ++r) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
    for (int64_t d = 0; d < hdp; ++d) acc[r * hdp + d] = 0.0f;
  }
  const __m512 scale = _mm512_set1_ps(sp.scale);
  const int64_t last_pos = sp.first_pos + sp.ntok - 1;
  const int64_t end = sp.ctx_end < last_pos + 1 ? sp.ctx_end : last_pos + 1;  // keys [ctx_begin, end) are read
  const int64_t step = kGroupKeys < ps ? kGroupKeys : ps;
  // The group of keys from key0: its first slot in the pool and its size.
  auto group_at = [&](int64_t key0, int64_t* nk) {
    const int64_t in_page = key0 % ps;
    const int64_t page_room = ps - in_page < kGroupKeys ? ps - in_page : kGroupKeys;
    *nk = end - key0 < page_room ? end - key0 : page_room;
    return (static_cast<int64_t>(sp.block_table[key0 / ps]) * ps + in_page) * stride + sp.kv_head * hd;
  };
  // Pages lie anywhere in the pool, so the hardware prefetchers (which stay within a 4 KiB page) cannot run
  // ahead: the keys and values of the group kPrefetchGroups ahead are requested while this one is computed.
  constexpr int64_t kPrefetchGroups = 2;
  auto prefetch_group = [&](int64_t key0) {
    if (key0 >= end) return;
    int64_t nk = 0;
    const int64_t at = group_at(key0, &nk);
    prefetch_rows(static_cast<const Elem*>(cache.k) + at, stride, nk, hd);
    prefetch_rows(static_cast<const Elem*>(cache.v) + at, stride, nk, hd);
  };
  for (int64_t g = 1; g < kPrefetchGroups; ++g) prefetch_group(sp.ctx_begin + g * step);
  for (int64_t key0 = sp.ctx_begin; key0 < end; key0 += step) {
    prefetch_group(key0 + kPrefetchGroups * step);
    int64_t nk = 0;
    const int64_t at = group_at(key0, &nk);
    transpose_keys<L>(static_cast<const Elem*>(cache.k) + at, stride, nk, hd, kt);
    widen_values<L>(static_cast<const Elem*>(cache.v) + at, stride, nk, hd, hdp, vf);
    // Rows whose position reaches the group: tokens from t_first on (rows are token-major).
    const int64_t t_first = key0 > sp.first_pos ? key0 - sp.first_pos : 0;
    const int64_t r_first = t_first * nh;

    for (int64_t r0 = r_first; r0 < rows; r0 += kScoreRows) {
      const int nr = static_cast<int>(rows - r0 < kScoreRows ? rows - r0 : kScoreRows);
      const float* q[kScoreRows];
      int64_t pos[kScoreRows];
      for (int64_t i = 0, t = r0 / nh, h = r0 % nh; i < nr; ++i) {  // rows are token-major
        q[i] = sp.q + (t * sp.heads + sp.head_begin + h) * hd;
        pos[i] = sp.first_pos + t;
        if (++h == nh) h = 0, ++t;
      }
      __m512 sc[kScoreRows];
      kScore[nr](q, kt, hd, sc);
      __mmask16 seen[kScoreRows];  // the keys each row may see (causal)
      __m512 group_max = _mm512_setzero_ps();
      for (int i = 0; i < nr; ++i) {
        const int64_t cnt = pos[i] - key0 + 1 < nk ? pos[i] - key0 + 1 : nk;
        seen[i] = tail_mask(cnt);
        sc[i] = _mm512_mul_ps(sc[i], scale);
        group_max = _mm512_mask_mov_ps(group_max, __mmask16(1u << i),
                                       _mm512_set1_ps(_mm512_mask_reduce_max_ps(seen[i], sc[i])));
      }
      // Online softmax over the block's rows at once (lane i = row r0 + i): new running max, the correction of
      // the old sums and accumulators, and the new sums.
      const __mmask16 block = tail_mask(nr);
      const __m512 old_max = _mm512_maskz_loadu_ps(block, run_max + r0);
      const __m512 new_max = _mm512_max_ps(old_max, group_max);
      const __m512 corr = exp_ps(_mm512_sub_ps(old_max, new_max));
      __m512 sums = _mm512_setzero_ps();
      const float* pr[kScoreRows];
      for (int i = 0; i < nr; ++i) {
        const __m512 row_max = _mm512_permutexvar_ps(_mm512_set1_epi32(i), new_max);
        const __m512 e = _mm512_maskz_mov_ps(seen[i], exp_ps(_mm512_sub_ps(sc[i], row_max)));
        sums = _mm512_mask_mov_ps(sums, __mmask16(1u << i), _mm512_set1_ps(_mm512_reduce_add_ps(e)));
        _mm512_storeu_ps(p + (r0 + i) * kGroupKeys, e);
        pr[i] = p + (r0 + i) * kGroupKeys;
      }
      _mm512_mask_storeu_ps(run_max + r0, block, new_max);
      _mm512_mask_storeu_ps(run_sum + r0, block,
                            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(block, run_sum + r0), corr, sums));
      // The block's values, kValueRows rows at a time.
      for (int i0 = 0; i0 < nr; i0 += kValueRows) {
        const int nv_rows = nr - i0 < kValueRows ? nr - i0 : kValueRows;
        for (int64_t d0 = 0; d0 < hd; d0 += 16 * kValueVecs) {
          const int64_t nv = (hd - d0 + 15) / 16 < kValueVecs ? (hd - d0 + 15) / 16 : kValueVecs;
          const __mmask16 last = tail_mask(hd - d0 - 16 * (nv - 1));
          float* ar[kValueRows];
          for (int i = 0; i < nv_rows; ++i) ar[i] = acc + (r0 + i0 + i) * hdp + d0;
          kValue[nv_rows][nv](ar, corr, i0, pr + i0, vf + d0, hdp, nk, last);
        }
      }
    }
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
