// Leaf kernels: the single-threaded, raw-pointer building blocks that each instruction set implements
// (kernels/ref/ scalar, kernels/x86/ AVX2 and AVX-512). The drivers (gemm_driver.cpp, attention_driver.cpp)
// validate arguments and split work across the ThreadPool in baseline x86-64 code, so the ISA-specific
// translation units hold no threading, no std containers and no shared inline code the linker could pick
// from the wrong instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_epilogue.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace minfer::kernels {

// Columns [n0, n1) of Y[m, n] = sum_k X[m, k] * W[n, k] (+ bias[n]); w is [n, k] of wtype (F32/F16/BF16),
// y has row stride n.
using GemmColsFn = void (*)(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n,
                            const float* bias, float* y, int64_t n0, int64_t n1);
using RmsnormFn = void (*)(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows,
                           int64_t dim);
using RopeFn = void (*)(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
                        int64_t half_rot, RopeStyle style);
using BinaryFn = void (*)(const float* a, const float* b, float* out, int64_t n);
using UnaryFn = void (*)(const float* x, float* out, int64_t n);
using SoftmaxFn = void (*)(float* x, int64_t rows, int64_t cols);
using EmbeddingFn = void (*)(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out);
// bf16 weights with bf16 activations (CPUs with native bf16 dot products). Rows of x [rows, k] rounded to nearest
// even into xb [rows, ldxb] (ldxb a multiple of 32, zero past k); then columns [n0, n1) of
// Y[m, n] = sum_k Xb[m, k] * W[n, k] (+ bias[n]) for bf16 W [n, k], products exact, sums in f32.
using Bf16RoundRowsFn = void (*)(const float* x, int64_t rows, int64_t k, uint16_t* xb, int64_t ldxb);
using GemmBf16ColsFn = void (*)(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                                const float* bias, float* y, int64_t n0, int64_t n1);

// One unit of paged attention: tokens [0, ntok) of one sequence (token i at absolute position first_pos + i,
// attending to cached positions [0, first_pos + i]) and query heads [head_begin, head_end), which all read
// kv head `kv_head`. q and out point at the span's first token: [ntok, heads, head_dim].
struct AttentionSpan {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t heads = 0;
  int64_t head_begin = 0;
  int64_t head_end = 0;
  int64_t kv_head = 0;
  int64_t first_pos = 0;
  int64_t ntok = 0;
  const int32_t* page_table = nullptr;
  float scale = 1.0f;
  int64_t window = 0;    // AttentionParams::window: token i sees keys from window_start(i) on
  float softcap = 0.0f;  // AttentionParams::softcap
  // AttentionParams::sinks (indexed by query head), given to one span of a split context only (the driver's first
  // range), so the merge counts each sink once; null: none.
  const float* sinks = nullptr;
  // Flash-decoding split of a long context: only cached positions [ctx_begin, ctx_end) are read (ctx_begin is
  // a multiple of the page size; positions past a token's own stay masked as always).
  int64_t ctx_begin = 0;
  int64_t ctx_end = INT64_MAX;
  // Null: the normalised result goes to out. Otherwise the unnormalised partial result of each row
  // r = t * (head_end - head_begin) + (h - head_begin) goes to partial + r * (head_dim + 2): the running max of
  // the scaled scores, the sum of exp(score - max), then head_dim floats of sum exp(score - max) * v. A row
  // with no position in the range gets max -inf and zero sums. The driver merges the parts.
  float* partial = nullptr;
  // The span this thread runs next, if known: a leaf may request its first keys while finishing this one (its
  // pages lie elsewhere in the pool, where no hardware prefetcher would look). A hint only.
  const AttentionSpan* next = nullptr;
  // AttentionBatch::key_limit at the span's first token (token i sees keys [.., key_limit[i])); null: causal.
  const int32_t* key_limit = nullptr;
};
// The end of the keys token i of a span sees: its causal end, or further in a bidirectional block.
inline int64_t seen_end(const AttentionSpan& span, int64_t i) {
  return span.key_limit ? span.key_limit[i] : span.first_pos + i + 1;
}
// The first key token i of a span sees (its sliding window's start; 0 without a window).
inline int64_t window_start(const AttentionSpan& span, int64_t i) {
  const int64_t lo = span.first_pos + i - span.window + 1;
  return span.window > 0 && lo > 0 ? lo : 0;
}
// Spans are at most this many tokens, so a leaf's per-row state fits its scratch.
inline constexpr int64_t kAttentionMaxSpanTokens = 16;
// scratch: attention_scratch_floats(...) floats, 64-byte aligned, owned by the calling thread.
using AttentionSpanFn = void (*)(const KvLayerView& cache, const AttentionSpan& span, float* scratch);
// Keys per online-softmax step of the AVX-512 leaf: it keeps this many scores (then weights) per row.
inline constexpr int64_t kAttentionBlockKeys = 128;
// Scratch the driver gives a leaf for a span of `rows` = tokens x heads: room for a running max, sum and
// correction, an accumulator and kAttentionBlockKeys scores per row, two pages of scores, and two 16-key
// blocks of keys or values. Leaves lay it out themselves within this size.
constexpr size_t attention_scratch_floats(int64_t rows, int64_t head_dim, int64_t page_size) {
  const auto pad = [](int64_t v) { return static_cast<size_t>((v + 15) / 16 * 16); };
  return pad(rows) * (3 + pad(head_dim) + kAttentionBlockKeys) + pad(page_size) * 2 + pad(head_dim) * 16 * 2;
}

struct LeafKernels {
  const char* name;
  GemmColsFn gemm_cols;
  RmsnormFn rmsnorm;
  RopeFn rope;
  BinaryFn silu_mul;
  BinaryFn gelu_tanh_mul;
  BinaryFn swiglu_oai;
  BinaryFn sigmoid_mul;
  BinaryFn add;
  SoftmaxFn softmax;
  EmbeddingFn embedding;
  AttentionSpanFn attention_span;
  UnaryFn gelu_tanh;  // out = gelu_tanh(x) (a vision encoder's MLP)
  // Null where the leaf set has no bf16-activation GEMM: bf16 weights then go through gemm_cols (f32 activations).
  Bf16RoundRowsFn bf16_round_rows = nullptr;
  GemmBf16ColsFn gemm_bf16_cols = nullptr;
  // The same GEMM over weights in TensorLayout::kBf16Blocked64 (w is the blocked data; n0 a multiple of 64). The
  // driver calls it for a few rows and oneDNN's matmul for more (kernels/onednn_gemm.h).
  GemmBf16ColsFn gemm_bf16_blocked_cols = nullptr;
};

extern const LeafKernels kRefLeaves;
extern const LeafKernels kAvx2Leaves;
extern const LeafKernels kAvx512Leaves;
extern const LeafKernels kAvx512Bf16Leaves;  // the AVX-512 leaves plus the AVX-512-BF16 GEMM

// Drivers (baseline code): argument checks and the thread split, over any leaf set.
// Row stride of activations rounded to bf16: k rounded up to a multiple of 32 (the padding is zero).
constexpr int64_t bf16_row_stride(int64_t k) { return (k + 31) / 32 * 32; }
// x [m, k] rounded to bf16 into the calling thread's scratch ([m, bf16_row_stride(k)], valid until its next
// call), split across the pool when large; for the GEMMs that multiply in bf16.
// With padded_rows > m the scratch holds that many rows, those past m zero (oneDNN is given whole row buckets).
const uint16_t* round_rows_to_bf16(Bf16RoundRowsFn round, const float* x, int64_t m, int64_t k, ThreadPool& pool,
                                   int64_t padded_rows = 0);
// With an epilogue, each column tile is handed to epilogue->apply right after the thread computing it is done.
void run_gemm(GemmColsFn leaf, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
              ThreadPool& pool, const GemmEpilogue* epilogue = nullptr);
// The GEMM of a leaf set: bf16 weights take its bf16-activation GEMM when it has one, everything else gemm_cols.
void run_gemm(const LeafKernels& leaves, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias,
              float* y, ThreadPool& pool, const GemmEpilogue* epilogue = nullptr);
// Contexts longer than range_tokens are split into ranges of that many tokens (whole pages), run as separate
// spans, and their partial softmax results merged (flash-decoding), so the decode of one long sequence keeps
// every thread busy. The ranges sit at fixed positions, so a row's result never depends on the batch.
struct AttentionSplitOptions {
  int64_t range_tokens = 512;  // rounded up to whole pages
};
// A cache whose vectors are stored rotated (kv_rotated): the batch's query rows times H, in the calling thread's
// scratch (valid until its next call), for the leaves to score against the rotated keys; and each sequence's output
// rows rotated back in place after them (the leaves' output of rotated values is H times the true one).
const float* rotate_queries(const float* q, int64_t heads, int64_t head_dim, const AttentionBatch& batch);
void unrotate_outputs(float* out, int64_t heads, int64_t head_dim, const AttentionBatch& batch);
void run_paged_attention(AttentionSpanFn leaf, const float* q, float* out, int64_t heads, const KvLayerView& cache,
                         const AttentionBatch& batch, const AttentionParams& params, ThreadPool& pool,
                         const AttentionSplitOptions& split = {});

}  // namespace minfer::kernels
