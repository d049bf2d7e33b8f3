// bf16 GEMM weights -> oneDNN's blocked layout (TensorLayout::kBf16Blocked64) for the kernels that read it: the
// decode GEMV streams it front to back and oneDNN's matmul takes it as its pre-packed weights.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"
#include "kernels/kernels.h"

namespace minfer::graph {

int block_bf16_weights(Graph& graph, ThreadPool* pool) {
  if (!kernels::gemm_prefers_bf16_blocked()) return 0;
  return relayout_weights(
      graph, [](const Tensor& w) { return w.dtype == DType::BF16 && w.layout == TensorLayout::kRowMajor; },
      kernels::to_bf16_blocked, pool);
}

}  // namespace minfer::graph
