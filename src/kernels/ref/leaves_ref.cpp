// The scalar leaf table.
#include "kernels/leaf.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels {

const LeafKernels kRefLeaves = {
    .name = "scalar",
    .gemm_cols = ref::gemm_cols,
    .rmsnorm = ref::rmsnorm_leaf,
    .rope = ref::rope,
    .silu_mul = ref::silu_mul,
    .gelu_tanh_mul = ref::gelu_tanh_mul,
    .swiglu_oai = ref::swiglu_oai,
    .sigmoid_mul = ref::sigmoid_mul,
    .add = ref::add,
    .softmax = ref::softmax,
    .embedding = ref::embedding_leaf,
    .attention_span = ref::attention_span,
    .gelu_tanh = ref::gelu_tanh,
};

}  // namespace minfer::kernels
