// The scalar reference kernels: plain loops in the obvious order, the oracle every vectorised variant is
// tested against and the fallback on CPUs without AVX2. Whole-op forms (single-threaded) for tests, and the
// leaf forms of kernels/leaf.h for the dispatch table.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/leaf.h"
#include "kernels/mixers.h"

namespace minfer::kernels::ref {

// Whole ops, single-threaded, same semantics as kernels.h.
void gemm(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y);
void rmsnorm(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim);
void rope_angles(const int32_t* positions, int64_t tokens, const float* inv_freq, int64_t half_rot, float* cos,
                 float* sin);
void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh(const float* x, float* out, int64_t n);
// gpt-oss's experts: min(g, limit) * sigmoid(alpha min(g, limit)) * (clamp(up, -limit, limit) + 1), with
// transformers' GptOssExperts constants.
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n);
void sigmoid_mul(const float* gate, const float* x, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
void softmax(float* x, int64_t rows, int64_t cols);
void embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out);
void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens);
void kv_write_head(const KvLayerView& cache, int64_t kv_head, const float* k, const float* v, int64_t slot);
void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache, const AttentionBatch& batch,
                     const AttentionParams& params);
// Element d of the key / value of token slot t of page `page`, kv head g, decoded to f32 (kv_codes_ref.cpp).
float kv_key_at(const KvLayerView& cache, int64_t page, int64_t g, int64_t t, int64_t d);
float kv_value_at(const KvLayerView& cache, int64_t page, int64_t g, int64_t t, int64_t d);

// Leaf forms (see kernels/leaf.h).
void gemm_cols(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias, float* y,
               int64_t n0, int64_t n1);
void rmsnorm_leaf(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim);
void embedding_leaf(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out);
// Two-pass softmax over the whole context; ignores `scratch` (allocates its score row).
void attention_span(const KvLayerView& cache, const AttentionSpan& span, float* scratch);
// The recurrent mixers' leaves (kernels/mixers.h); delta_net_head takes the chunked form for long runs,
// delta_net_head_recurrent is the per-token recurrence alone (the tests' second opinion).
void conv1d_leaf(const Conv1dSpan& span, int64_t c0, int64_t c1);
void delta_net_head(const DeltaNetHead& head, float* scratch);
void delta_net_head_recurrent(const DeltaNetHead& head);
// ssm_head takes the chunked (SSD) form for long runs, ssm_head_recurrent the per-token recurrence alone.
void ssm_head(const SsmHead& head, float* scratch);
void ssm_head_recurrent(const SsmHead& head);

}  // namespace minfer::kernels::ref
