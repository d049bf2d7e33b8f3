// Token mixers with recurrent state (the 2026 hybrids' linear-attention and convolution layers): the causal
// depthwise convolution with its state (Gated DeltaNet's and Mamba2's conv1d, LFM2's short convolution) and the
// gated delta rule (Qwen3.5 / Qwen3-Next). Each sequence of a step owns a state slot per layer (kv/state_pool.h);
// the kernels read a sequence's state before its first token and leave it after its last.
//
// Leaves (one sequence, a range of channels or one head; single-threaded) come per instruction set, as the other
// leaves (kernels/leaf.h); the drivers here split the work across the pool.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace minfer::kernels {

// One layer's recurrent state pool: slot s holds conv_floats of convolution state ((kernel - 1) rows of the
// convolved channels, oldest first) then, at ssm_offset, the layer's recurrent state (delta rule: [v_heads, k_dim,
// v_dim]; Mamba2: [heads, head_dim, state]).
struct StateLayerView {
  float* base = nullptr;
  int64_t slot_floats = 0;  // the stride between slots
  int64_t ssm_offset = 0;   // where the recurrent state starts within a slot
  float* conv(int64_t slot) const { return base + slot * slot_floats; }
  float* ssm(int64_t slot) const { return base + slot * slot_floats + ssm_offset; }
};

// The sequences of a step as the recurrent mixers see them: sequence s owns rows [q_start[s], q_start[s] + q_len[s])
// and state slot slots[s]. Two sequences may name the same slot only in order (a prompt split into one-token chunks
// within a step); the drivers then run them one after another. With history (speculative decoding's verification
// chunks), history[s] >= 0 names the first of q_len[s] slots that receive the state after each of the sequence's
// tokens (-1: none), so the engine can keep the state after the last accepted draft.
struct RecurrentBatch {
  int64_t num_seqs = 0;
  const int32_t* q_start = nullptr;
  const int32_t* q_len = nullptr;
  const int32_t* slots = nullptr;
  const int32_t* history = nullptr;
};

// ---- Leaves -------------------------------------------------------------------------------------------
// Channels [c0, c1) of one sequence's ntok rows: y[t, c] = act(bias[c] + sum_j w[c, j] * in[t - kernel + 1 + j, c]),
// where in[< 0] are the state's rows; the state is left holding the last kernel - 1 inputs. x rows have stride ldx,
// y rows ldy (y may not alias x); w is [channels, kernel]; the state is [kernel - 1, channels].
struct Conv1dSpan {
  const float* x = nullptr;
  int64_t ldx = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t ntok = 0;
  const float* w = nullptr;
  const float* bias = nullptr;  // null: none
  int64_t kernel = 0;
  int64_t channels = 0;
  float* state = nullptr;
  bool silu = false;
};
using Conv1dFn = void (*)(const Conv1dSpan& span, int64_t c0, int64_t c1);

// One value head of the gated delta rule over one sequence's ntok tokens (Qwen3.5's Gated DeltaNet). Inputs are the
// convolved projections, raw: q and k ([k_dim] at row stride ld_qkv, the head's key head) are L2-normalised here
// (x / sqrt(sum x^2 + 1e-6)) and q scaled by k_dim^-1/2; beta = sigmoid(b), the log decay g = a_coef *
// softplus(a + dt_bias) (a_coef = -exp(A_log)). Per token, with the state S [k_dim, v_dim]:
//   S = exp(g) S;  S += k (beta (v - S^T k))^T;  out = S^T q
// Long runs use the chunked (WY / UT-transform) form, which computes the same thing chunk_tokens at a time.
struct DeltaNetHead {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ld_qkv = 0;
  const float* b = nullptr;  // the head's column of the beta projection (row stride ld_ab)
  const float* a = nullptr;  // and of the decay projection
  int64_t ld_ab = 0;
  float a_coef = 0.0f;
  float dt_bias = 0.0f;
  float* out = nullptr;  // [ntok, v_dim] at row stride ld_out
  int64_t ld_out = 0;
  float* state = nullptr;
  int64_t ntok = 0;
  int64_t k_dim = 0;
  int64_t v_dim = 0;
  // Non-null: the state after token t is copied to history + t * history_stride (the recurrent form is used).
  float* history = nullptr;
  int64_t history_stride = 0;
};
// Scratch floats a leaf needs for one head (chunked form included).
int64_t delta_net_scratch_floats(int64_t k_dim, int64_t v_dim);
inline constexpr int64_t kDeltaNetChunk = 16;
// Runs of at least this many tokens take the chunked form.
inline constexpr int64_t kDeltaNetChunkedMin = 8;
using DeltaNetHeadFn = void (*)(const DeltaNetHead& head, float* scratch);

// One head of Mamba2's selective scan over one sequence's ntok tokens. x ([head_dim] at row stride ld_x), the head's
// group's B and C ([state] each, same stride) and dt (one raw value per token at stride ld_dt) are the convolved
// projections; per token, with dt = softplus(dt + dt_bias) and the state S [head_dim, state]:
//   S = exp(dt a) S + dt x B^T;  y = S C + d x
// written to out ([head_dim] at stride ld_out). Long runs take the chunked (SSD) form, which computes the same thing
// kSsmChunk tokens at a time as small matrix products: with l_t = dt_t a summed over the chunk into L_t,
//   y_t = exp(L_t) S0 C_t + sum_{s<=t} exp(L_t - L_s) dt_s (C_t . B_s) x_s + d x_t
//   S   = exp(L_end) S0 + sum_s exp(L_end - L_s) dt_s x_s B_s^T
struct SsmHead {
  const float* x = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  int64_t ld_x = 0;
  const float* dt = nullptr;
  int64_t ld_dt = 0;
  float a = 0.0f, dt_bias = 0.0f, d = 0.0f;
  float* out = nullptr;
  int64_t ld_out = 0;
  float* state = nullptr;
  int64_t ntok = 0, head_dim = 0, state_size = 0;
  float* history = nullptr;  // as DeltaNetHead::history
  int64_t history_stride = 0;
};
// Scratch floats a leaf needs for one head (chunked form included).
int64_t ssm_scratch_floats(int64_t head_dim, int64_t state_size);
inline constexpr int64_t kSsmChunk = 32;
// Runs of at least this many tokens take the chunked form (docs/BENCHMARKS.md measures where it pays).
inline constexpr int64_t kSsmChunkedMin = 16;
using SsmHeadFn = void (*)(const SsmHead& head, float* scratch);

struct MixerLeaves {
  Conv1dFn conv1d;
  DeltaNetHeadFn delta_net_head;
  SsmHeadFn ssm_head;
};
extern const MixerLeaves kRefMixers;
extern const MixerLeaves kAvx2Mixers;
extern const MixerLeaves kAvx512Mixers;
// The set the dispatcher chose (kernels/dispatch.h), or that of an instruction set for tests.
const MixerLeaves& active_mixers();

// ---- Drivers ------------------------------------------------------------------------------------------
// LFM2's gates around its short convolution, fused into it (graph pass conv-gates): y = out * conv(in * x), both
// [rows, channels]. The state keeps the gated inputs, as the unfused convolution of in * x would.
struct ConvGates {
  const float* in = nullptr;
  const float* out = nullptr;
};
// x [rows, channels] (row stride ldx) -> y [rows, channels] per sequence, each with its layer state slot.
void causal_conv1d(const MixerLeaves& leaves, const float* x, int64_t ldx, float* y, int64_t channels, const float* w,
                   const float* bias, int64_t kernel, bool silu, const StateLayerView& states,
                   const RecurrentBatch& batch, ThreadPool& pool, const ConvGates& gates = {});

// The gated delta rule of a layer. qkv [rows, 2 k_heads k_dim + v_heads v_dim] (q, k, v side by side), b and a
// [rows, v_heads]; out [rows, v_heads v_dim]. Value head h reads key head h / (v_heads / k_heads) (Hugging Face's
// order), or h % k_heads with tiled_heads (llama.cpp's GGUF files store the value heads tiled).
struct DeltaNetParams {
  int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;
  bool tiled_heads = false;
  const float* a_coef = nullptr;   // [v_heads] -exp(A_log)
  const float* dt_bias = nullptr;  // [v_heads]
};
void gated_delta_net(const MixerLeaves& leaves, const float* qkv, const float* b, const float* a, float* out,
                     const DeltaNetParams& params, const StateLayerView& states, const RecurrentBatch& batch,
                     ThreadPool& pool);

// Mamba2's scan of a layer. xbc [rows, heads head_dim + 2 groups state] (x, B, C side by side, convolved), dt [rows,
// heads] raw; out [rows, heads head_dim]. Head h reads group h / (heads / groups).
struct SsmParams {
  int64_t heads = 0, head_dim = 0, groups = 0, state_size = 0;
  const float* a = nullptr;        // [heads] -exp(A_log)
  const float* dt_bias = nullptr;  // [heads]
  const float* d = nullptr;        // [heads]
};
void ssm_scan(const MixerLeaves& leaves, const float* xbc, const float* dt, float* out, const SsmParams& params,
              const StateLayerView& states, const RecurrentBatch& batch, ThreadPool& pool);

}  // namespace minfer::kernels
