// The AVX2 leaf table.
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels {

const LeafKernels kAvx2Leaves = {
    .name = "avx2",
    .gemm_cols = avx2::gemm_cols,
    .rmsnorm = avx2::rmsnorm,
    .rope = avx2::rope,
    .silu_mul = avx2::silu_mul,
    .gelu_tanh_mul = avx2::gelu_tanh_mul,
    .add = avx2::add,
    .softmax = avx2::softmax,
    .embedding = avx2::embedding,
    .attention_span = avx2::attention_span,
};

}  // namespace minfer::kernels
