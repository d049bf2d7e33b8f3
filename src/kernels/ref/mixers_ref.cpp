// The scalar reference of the recurrent mixers (kernels/mixers.h): plain loops in the order of the equations, the
// oracle the vectorised leaves are tested against. The delta rule has both forms here, the per-token recurrence and
// the chunked one, so the tests can hold each against the other.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float silu(float x) { return x * sigmoid(x); }

void conv1d(const Conv1dSpan& s, int64_t c0, int64_t c1) {
  const int64_t past = s.kernel - 1;
  for (int64_t c = c0; c < c1; ++c) {
    const float* w = s.w + c * s.kernel;
    for (int64_t t = 0; t < s.ntok; ++t) {
      float acc = s.bias ? s.bias[c] : 0.0f;
      for (int64_t j = 0; j < s.kernel; ++j) {
        const int64_t src = t - past + j;  // < 0: a state row
        acc += w[j] * (src < 0 ? s.state[(past + src) * s.channels + c] : s.x[src * s.ldx + c]);
      }
      s.y[t * s.ldy + c] = s.silu ? silu(acc) : acc;
    }
    // The state keeps the last `past` inputs: old state rows then this run's rows.
    for (int64_t r = 0; r < past; ++r) {
      const int64_t src = s.ntok - past + r;
      s.state[r * s.channels + c] = src < 0 ? s.state[(past + src) * s.channels + c] : s.x[src * s.ldx + c];
    }
  }
}

// A token's normalised q and k, beta and log decay.
struct TokenInputs {
  std::vector<float> q, k;
  float beta = 0.0f, g = 0.0f;
};
void l2_normalise(const float* x, float* out, int64_t n, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}
void token_inputs(const DeltaNetHead& h, int64_t t, TokenInputs& in) {
  in.q.resize(static_cast<size_t>(h.k_dim));
  in.k.resize(static_cast<size_t>(h.k_dim));
  l2_normalise(h.q + t * h.ld_qkv, in.q.data(), h.k_dim, 1.0f / std::sqrt(static_cast<float>(h.k_dim)));
  l2_normalise(h.k + t * h.ld_qkv, in.k.data(), h.k_dim, 1.0f);
  in.beta = sigmoid(h.b[t * h.ld_ab]);
  in.g = h.a_coef * softplus(h.a[t * h.ld_ab] + h.dt_bias);
}

void recurrent(const DeltaNetHead& h, int64_t t0, int64_t t1) {
  const int64_t dk = h.k_dim, dv = h.v_dim;
  float* S = h.state;
  TokenInputs in;
  std::vector<float> delta(static_cast<size_t>(dv));
  for (int64_t t = t0; t < t1; ++t) {
    token_inputs(h, t, in);
    const float decay = std::exp(in.g);
    for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
    const float* v = h.v + t * h.ld_qkv;
    for (int64_t j = 0; j < dv; ++j) {
      float kv = 0.0f;
      for (int64_t i = 0; i < dk; ++i) kv += S[i * dv + j] * in.k[static_cast<size_t>(i)];
      delta[static_cast<size_t>(j)] = in.beta * (v[j] - kv);
    }
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += in.k[static_cast<size_t>(i)] * delta[static_cast<size_t>(j)];
    float* o = h.out + t * h.ld_out;
    for (int64_t j = 0; j < dv; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * in.q[static_cast<size_t>(i)];
      o[j] = acc;
    }
    if (h.history) std::copy(S, S + dk * dv, h.history + t * h.history_stride);
  }
}

// Tokens [t0, t0 + c) as one chunk: with gc the running sum of g within the chunk and A[i][j] = beta_i (k_i . k_j)
// exp(gc_i - gc_j) for j < i, U = (I + A)^-1 (beta V) and W = (I + A)^-1 (beta exp(gc) K) (forward substitution);
// then v_new = U - W S, out = exp(gc) Q S + (Q K^T o decay, causal incl. the diagonal) v_new, and
// S = exp(gc_last) S + (exp(gc_last - gc) K)^T v_new.
void chunk(const DeltaNetHead& h, int64_t t0, int64_t c) {
  const int64_t dk = h.k_dim, dv = h.v_dim;
  float* S = h.state;
  std::vector<TokenInputs> in(static_cast<size_t>(c));
  std::vector<float> gc(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    token_inputs(h, t0 + i, in[static_cast<size_t>(i)]);
    gc[static_cast<size_t>(i)] = in[static_cast<size_t>(i)].g + (i > 0 ? gc[static_cast<size_t>(i - 1)] : 0.0f);
  }
  auto dot = [dk](const std::vector<float>& a, const std::vector<float>& b) {
    float s = 0.0f;
    for (int64_t i = 0; i < dk; ++i) s += a[static_cast<size_t>(i)] * b[static_cast<size_t>(i)];
    return s;
  };
  std::vector<float> U(static_cast<size_t>(c * dv)), W(static_cast<size_t>(c * dk));
  for (int64_t i = 0; i < c; ++i) {
    const TokenInputs& ti = in[static_cast<size_t>(i)];
    const float* v = h.v + (t0 + i) * h.ld_qkv;
    const float e = std::exp(gc[static_cast<size_t>(i)]);
    for (int64_t j = 0; j < dv; ++j) U[static_cast<size_t>(i * dv + j)] = ti.beta * v[j];
    for (int64_t j = 0; j < dk; ++j) W[static_cast<size_t>(i * dk + j)] = ti.beta * e * ti.k[static_cast<size_t>(j)];
    for (int64_t p = 0; p < i; ++p) {
      const float A = ti.beta * dot(ti.k, in[static_cast<size_t>(p)].k) *
                      std::exp(gc[static_cast<size_t>(i)] - gc[static_cast<size_t>(p)]);
      for (int64_t j = 0; j < dv; ++j) U[static_cast<size_t>(i * dv + j)] -= A * U[static_cast<size_t>(p * dv + j)];
      for (int64_t j = 0; j < dk; ++j) W[static_cast<size_t>(i * dk + j)] -= A * W[static_cast<size_t>(p * dk + j)];
    }
  }
  // v_new (into U), then the outputs, which read the state before this chunk's update.
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < dv; ++j) {
      float ws = 0.0f;
      for (int64_t r = 0; r < dk; ++r) ws += W[static_cast<size_t>(i * dk + r)] * S[r * dv + j];
      U[static_cast<size_t>(i * dv + j)] -= ws;
    }
  for (int64_t i = 0; i < c; ++i) {
    const TokenInputs& ti = in[static_cast<size_t>(i)];
    const float e = std::exp(gc[static_cast<size_t>(i)]);
    float* o = h.out + (t0 + i) * h.ld_out;
    for (int64_t j = 0; j < dv; ++j) {
      float acc = 0.0f;
      for (int64_t r = 0; r < dk; ++r) acc += ti.q[static_cast<size_t>(r)] * S[r * dv + j];
      o[j] = e * acc;
    }
    for (int64_t p = 0; p <= i; ++p) {
      const float qk =
          dot(ti.q, in[static_cast<size_t>(p)].k) * std::exp(gc[static_cast<size_t>(i)] - gc[static_cast<size_t>(p)]);
      for (int64_t j = 0; j < dv; ++j) o[j] += qk * U[static_cast<size_t>(p * dv + j)];
    }
  }
  const float last = gc[static_cast<size_t>(c - 1)];
  for (int64_t r = 0; r < dk; ++r)
    for (int64_t j = 0; j < dv; ++j) {
      float acc = std::exp(last) * S[r * dv + j];
      for (int64_t p = 0; p < c; ++p)
        acc += std::exp(last - gc[static_cast<size_t>(p)]) * in[static_cast<size_t>(p)].k[static_cast<size_t>(r)] *
               U[static_cast<size_t>(p * dv + j)];
      S[r * dv + j] = acc;
    }
}

}  // namespace

// The per-token recurrence only (the tests' second opinion on the chunked form).
void delta_net_head_recurrent(const DeltaNetHead& h) { recurrent(h, 0, h.ntok); }

void delta_net_head(const DeltaNetHead& h, float*) {
  if (h.ntok < kDeltaNetChunkedMin || h.history) return recurrent(h, 0, h.ntok);
  for (int64_t t = 0; t < h.ntok; t += kDeltaNetChunk) chunk(h, t, std::min(kDeltaNetChunk, h.ntok - t));
}

void conv1d_leaf(const Conv1dSpan& span, int64_t c0, int64_t c1) { conv1d(span, c0, c1); }

void ssm_head_recurrent(const SsmHead& h) {
  const int64_t P = h.head_dim, N = h.state_size;
  for (int64_t t = 0; t < h.ntok; ++t) {
    const float dt = softplus(h.dt[t * h.ld_dt] + h.dt_bias);
    const float decay = std::exp(dt * h.a);
    const float *x = h.x + t * h.ld_x, *B = h.b + t * h.ld_x, *C = h.c + t * h.ld_x;
    for (int64_t p = 0; p < P; ++p) {
      float* s = h.state + p * N;
      float y = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        s[n] = decay * s[n] + dt * x[p] * B[n];
        y += s[n] * C[n];
      }
      h.out[t * h.ld_out + p] = y + h.d * x[p];
    }
    if (h.history) std::copy(h.state, h.state + P * N, h.history + t * h.history_stride);
  }
}

// Tokens [t0, t0 + q) in the chunked (SSD) form, written as kernels/mixers.h states it.
void ssd_chunk(const SsmHead& h, int64_t t0, int64_t q) {
  const int64_t P = h.head_dim, N = h.state_size;
  std::vector<double> dt(static_cast<size_t>(q)), L(static_cast<size_t>(q));
  for (int64_t t = 0; t < q; ++t) {
    dt[size_t(t)] = softplus(h.dt[(t0 + t) * h.ld_dt] + h.dt_bias);
    L[size_t(t)] = dt[size_t(t)] * h.a + (t > 0 ? L[size_t(t - 1)] : 0.0);
  }
  const auto row = [&](const float* base, int64_t t) { return base + (t0 + t) * h.ld_x; };
  for (int64_t t = 0; t < q; ++t) {
    const float *C = row(h.c, t), *x = row(h.x, t);
    for (int64_t p = 0; p < P; ++p) {
      double y = 0.0;
      for (int64_t n = 0; n < N; ++n) y += std::exp(L[size_t(t)]) * h.state[p * N + n] * C[n];
      for (int64_t s = 0; s <= t; ++s) {
        double cb = 0.0;
        for (int64_t n = 0; n < N; ++n) cb += C[n] * row(h.b, s)[n];
        y += std::exp(L[size_t(t)] - L[size_t(s)]) * dt[size_t(s)] * cb * row(h.x, s)[p];
      }
      h.out[(t0 + t) * h.ld_out + p] = static_cast<float>(y + h.d * x[p]);
    }
  }
  const double end = L[size_t(q - 1)];
  for (int64_t p = 0; p < P; ++p)
    for (int64_t n = 0; n < N; ++n) {
      double s = std::exp(end) * h.state[p * N + n];
      for (int64_t u = 0; u < q; ++u)
        s += std::exp(end - L[size_t(u)]) * dt[size_t(u)] * row(h.x, u)[p] * row(h.b, u)[n];
      h.state[p * N + n] = static_cast<float>(s);
    }
}

void ssm_head(const SsmHead& h, float*) {
  if (h.ntok < kSsmChunkedMin || h.history) return ssm_head_recurrent(h);
  for (int64_t t = 0; t < h.ntok; t += kSsmChunk) ssd_chunk(h, t, std::min(kSsmChunk, h.ntok - t));
}

}  // namespace minfer::kernels::ref

namespace minfer::kernels {

constinit const MixerLeaves kRefMixers = {
    .conv1d = ref::conv1d_leaf, .delta_net_head = ref::delta_net_head, .ssm_head = ref::ssm_head};

}  // namespace minfer::kernels
