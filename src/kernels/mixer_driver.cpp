// The recurrent mixers' drivers (kernels/mixers.h): argument checks and the thread split. Work units are (sequence,
// channel block) for the convolution and (sequence, value head) for the delta rule, claimed dynamically (a long
// prefill's heads beside one-token decodes); sequences that share a state slot run one after another.
#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/kernels.h"
#include "kernels/mixers.h"

namespace minfer::kernels {
namespace {

bool slots_unique(const RecurrentBatch& b) {
  std::vector<int32_t> s(b.slots, b.slots + b.num_seqs);
  std::sort(s.begin(), s.end());
  return std::adjacent_find(s.begin(), s.end()) == s.end();
}

// Runs unit(seq, part) for every sequence and part in [0, parts): all at once when no two sequences share a slot,
// else sequence by sequence.
template <class Unit>
void for_each_unit(const RecurrentBatch& batch, int64_t parts, ThreadPool& pool, const Unit& unit) {
  if (slots_unique(batch)) {
    pool.parallel_for(static_cast<size_t>(batch.num_seqs * parts), 1, [&](size_t begin, size_t end) {
      for (size_t u = begin; u < end; ++u) unit(static_cast<int64_t>(u) / parts, static_cast<int64_t>(u) % parts);
    });
    return;
  }
  for (int64_t s = 0; s < batch.num_seqs; ++s)
    pool.parallel_for(static_cast<size_t>(parts), 1, [&](size_t begin, size_t end) {
      for (size_t p = begin; p < end; ++p) unit(s, static_cast<int64_t>(p));
    });
}

// The convolution state after each token of sequence s (its last kernel - 1 inputs), for channels [c0, c1), from the
// state before the run and the run's inputs; before the leaf updates the state.
void conv_history(const Conv1dSpan& span, const StateLayerView& states, int32_t first, int64_t c0, int64_t c1) {
  const int64_t past = span.kernel - 1;
  for (int64_t t = 0; t < span.ntok; ++t) {
    float* dst = states.conv(first + t);
    for (int64_t r = 0; r < past; ++r) {
      const int64_t src = t - past + 1 + r;  // < 0: a row of the old state
      const float* row = src < 0 ? span.state + (past + src) * span.channels : span.x + src * span.ldx;
      std::copy(row + c0, row + c1, dst + r * span.channels + c0);
    }
  }
}

}  // namespace

// The chunk's dt and running decay, B transposed, C B^T masked and the chunk's outputs; last, the state transposed.
int64_t ssm_scratch_floats(int64_t head_dim, int64_t state_size) {
  constexpr int64_t Q = kSsmChunk;
  return 2 * Q + state_size * Q + Q * Q + Q * head_dim + 64 + state_size * head_dim;
}

// The chunk's q, k, k^T, beta exp(gc) k, W, beta v, U (5 k_dim + 2 v_dim rows), T and A (chunk x chunk), gc and
// beta; the recurrent form's q, k and delta fit in the same space.
int64_t delta_net_scratch_floats(int64_t k_dim, int64_t v_dim) {
  constexpr int64_t C = kDeltaNetChunk;
  return C * (5 * k_dim + 2 * v_dim + 2 * C + 2) + 2 * k_dim + v_dim + 64;
}

void causal_conv1d(const MixerLeaves& leaves, const float* x, int64_t ldx, float* y, int64_t channels, const float* w,
                   const float* bias, int64_t kernel, bool silu, const StateLayerView& states,
                   const RecurrentBatch& batch, ThreadPool& pool, const ConvGates& gates) {
  MINFER_CHECK(kernel >= 1 && kernel <= 8, "conv1d kernel size {} (1 to 8)", kernel);
  MINFER_CHECK(!gates.in == !gates.out, "conv1d: an input gate goes with an output gate");
  constexpr int64_t kBlock = 64;  // channels per work unit
  const int64_t parts = (channels + kBlock - 1) / kBlock;
  for_each_unit(batch, parts, pool, [&](int64_t s, int64_t part) {
    const int64_t row = batch.q_start[s], c0 = part * kBlock, c1 = std::min(channels, (part + 1) * kBlock);
    Conv1dSpan span;
    span.x = x + row * ldx;
    span.ldx = ldx;
    span.y = y + row * channels;
    span.ldy = channels;
    span.ntok = batch.q_len[s];
    span.w = w;
    span.bias = bias;
    span.kernel = kernel;
    span.channels = channels;
    span.state = states.conv(batch.slots[s]);
    span.silu = silu;
    thread_local std::vector<float> gated;  // the gated input of this unit's channels: row t at t * kBlock + c
    if (gates.in) {
      gated.resize(static_cast<size_t>(span.ntok * kBlock + c1));
      for (int64_t t = 0; t < span.ntok; ++t)
        mul(gates.in + (row + t) * channels + c0, span.x + t * ldx + c0, gated.data() + t * kBlock + c0, c1 - c0);
      span.x = gated.data();
      span.ldx = kBlock;
    }
    if (batch.history && batch.history[s] >= 0) conv_history(span, states, batch.history[s], c0, c1);
    leaves.conv1d(span, c0, c1);
    for (int64_t t = 0; gates.out && t < span.ntok; ++t) {
      float* out = span.y + t * channels + c0;
      mul(gates.out + (row + t) * channels + c0, out, out, c1 - c0);
    }
  });
}

void gated_delta_net(const MixerLeaves& leaves, const float* qkv, const float* b, const float* a, float* out,
                     const DeltaNetParams& p, const StateLayerView& states, const RecurrentBatch& batch,
                     ThreadPool& pool) {
  MINFER_CHECK(p.k_heads > 0 && p.v_heads % p.k_heads == 0, "delta rule: {} value heads over {} key heads", p.v_heads,
               p.k_heads);
  const int64_t ld_qkv = 2 * p.k_heads * p.k_dim + p.v_heads * p.v_dim, ld_out = p.v_heads * p.v_dim;
  const int64_t group = p.v_heads / p.k_heads;
  const auto scratch_floats = static_cast<size_t>(delta_net_scratch_floats(p.k_dim, p.v_dim));
  for_each_unit(batch, p.v_heads, pool, [&](int64_t s, int64_t h) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    const int64_t kh = p.tiled_heads ? h % p.k_heads : h / group;
    const int64_t row = batch.q_start[s];
    DeltaNetHead head;
    head.q = qkv + row * ld_qkv + kh * p.k_dim;
    head.k = head.q + p.k_heads * p.k_dim;
    head.v = qkv + row * ld_qkv + 2 * p.k_heads * p.k_dim + h * p.v_dim;
    head.ld_qkv = ld_qkv;
    head.b = b + row * p.v_heads + h;
    head.a = a + row * p.v_heads + h;
    head.ld_ab = p.v_heads;
    head.a_coef = p.a_coef[h];
    head.dt_bias = p.dt_bias[h];
    head.out = out + row * ld_out + h * p.v_dim;
    head.ld_out = ld_out;
    head.state = states.ssm(batch.slots[s]) + h * p.k_dim * p.v_dim;
    head.ntok = batch.q_len[s];
    head.k_dim = p.k_dim;
    head.v_dim = p.v_dim;
    if (batch.history && batch.history[s] >= 0) {
      head.history = states.ssm(batch.history[s]) + h * p.k_dim * p.v_dim;
      head.history_stride = states.slot_floats;
    }
    leaves.delta_net_head(head, scratch.data());
  });
}

void ssm_scan(const MixerLeaves& leaves, const float* xbc, const float* dt, float* out, const SsmParams& p,
              const StateLayerView& states, const RecurrentBatch& batch, ThreadPool& pool) {
  MINFER_CHECK(p.groups > 0 && p.heads % p.groups == 0, "ssm scan: {} heads over {} groups", p.heads, p.groups);
  const int64_t inner = p.heads * p.head_dim, ld_x = inner + 2 * p.groups * p.state_size;
  const int64_t per_group = p.heads / p.groups;
  const auto scratch_floats = static_cast<size_t>(ssm_scratch_floats(p.head_dim, p.state_size));
  for_each_unit(batch, p.heads, pool, [&](int64_t s, int64_t h) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    const int64_t row = batch.q_start[s], g = h / per_group;
    SsmHead head;
    head.x = xbc + row * ld_x + h * p.head_dim;
    head.b = xbc + row * ld_x + inner + g * p.state_size;
    head.c = xbc + row * ld_x + inner + (p.groups + g) * p.state_size;
    head.ld_x = ld_x;
    head.dt = dt + row * p.heads + h;
    head.ld_dt = p.heads;
    head.a = p.a[h];
    head.dt_bias = p.dt_bias[h];
    head.d = p.d[h];
    head.out = out + row * inner + h * p.head_dim;
    head.ld_out = inner;
    head.state = states.ssm(batch.slots[s]) + h * p.head_dim * p.state_size;
    head.ntok = batch.q_len[s];
    head.head_dim = p.head_dim;
    head.state_size = p.state_size;
    if (batch.history && batch.history[s] >= 0) {
      head.history = states.ssm(batch.history[s]) + h * p.head_dim * p.state_size;
      head.history_stride = states.slot_floats;
    }
    leaves.ssm_head(head, scratch.data());
  });
}

}  // namespace minfer::kernels
