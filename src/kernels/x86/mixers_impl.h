// The recurrent mixers' leaves (kernels/mixers.h) for both x86 ISAs, written once over a vector-traits type V
// (avx2::Vec, avx512::Vec); mixers_<isa>.cpp instantiates them with its own flags. The algorithms are the
// reference's (kernels/ref/mixers_ref.cpp), vectorised along the contiguous dimension: the state's value columns,
// the head's key dimension, the convolved channels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/mixers.h"

namespace minfer::kernels::x86 {
namespace {

template <class V>
float dot(const float* a, const float* b, int64_t n) {
  constexpr int64_t L = V::kWidth;
  typename V::Reg s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    s0 = V::fmadd(V::load(a + i), V::load(b + i), s0);
    s1 = V::fmadd(V::load(a + i + L), V::load(b + i + L), s1);
  }
  for (; i < n; i += L) s0 = V::fmadd(V::load_tail(a + i, n - i), V::load_tail(b + i, n - i), s0);
  return V::reduce_add(V::add(s0, s1));
}

// y = s y + a x over n floats.
template <class V>
void scale_axpy(float* y, float s, float a, const float* x, int64_t n) {
  constexpr int64_t L = V::kWidth;
  const typename V::Reg vs = V::set1(s), va = V::set1(a);
  int64_t i = 0;
  for (; i + L <= n; i += L) V::store(y + i, V::fmadd(va, V::load(x + i), V::mul(vs, V::load(y + i))));
  if (i < n)
    V::store_tail(y + i, n - i, V::fmadd(va, V::load_tail(x + i, n - i), V::mul(vs, V::load_tail(y + i, n - i))));
}
template <class V>
void axpy(float* y, float a, const float* x, int64_t n) {
  scale_axpy<V>(y, 1.0f, a, x, n);
}

// out[m, :] (+)= sum_k a[m, k] b[k, :] for m < rows, k < depth, `cols` columns: a small GEMM register-tiled 4 rows by
// U vectors of columns, the chunked scan's products (all of them a few dozen rows deep).
template <class V>
void small_gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* out, int64_t ldo, int64_t rows,
                int64_t depth, int64_t cols, bool accumulate) {
  constexpr int64_t L = V::kWidth, U = L >= 16 ? 4 : 2;
  using Reg = typename V::Reg;
  for (int64_t m0 = 0; m0 < rows; m0 += 4) {
    const int64_t mr = std::min<int64_t>(4, rows - m0);
    for (int64_t c0 = 0; c0 < cols; c0 += U * L) {
      const int64_t w = std::min(U * L, cols - c0);
      Reg acc[4][U];
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t u = 0; u < U; ++u) {
          const int64_t n = std::clamp<int64_t>(w - u * L, 0, L);
          acc[r][u] = accumulate && r < mr && n > 0 ? V::load_tail(out + (m0 + r) * ldo + c0 + u * L, n) : V::zero();
        }
      const bool full = w == U * L;
      for (int64_t k = 0; k < depth; ++k) {
        Reg bv[U];
        const float* bk = b + k * ldb + c0;
        for (int64_t u = 0; u < U; ++u)
          bv[u] = full || (u + 1) * L <= w ? V::load(bk + u * L)
                                           : V::load_tail(bk + u * L, std::clamp<int64_t>(w - u * L, 0, L));
        for (int64_t r = 0; r < mr; ++r) {
          const Reg av = V::set1(a[(m0 + r) * lda + k]);
          for (int64_t u = 0; u < U; ++u) acc[r][u] = V::fmadd(av, bv[u], acc[r][u]);
        }
      }
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t u = 0; u * L < w; ++u)
          V::store_tail(out + (m0 + r) * ldo + c0 + u * L, std::min(L, w - u * L), acc[r][u]);
    }
  }
}

inline float sigmoid1(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus1(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Channels [c0, c1), a vector of channels at a time: the kernel's taps of those channels gathered once.
template <class V>
void conv1d(const Conv1dSpan& s, int64_t c0, int64_t c1) {
  constexpr int64_t L = V::kWidth, kMaxKernel = 8;
  const int64_t past = s.kernel - 1;
  for (int64_t c = c0; c < c1; c += L) {
    const int64_t n = std::min(L, c1 - c);
    alignas(64) float taps[kMaxKernel][L] = {};
    for (int64_t j = 0; j < s.kernel; ++j)
      for (int64_t l = 0; l < n; ++l) taps[j][l] = s.w[(c + l) * s.kernel + j];
    const auto row = [&](int64_t src) {
      return src < 0 ? s.state + (past + src) * s.channels + c : s.x + src * s.ldx + c;
    };
    for (int64_t t = 0; t < s.ntok; ++t) {
      typename V::Reg acc = s.bias ? V::load_tail(s.bias + c, n) : V::zero();
      for (int64_t j = 0; j < s.kernel; ++j) acc = V::fmadd(V::load(taps[j]), V::load_tail(row(t - past + j), n), acc);
      if (s.silu) acc = V::div(acc, V::add(V::set1(1.0f), V::exp(V::sub(V::zero(), acc))));
      V::store_tail(s.y + t * s.ldy + c, n, acc);
    }
    // Rows are copied oldest first, so a state row is read before it is overwritten.
    for (int64_t r = 0; r < past; ++r)
      V::store_tail(s.state + r * s.channels + c, n, V::load_tail(row(s.ntok - past + r), n));
  }
}

// Token t's inputs: q (scaled) and k L2-normalised into qn / kn, beta and the log decay.
template <class V>
void token_inputs(const DeltaNetHead& h, int64_t t, float* qn, float* kn, float& beta, float& g) {
  const float* q = h.q + t * h.ld_qkv;
  const float* k = h.k + t * h.ld_qkv;
  const float qs = 1.0f / std::sqrt(dot<V>(q, q, h.k_dim) + 1e-6f) / std::sqrt(static_cast<float>(h.k_dim));
  const float ks = 1.0f / std::sqrt(dot<V>(k, k, h.k_dim) + 1e-6f);
  for (int64_t i = 0; i < h.k_dim; ++i) qn[i] = q[i] * qs, kn[i] = k[i] * ks;
  beta = sigmoid1(h.b[t * h.ld_ab]);
  g = h.a_coef * softplus1(h.a[t * h.ld_ab] + h.dt_bias);
}

// One token of the recurrence in two passes over the state, 4 vectors of value columns at a time: decay and S^T k,
// then the rank-1 update and S^T q.
template <class V>
void recurrent_token(const DeltaNetHead& h, int64_t t, float* scratch) {
  constexpr int64_t L = V::kWidth, B = 4 * L;
  const int64_t dk = h.k_dim, dv = h.v_dim;
  float *qn = scratch, *kn = qn + dk, *delta = kn + dk;
  float beta, g;
  token_inputs<V>(h, t, qn, kn, beta, g);
  float* S = h.state;
  const float* v = h.v + t * h.ld_qkv;
  float* o = h.out + t * h.ld_out;
  const typename V::Reg decay = V::set1(std::exp(g)), vbeta = V::set1(beta);
  for (int64_t j = 0; j < dv; j += B) {
    const int64_t w = std::min(B, dv - j);
    typename V::Reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
    for (int64_t i = 0; i < dk; ++i) {
      const typename V::Reg ki = V::set1(kn[i]);
      for (int64_t u = 0; u * L < w; ++u) {
        float* p = S + i * dv + j + u * L;
        const int64_t n = std::min(L, w - u * L);
        const typename V::Reg s = V::mul(V::load_tail(p, n), decay);
        V::store_tail(p, n, s);
        acc[u] = V::fmadd(ki, s, acc[u]);
      }
    }
    for (int64_t u = 0; u * L < w; ++u) {
      const int64_t n = std::min(L, w - u * L);
      V::store_tail(delta + j + u * L, n, V::mul(vbeta, V::sub(V::load_tail(v + j + u * L, n), acc[u])));
    }
  }
  for (int64_t j = 0; j < dv; j += B) {
    const int64_t w = std::min(B, dv - j);
    typename V::Reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()}, d[4];
    for (int64_t u = 0; u * L < w; ++u) d[u] = V::load_tail(delta + j + u * L, std::min(L, w - u * L));
    for (int64_t i = 0; i < dk; ++i) {
      const typename V::Reg ki = V::set1(kn[i]), qi = V::set1(qn[i]);
      for (int64_t u = 0; u * L < w; ++u) {
        float* p = S + i * dv + j + u * L;
        const int64_t n = std::min(L, w - u * L);
        const typename V::Reg s = V::fmadd(ki, d[u], V::load_tail(p, n));
        V::store_tail(p, n, s);
        acc[u] = V::fmadd(qi, s, acc[u]);
      }
    }
    for (int64_t u = 0; u * L < w; ++u) V::store_tail(o + j + u * L, std::min(L, w - u * L), acc[u]);
  }
  if (h.history) std::copy(S, S + dk * dv, h.history + t * h.history_stride);
}

// The chunked form of tokens [t0, t0 + c), as ref::chunk (kernels/ref/mixers_ref.cpp) states it, with its products
// as small GEMMs: the intra-chunk system solved once as T = (I + A)^-1 (A = beta K K^T o decay, strictly lower), then
// U = T beta V and W = T beta exp(gc) K, v_new = U - W S, out = exp(gc) Q S + (Q K^T o decay) v_new and
// S = exp(gc_last) S + (exp(gc_last - gc) K)^T v_new.
template <class V>
void delta_chunk(const DeltaNetHead& h, int64_t t0, int64_t c, float* scratch) {
  constexpr int64_t C = kDeltaNetChunk;
  const int64_t dk = h.k_dim, dv = h.v_dim;
  float *Q = scratch, *K = Q + C * dk, *KT = K + C * dk, *BK = KT + dk * C, *W = BK + C * dk;
  float *BV = W + C * dk, *U = BV + C * dv, *T = U + C * dv, *A = T + C * C, *gc = A + C * C, *beta = gc + C;
  float* S = h.state;
  float* out = h.out + t0 * h.ld_out;
  for (int64_t i = 0; i < c; ++i) {
    float g;
    token_inputs<V>(h, t0 + i, Q + i * dk, K + i * dk, beta[i], g);
    gc[i] = g + (i > 0 ? gc[i - 1] : 0.0f);
    for (int64_t r = 0; r < dk; ++r) KT[r * C + i] = K[i * dk + r];
    const float* v = h.v + (t0 + i) * h.ld_qkv;
    const float e = beta[i] * std::exp(gc[i]);
    for (int64_t j = 0; j < dv; ++j) BV[i * dv + j] = beta[i] * v[j];
    for (int64_t j = 0; j < dk; ++j) BK[i * dk + j] = e * K[i * dk + j];
  }
  small_gemm<V>(K, dk, KT, C, A, C, c, dk, c, false);  // K K^T, then A and T = (I + A)^-1 row by row
  for (int64_t i = 0; i < c; ++i) {
    float* t = T + i * C;
    std::fill(t, t + c, 0.0f);
    t[i] = 1.0f;
    for (int64_t p = 0; p < i; ++p) axpy<V>(t, -beta[i] * A[i * C + p] * std::exp(gc[i] - gc[p]), T + p * C, p + 1);
  }
  small_gemm<V>(T, C, BV, dv, U, dv, c, c, dv, false);  // U = T beta V
  small_gemm<V>(T, C, BK, dk, W, dk, c, c, dk, false);  // W = T beta exp(gc) K
  for (int64_t i = 0; i < c * dk; ++i) W[i] = -W[i];
  small_gemm<V>(W, dk, S, dv, U, dv, c, dk, dv, true);           // v_new = U - W S
  small_gemm<V>(Q, dk, S, dv, out, h.ld_out, c, dk, dv, false);  // exp(gc) Q S
  for (int64_t i = 0; i < c; ++i) scale_axpy<V>(out + i * h.ld_out, std::exp(gc[i]), 0.0f, out + i * h.ld_out, dv);
  small_gemm<V>(Q, dk, KT, C, A, C, c, dk, c, false);  // Q K^T o decay, causal with the diagonal
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t p = 0; p <= i; ++p) A[i * C + p] *= std::exp(gc[i] - gc[p]);
    std::fill(A + i * C + i + 1, A + i * C + c, 0.0f);
  }
  small_gemm<V>(A, C, U, dv, out, h.ld_out, c, c, dv, true);
  const float last = gc[c - 1];
  for (int64_t p = 0; p < c; ++p) gc[p] = std::exp(last - gc[p]);  // each token's decay to the chunk's end
  for (int64_t r = 0; r < dk; ++r)
    for (int64_t p = 0; p < c; ++p) KT[r * C + p] *= gc[p];
  scale_axpy<V>(S, std::exp(last), 0.0f, S, dk * dv);
  small_gemm<V>(KT, C, U, dv, S, dv, dk, c, dv, true);
}

// Mamba2's scan, a row of the state (one of head_dim) at a time: its decay-and-update and its dot with C in one pass
// over the state vector.
template <class V>
void ssm_recurrent(const SsmHead& h) {
  constexpr int64_t L = V::kWidth;
  const int64_t P = h.head_dim, N = h.state_size;
  for (int64_t t = 0; t < h.ntok; ++t) {
    const float dt = softplus1(h.dt[t * h.ld_dt] + h.dt_bias);
    const typename V::Reg decay = V::set1(std::exp(dt * h.a));
    const float *x = h.x + t * h.ld_x, *B = h.b + t * h.ld_x, *C = h.c + t * h.ld_x;
    for (int64_t p = 0; p < P; ++p) {
      float* s = h.state + p * N;
      const typename V::Reg dtx = V::set1(dt * x[p]);
      typename V::Reg y = V::zero();
      for (int64_t n = 0; n < N; n += L) {
        const int64_t w = std::min(L, N - n);
        const typename V::Reg v = V::fmadd(dtx, V::load_tail(B + n, w), V::mul(decay, V::load_tail(s + n, w)));
        V::store_tail(s + n, w, v);
        y = V::fmadd(v, V::load_tail(C + n, w), y);
      }
      h.out[t * h.ld_out + p] = V::reduce_add(y) + h.d * x[p];
    }
    if (h.history) std::copy(h.state, h.state + P * N, h.history + t * h.history_stride);
  }
}

// Tokens [t0, t0 + q) in the chunked (SSD) form (kernels/mixers.h), as small GEMMs over the chunk: G = C B^T masked
// by the decays, Y = exp(L) C S0^T + G X, and the state S^T = exp(L_end) S0^T + (w B)^T X, with the state kept
// transposed ([state, head_dim], ST) across the chunks of a run.
template <class V>
void ssd_chunk(const SsmHead& h, int64_t t0, int64_t q, float* ST, float* scratch) {
  constexpr int64_t Q = kSsmChunk, L = V::kWidth;
  const int64_t P = h.head_dim, N = h.state_size;
  float *dt = scratch, *Lc = dt + Q, *BT = Lc + Q, *G = BT + N * Q, *Y = G + Q * Q;
  const float *x = h.x + t0 * h.ld_x, *B = h.b + t0 * h.ld_x, *C = h.c + t0 * h.ld_x;
  for (int64_t t = 0; t < q; ++t) {
    dt[t] = softplus1(h.dt[(t0 + t) * h.ld_dt] + h.dt_bias);
    Lc[t] = dt[t] * h.a + (t > 0 ? Lc[t - 1] : 0.0f);
    for (int64_t n = 0; n < N; ++n) BT[n * Q + t] = B[t * h.ld_x + n];
  }
  small_gemm<V>(C, h.ld_x, BT, Q, G, Q, q, N, q, false);  // G = C B^T
  for (int64_t t = 0; t < q; ++t) {                       // G[t, s] *= exp(L_t - L_s) dt_s for s <= t, 0 after
    for (int64_t s = 0; s <= t; s += L) {
      const int64_t n = std::min(L, t + 1 - s);
      const typename V::Reg decay = V::exp(V::sub(V::set1(Lc[t]), V::load_tail(Lc + s, n)));
      V::store_tail(G + t * Q + s, n, V::mul(V::load_tail(G + t * Q + s, n), V::mul(decay, V::load_tail(dt + s, n))));
    }
    std::fill(G + t * Q + t + 1, G + t * Q + q, 0.0f);
  }
  small_gemm<V>(C, h.ld_x, ST, P, Y, P, q, N, P, false);  // Y = C S0^T, then each row times exp(L_t)
  for (int64_t t = 0; t < q; ++t) scale_axpy<V>(Y + t * P, std::exp(Lc[t]), 0.0f, Y + t * P, P);
  small_gemm<V>(G, Q, x, h.ld_x, Y, P, q, q, P, true);  // Y += G X
  for (int64_t t = 0; t < q; ++t) {
    float* o = h.out + (t0 + t) * h.ld_out;
    std::copy(Y + t * P, Y + (t + 1) * P, o);
    axpy<V>(o, h.d, x + t * h.ld_x, P);
  }
  const float end = Lc[q - 1];
  for (int64_t t = 0; t < q; ++t) dt[t] *= std::exp(end - Lc[t]);  // each token's weight at the chunk's end
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < q; ++t) BT[n * Q + t] *= dt[t];
  scale_axpy<V>(ST, std::exp(end), 0.0f, ST, N * P);
  small_gemm<V>(BT, Q, x, h.ld_x, ST, P, N, q, P, true);  // S^T += (w B)^T X
}

template <class V>
void ssm_head(const SsmHead& h, float* scratch) {
  if (h.ntok < kSsmChunkedMin || h.history) return ssm_recurrent<V>(h);
  const int64_t P = h.head_dim, N = h.state_size;
  float* ST = scratch + ssm_scratch_floats(P, N) - N * P;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t n = 0; n < N; ++n) ST[n * P + p] = h.state[p * N + n];
  for (int64_t t = 0; t < h.ntok; t += kSsmChunk) ssd_chunk<V>(h, t, std::min(kSsmChunk, h.ntok - t), ST, scratch);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t n = 0; n < N; ++n) h.state[p * N + n] = ST[n * P + p];
}

template <class V>
void delta_net_head(const DeltaNetHead& h, float* scratch) {
  if (h.ntok < kDeltaNetChunkedMin || h.history) {
    for (int64_t t = 0; t < h.ntok; ++t) recurrent_token<V>(h, t, scratch);
    return;
  }
  for (int64_t t = 0; t < h.ntok; t += kDeltaNetChunk)
    delta_chunk<V>(h, t, std::min(kDeltaNetChunk, h.ntok - t), scratch);
}

}  // namespace
}  // namespace minfer::kernels::x86
