// The AVX-512 leaf table.
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels {

const LeafKernels kAvx512Leaves = {
    .name = "avx512",
    .gemm_cols = avx512::gemm_cols,
    .rmsnorm = avx512::rmsnorm,
    .rope = avx512::rope,
    .silu_mul = avx512::silu_mul,
    .add = avx512::add,
    .softmax = avx512::softmax,
    .embedding = avx512::embedding,
    .attention_span = avx512::attention_span,
};

}  // namespace minfer::kernels
