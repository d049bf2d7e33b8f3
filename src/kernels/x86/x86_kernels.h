// Declarations of the AVX2 and AVX-512 leaf kernels (see kernels/leaf.h for their contracts). Declarations
// only: safe to include from code built for any instruction set.
#pragma once

#include <cstdint>

#include "kernels/leaf.h"

#define MINFER_DECLARE_X86_LEAVES                                                                                    \
  void gemm_cols(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,     \
                 float* y, int64_t n0, int64_t n1);                                                                  \
  /* The two GEMM strategies gemm_cols chooses between by m. */                                                      \
  void gemm_cols_dot(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias, \
                     float* y, int64_t n0, int64_t n1);                                                              \
  void gemm_cols_packed(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n,                 \
                        const float* bias, float* y, int64_t n0, int64_t n1);                                        \
  void rmsnorm(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim);     \
  void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,           \
            int64_t half_rot, RopeStyle style);                                                                      \
  void silu_mul(const float* gate, const float* up, float* out, int64_t n);                                          \
  void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);                                     \
  void swiglu_oai(const float* gate, const float* up, float* out, int64_t n);                                        \
  void add(const float* a, const float* b, float* out, int64_t n);                                                   \
  void softmax(float* x, int64_t rows, int64_t cols);                                                                \
  void embedding(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out);            \
  void attention_span(const KvLayerView& cache, const AttentionSpan& span, float* scratch);

namespace minfer::kernels::avx2 {
MINFER_DECLARE_X86_LEAVES
}  // namespace minfer::kernels::avx2

namespace minfer::kernels::avx512 {
MINFER_DECLARE_X86_LEAVES
// AVX-512-BF16 (gemm_bf16_avx512.cpp; only on CPUs with avx512_bf16): the bf16-activation GEMM of bf16
// weights (see GemmBf16ColsFn in kernels/leaf.h) and its two strategies, and the activation rounding.
void bf16_round_rows(const float* x, int64_t rows, int64_t k, uint16_t* xb, int64_t ldxb);
void gemm_bf16_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                    const float* bias, float* y, int64_t n0, int64_t n1);
void gemm_bf16_cols_dot(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                        const float* bias, float* y, int64_t n0, int64_t n1);
void gemm_bf16_cols_packed(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                           const float* bias, float* y, int64_t n0, int64_t n1);
// The same over weights in TensorLayout::kBf16Blocked64 (n0 a multiple of 64): the decode GEMV, fastest for a
// few rows (each block of weights is streamed once per group of 4 rows).
void gemm_bf16_blocked_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                            const float* bias, float* y, int64_t n0, int64_t n1);
// W8A16 prefill on the packed form: int8 weight rows [n, k] with one scale per row (symmetric), converted to bf16
// exactly while packing; y = scales[j] * (Xb . q_j) + bias[j] for columns [n0, n1).
void gemm_w8a16_bf16_packed_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const int8_t* q,
                                 const float* scales, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1);
}  // namespace minfer::kernels::avx512

#undef MINFER_DECLARE_X86_LEAVES
