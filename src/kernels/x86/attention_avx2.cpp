// AVX2 paged attention for one span: page by page online softmax, f32 or bf16 KV in the page layout of
// KvLayerView: the scores of 8 keys are one vector (keys are stored transposed; up to 4 vectors, i.e. independent
// FMA chains, at a time), values are accumulated in head-dim register chunks of up to 64 floats.
#include <cmath>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

constexpr int kChunk = 8;  // vectors of a head-dim chunk held in registers

int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

// n (<= 8) K/V elements as f32, the rest zero; never reads past them.
template <class L>
inline __m256 load_kv(const typename L::Elem* p, int64_t n) {
  return n >= 8 ? L::load(p) : L::load(p, n);
}

// s[0:8NV) = q . k_j for NV vectors of 8 keys, keys transposed (element d of key j at k[d * ps + j]); the last
// vector holds `last` keys (never read past). Four independent FMA chains whatever NV: with fewer than four
// vectors (pages of 8 or 16 keys) the head dim is split over kSets sets of accumulators, added at the end.
template <class L, int NV>
void score_keys(const float* q, const typename L::Elem* k, int64_t ps, int64_t hd, int64_t last, float* s) {
  constexpr int kSets = NV <= 2 ? 4 / NV : 1;
  __m256 a[kSets][NV];
  for (int t = 0; t < kSets; ++t)
    for (int c = 0; c < NV; ++c) a[t][c] = _mm256_setzero_ps();
  auto step = [&](int t, int64_t d) {
    const __m256 qd = _mm256_set1_ps(q[d]);
    const typename L::Elem* row = k + d * ps;
    for (int c = 0; c < NV; ++c)
      a[t][c] = _mm256_fmadd_ps(qd, load_kv<L>(row + 8 * c, c == NV - 1 ? last : 8), a[t][c]);
  };
  int64_t d = 0;
  for (; d + kSets <= hd; d += kSets)
    for (int t = 0; t < kSets; ++t) step(t, d + t);
  for (; d < hd; ++d) step(0, d);
  for (int c = 0; c < NV; ++c) {
    __m256 sum = a[0][c];
    for (int t = 1; t < kSets; ++t) sum = _mm256_add_ps(sum, a[t][c]);
    _mm256_maskstore_ps(s + 8 * c, lane_mask(c == NV - 1 ? last : 8), sum);
  }
}

// s[j] = q . k_j for the page's keys j < cnt, 32 keys (four vectors) at a time. L loads K (f32 or bf16).
template <class L>
void score_page(const float* q, const typename L::Elem* k, int64_t ps, int64_t hd, int64_t cnt, float* s) {
  using Fn = void (*)(const float*, const typename L::Elem*, int64_t, int64_t, int64_t, float*);
  static constexpr Fn kKeys[5] = {nullptr, score_keys<L, 1>, score_keys<L, 2>, score_keys<L, 3>, score_keys<L, 4>};
  for (int64_t j = 0; j < cnt; j += 32) {
    const int64_t n = cnt - j < 32 ? cnt - j : 32;
    const int64_t nv = (n + 7) / 8;
    kKeys[nv](q, k + j, ps, hd, n - 8 * (nv - 1), s + j);
  }
}

// acc[0:8NV] = acc * corr + sum_j p[j] * v_j[0:8NV]. L loads V (f32 or bf16).
template <class L, int NV>
void value_chunk(const void* vv, int64_t stride, const float* p, int64_t cnt, int64_t last, float corr, float* acc) {
  const auto* vbase = static_cast<const typename L::Elem*>(vv);
  __m256i mask[NV];
  __m256 a[NV];
  const __m256 c = _mm256_set1_ps(corr);
  for (int v = 0; v < NV; ++v) {
    mask[v] = lane_mask(v == NV - 1 ? last : 8);
    a[v] = _mm256_mul_ps(_mm256_maskload_ps(acc + 8 * v, mask[v]), c);
  }
  for (int64_t j = 0; j < cnt; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const auto* vr = vbase + j * stride;
    for (int v = 0; v < NV; ++v) a[v] = _mm256_fmadd_ps(pj, load_kv<L>(vr + 8 * v, v == NV - 1 ? last : 8), a[v]);
  }
  for (int v = 0; v < NV; ++v) _mm256_maskstore_ps(acc + 8 * v, mask[v], a[v]);
}

using ValueFn = void (*)(const void*, int64_t, const float*, int64_t, int64_t, float, float*);
template <class L>
struct ChunkFns {
  static constexpr ValueFn kValue[kChunk + 1] = {nullptr,           value_chunk<L, 1>, value_chunk<L, 2>,
                                                 value_chunk<L, 3>, value_chunk<L, 4>, value_chunk<L, 5>,
                                                 value_chunk<L, 6>, value_chunk<L, 7>, value_chunk<L, 8>};
};

template <class L>
void span_impl(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  using Elem = typename L::Elem;
  const int64_t hd = cache.head_dim;
  const int64_t ps = cache.page_size;
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
    const int64_t block = cache.head_block(sp.block_table[pg], sp.kv_head);
    const Elem* kpage = static_cast<const Elem*>(cache.k) + block;  // keys transposed: [head_dim][page_size]
    const Elem* vpage = static_cast<const Elem*>(cache.v) + block;  // values: [page_size][head_dim]
    const int64_t page_end = sp.ctx_end - page_first < ps ? sp.ctx_end - page_first : ps;  // keys of the range
    for (int64_t t = 0; t < sp.ntok; ++t) {
      const int64_t pos = sp.first_pos + t;
      if (pos < page_first) continue;
      const int64_t cnt = pos - page_first + 1 < page_end ? pos - page_first + 1 : page_end;
      for (int64_t h = sp.head_begin; h < sp.head_end; ++h) {
        const int64_t r = t * nh + (h - sp.head_begin);
        const float* q = sp.q + (t * sp.heads + h) * hd;
        score_page<L>(q, kpage, ps, hd, cnt, s);
        float page_max = -INFINITY;
        for (int64_t j = 0; j < cnt; ++j) {
          s[j] *= sp.scale;
          page_max = s[j] > page_max ? s[j] : page_max;
        }
        const float new_max = page_max > run_max[r] ? page_max : run_max[r];
        const float corr = std::exp(run_max[r] - new_max);
        const __m256 vmax = _mm256_set1_ps(new_max);
        __m256 sum = _mm256_setzero_ps();
        for (int64_t j = 0; j < cnt; j += 8) {
          const __m256i m = lane_mask(cnt - j);
          const __m256 e =
              _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(s + j, m), vmax)), _mm256_castsi256_ps(m));
          _mm256_maskstore_ps(s + j, m, e);
          sum = _mm256_add_ps(sum, e);
        }
        run_sum[r] = run_sum[r] * corr + hsum(sum);
        run_max[r] = new_max;
        for (int64_t d0 = 0; d0 < hd; d0 += 8 * kChunk) {
          const int64_t nv = (hd - d0 + 7) / 8 < kChunk ? (hd - d0 + 7) / 8 : kChunk;
          ChunkFns<L>::kValue[nv](vpage + d0, hd, s, cnt, hd - d0 - 8 * (nv - 1), corr, acc + r * pad16(hd) + d0);
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
      const __m256 inv = _mm256_set1_ps(1.0f / run_sum[r]);
      float* o = sp.out + (t * sp.heads + h) * hd;
      for (int64_t d = 0; d < hd; d += 8) {
        const __m256i m = lane_mask(hd - d);
        _mm256_maskstore_ps(o + d, m, _mm256_mul_ps(_mm256_maskload_ps(acc + r * pad16(hd) + d, m), inv));
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

}  // namespace minfer::kernels::avx2
