// bf16 GEMM weights -> oneDNN's blocked layout (TensorLayout::kBf16Blocked64) for the kernels that read it: the
// decode GEMV streams it front to back and oneDNN's matmul takes it as its pre-packed weights.
#include <unordered_map>

#include "graph/passes/fusion_passes.h"
#include "kernels/kernels.h"

namespace minfer::graph {

int block_bf16_weights(Graph& graph) {
  if (!kernels::gemm_prefers_bf16_blocked()) return 0;
  std::unordered_map<const Tensor*, const Tensor*> blocked;  // a weight two nodes share is copied once
  int rewrites = 0;
  for (Node& n : graph.mutable_nodes()) {
    if (n.kind != OpKind::kMatMul && n.kind != OpKind::kFusedMatMul) continue;
    const Tensor* w = n.weight;
    if (w == nullptr || w->dtype != DType::BF16 || w->layout != TensorLayout::kRowMajor || w->rank() != 2) continue;
    auto [it, fresh] = blocked.try_emplace(w, nullptr);
    if (fresh) {
      if (graph.owns_constant(w)) {  // a fused weight the graph packed: re-lay it in place, keep one copy
        graph.replace_constant(w, kernels::to_bf16_blocked(*w));
        it->second = w;
      } else {  // a checkpoint weight (the embedding may read it too): a blocked copy beside it
        it->second = graph.add_constant(kernels::to_bf16_blocked(*w));
      }
    }
    n.weight = it->second;
    ++rewrites;
  }
  return rewrites;
}

}  // namespace minfer::graph
