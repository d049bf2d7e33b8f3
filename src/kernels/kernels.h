// The CPU kernels the graph executor calls. Each entry point dispatches at run time to the best variant the
// CPU supports (AVX-512, AVX2+FMA, or the scalar reference in kernels/ref/). Activations are f32; weights
// are f32, f16 or bf16 as stored; accumulation is always f32.
//
// Threading: kernels that take a ThreadPool split their work across it (GEMM by output columns, attention by
// sequence x head); the others are called per row range by the executor or are cheap enough to run serially.
#pragma once

#include <cstdint>
#include <string>

#include "base/thread_pool.h"
#include "kernels/kv_format.h"
#include "kernels/page_geometry.h"
#include "tensor/tensor.h"

namespace minfer::kernels {

// Y[m, n] = sum_k X[m, k] * W[n, k] + (bias ? bias[n] : 0)
// X: f32 [M, K] row-major; W: [N, K] f32/f16/bf16 row-major (a Linear layer's weight); bias: f32 [N] or null;
// Y: f32 [M, N] row-major.
void gemm(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y, ThreadPool& pool);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]   (weight f32/f16/bf16 [dim])
void rmsnorm(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim);

// Rotary position embedding in place on x [tokens, heads, head_dim]. Rotates the first 2*half_rot dims of each
// head of token t by the angles whose cosines and sines are cos/sin [t, 0..half_rot) (rope_angles).
enum class RopeStyle : uint8_t {
  kNeox,         // HF Llama/Qwen2 "rotate_half": pairs (i, i + rot_dim/2)
  kInterleaved,  // Meta/llama2.c/GGUF-llama: pairs (2i, 2i + 1)
};
void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style);
// cos/sin [tokens, half_rot] of the angles position[t] * inv_freq[i] (inv_freq precomputed by the model: theta and
// scaling), in f32 with std::cos / std::sin as HF computes them. The executor makes them once per step, so the
// RoPE of every layer (and of every column tile of a fused QKV GEMM) reads a table instead of calling libm.
void rope_angles(const int32_t* positions, int64_t tokens, const float* inv_freq, int64_t half_rot, float* cos,
                 float* sin);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out = gelu_tanh(gate) * up (GELU with the tanh approximation, PyTorch's approximate="tanh": Gemma's MLP).
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
// out = gelu_tanh(x): a vision encoder's MLP activation (SigLIP's gelu_pytorch_tanh).
void gelu_tanh(const float* x, float* out, int64_t n);
// LayerNorm over each row of x [rows, dim] with f32 weight and bias (vision encoders): one loop for every ISA that
// the compiler vectorises; it reads each row twice and is bound by memory, as add is.
void layernorm(const float* x, const float* weight, const float* bias, float eps, float* y, int64_t rows, int64_t dim);
// gpt-oss's clamped SwiGLU (ref::swiglu_oai).
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n);

// out[i] = a[i] + b[i]
// out = x * sigmoid(gate) (Qwen3.5's attention output gate).
void sigmoid_mul(const float* gate, const float* x, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
// out = a * b element by element (LFM2's convolution gates): one implementation for every ISA, a loop the compiler
// vectorises (it is bound by memory, as add is).
void mul(const float* a, const float* b, float* out, int64_t n);
// out = max(x, 0)^2 (Nemotron-H's MLP activation): a vectorised loop like mul.
void relu2(const float* x, float* out, int64_t n);

// In-place numerically stable softmax over each row of x [rows, cols].
void softmax(float* x, int64_t rows, int64_t cols);

// out[t, :] = table[ids[t], :] as f32 (table f32/f16/bf16 [vocab, dim]).
void embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out);

// ---- Paged KV cache and attention --------------------------------------------------------------------
// One layer's cache: k and v pools of num_pages pages of page_size token slots, each value stored as `dtype`
// (KvCacheDtype; attention always computes in f32). Token slot s lives in page s / page_size at offset
// t = s % page_size. Within a page every kv head has its own block of page_size x head_dim elements
// (head_block), so one head's keys of a page are contiguous for the attention that reads them:
//  * keys transposed: element d of key t at d * page_size + t, so one vector load reads a dimension of 16
//    consecutive keys and the scores of 16 keys are 16-wide FMAs with no transpose or horizontal sum;
//  * values row by row: element d of value t at t * head_dim + d, the row a weighted sum of values adds.
// Elements are codes of code_bits() bits: an element offset i is at byte i * code_bits / 8. q4_0 packs two codes
// a byte: keys the dimension pair (2i, 2i + 1) of a key in one byte (low nibble first), values llama.cpp's
// block_q4_0 order (byte i of a block of 32: element i low, element 16 + i high). The scaled types keep
// scale_groups() scales per token and kv head in k_scale / v_scale, from scale_block(page, g): a key's scale of
// group b at b * page_size + t (transposed like the keys), a value's at t * scale_groups() + b.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  void* k_scale = nullptr;  // f32 (int8, fp8_e4m3) or f16 (q8_0, q4_0) scales; null for the unscaled types
  void* v_scale = nullptr;
  PageGeometry page;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  KvCacheDtype dtype = KvCacheDtype::kF32;

  // Element offset of kv head g's block in page `page` (the same in the k and v pools).
  int64_t head_block(int64_t page_id, int64_t g) const { return (page_id * kv_heads + g) * page.size() * head_dim; }
  int code_bits() const { return kv_code_bits(dtype); }
  int64_t scale_groups() const { return kv_scale_groups(dtype, head_dim); }
  int64_t scale_block(int64_t page_id, int64_t g) const {
    return (page_id * kv_heads + g) * page.size() * scale_groups();
  }
};

// Writes k, v [tokens, kv_heads, head_dim] (f32; rounded to nearest even for a bf16 cache) into the cache at
// slot_mapping[t] (negative slot: skip).
void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens);
// Writes one kv head's K and V vectors (head_dim f32 each) of one token at `slot` (negative: skip), rounded as
// kv_write rounds: the fused QKV GEMM's epilogue writes each head as its columns are done.
void kv_write_head(const KvLayerView& cache, int64_t kv_head, const float* k, const float* v, int64_t slot);

// The sequences of one batch, as flat arrays of length num_seqs. Sequence s owns queries
// [q_start[s], q_start[s] + q_len[s]) of q; they sit at absolute positions
// context_len[s] - q_len[s] ... context_len[s] - 1 and attend causally to cached tokens [0, position].
// Its pages are page_tables[s * max_pages_per_seq + j].
struct AttentionBatch {
  int64_t num_seqs = 0;
  const int32_t* q_start = nullptr;
  const int32_t* q_len = nullptr;
  const int32_t* context_len = nullptr;
  const int32_t* page_tables = nullptr;
  int64_t max_pages_per_seq = 0;
  // Bidirectional blocks (an image's tokens in Gemma 3, a vision encoder's patches): per query row of the batch,
  // the number of keys it sees, [0, key_limit) instead of its causal [0, position + 1); non-decreasing within a
  // sequence, at least the causal end and at most context_len. Null: causal everywhere.
  const int32_t* key_limit = nullptr;
};

// How a layer's attention scores its keys.
struct AttentionParams {
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  // Sliding window: a query at position p sees keys (p - window, p]; 0: the whole causal context.
  int64_t window = 0;
  // Soft-capping of the scaled scores, cap * tanh(s / cap) (Gemma 2's attn_logit_softcapping); 0: none.
  float softcap = 0.0f;
  // Attention sinks (gpt-oss): query head h's logit sinks[h] joins every softmax's denominator (as a key with that
  // score and a zero value would); null: none.
  const float* sinks = nullptr;
};

// out [tokens, heads, head_dim] = softmax(q k^T * scale) v over each sequence's pages; grouped-query
// attention maps query head h to kv head h / (heads / kv_heads).
void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache, const AttentionBatch& batch,
                     const AttentionParams& params, ThreadPool& pool);

// out [n, heads, head_dim] = softmax(q k^T * scale) v per head over all n rows, no mask and no cache (a vision
// encoder's patches: kernels/encoder_attention.cpp, GEMMs over packed keys and values). q, k, v: [n, heads, head_dim].
void encoder_attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t heads,
                       int64_t head_dim, float scale, ThreadPool& pool);

// Which instruction set the dispatcher chose ("avx512", "avx2" or "scalar").
const char* active_isa();
// active_isa() and, where bf16 GEMMs go to oneDNN, the implementation oneDNN runs (e.g. "brg:avx512_core_bf16";
// "brg:avx512_core_amx" on AMX machines), for logs and benchmark headers.
std::string kernels_summary();

// Whether the active GEMM reads bf16 weights in TensorLayout::kBf16Blocked64 (the AVX-512-BF16 kernels do: their
// decode GEMV streams it at the read bandwidth and oneDNN's matmul takes it as its packed weights).
bool gemm_prefers_bf16_blocked();
// A copy of a row-major bf16 matrix [N, K] in the kBf16Blocked64 layout (for kernels::gemm only: the embedding
// lookup and the other kernels read row-major weights), its 64-row blocks split across `pool` when given (this
// runs over most of the model's bytes at load). Throws Error for anything else.
Tensor to_bf16_blocked(const Tensor& w, ThreadPool* pool = nullptr);

}  // namespace minfer::kernels
