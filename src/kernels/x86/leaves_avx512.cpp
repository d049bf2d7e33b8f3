// The AVX-512 row-wise leaves (leaves_impl.h over avx512::Vec) and the AVX-512 leaf table.
#include "kernels/x86/leaves_impl.h"
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {

using RowKernels = x86::Rows<Vec, F32W, F16W, Bf16W>;

void rmsnorm(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim) {
  RowKernels::rmsnorm(x, weight, wtype, eps, y, rows, dim);
}
void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style) {
  x86::rope<Vec>(x, cos, sin, tokens, heads, head_dim, half_rot, style);
}
void silu_mul(const float* gate, const float* up, float* out, int64_t n) { x86::silu_mul<Vec>(gate, up, out, n); }
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  x86::gelu_tanh_mul<Vec>(gate, up, out, n);
}
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n) { x86::swiglu_oai<Vec>(gate, up, out, n); }
void add(const float* a, const float* b, float* out, int64_t n) { x86::add<Vec>(a, b, out, n); }
void softmax(float* x, int64_t rows, int64_t cols) { x86::softmax<Vec>(x, rows, cols); }
void embedding(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out) {
  RowKernels::embedding(ids, n, table, dtype, dim, out);
}

}  // namespace minfer::kernels::avx512

namespace minfer::kernels {

const LeafKernels kAvx512Leaves = {
    .name = "avx512",
    .gemm_cols = avx512::gemm_cols,
    .rmsnorm = avx512::rmsnorm,
    .rope = avx512::rope,
    .silu_mul = avx512::silu_mul,
    .gelu_tanh_mul = avx512::gelu_tanh_mul,
    .swiglu_oai = avx512::swiglu_oai,
    .add = avx512::add,
    .softmax = avx512::softmax,
    .embedding = avx512::embedding,
    .attention_span = avx512::attention_span,
};

}  // namespace minfer::kernels

namespace minfer::kernels {

// Chosen only where the CPU has AVX-512-BF16 (dispatch.cpp); the same leaves otherwise.
const LeafKernels kAvx512Bf16Leaves = {
    .name = "avx512_bf16",
    .gemm_cols = avx512::gemm_cols,
    .rmsnorm = avx512::rmsnorm,
    .rope = avx512::rope,
    .silu_mul = avx512::silu_mul,
    .gelu_tanh_mul = avx512::gelu_tanh_mul,
    .swiglu_oai = avx512::swiglu_oai,
    .add = avx512::add,
    .softmax = avx512::softmax,
    .embedding = avx512::embedding,
    .attention_span = avx512::attention_span,
    .bf16_round_rows = avx512::bf16_round_rows,
    .gemm_bf16_cols = avx512::gemm_bf16_cols,
    .gemm_bf16_blocked_cols = avx512::gemm_bf16_blocked_cols,
};

}  // namespace minfer::kernels
