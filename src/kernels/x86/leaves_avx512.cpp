// The AVX-512 leaf table.
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels {

const LeafKernels kAvx512Leaves = {
    .name = "avx512",
    .gemm_cols = avx512::gemm_cols,
    .rmsnorm = avx512::rmsnorm,
    .rope = avx512::rope,
    .silu_mul = avx512::silu_mul,
    .gelu_tanh_mul = avx512::gelu_tanh_mul,
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
    .add = avx512::add,
    .softmax = avx512::softmax,
    .embedding = avx512::embedding,
    .attention_span = avx512::attention_span,
    .bf16_round_rows = avx512::bf16_round_rows,
    .gemm_bf16_cols = avx512::gemm_bf16_cols,
    .gemm_bf16_blocked_cols = avx512::gemm_bf16_blocked_cols,
};

}  // namespace minfer::kernels
