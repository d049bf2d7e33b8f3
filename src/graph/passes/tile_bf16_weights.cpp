// bf16 GEMM weights -> row tiles (TensorLayout::kBf16RowTiles) for the kernels that stream them faster that way.
#include <unordered_map>

#include "graph/passes/fusion_passes.h"
#include "kernels/kernels.h"

namespace minfer::graph {

int tile_bf16_weights(Graph& graph) {
  if (!kernels::gemm_prefers_bf16_row_tiles()) return 0;
  std::unordered_map<const Tensor*, const Tensor*> tiled;  // a weight two nodes share is copied once
  int rewrites = 0;
  for (Node& n : graph.mutable_nodes()) {
    if (n.kind != OpKind::kMatMul && n.kind != OpKind::kFusedMatMul) continue;
    const Tensor* w = n.weight;
    if (w == nullptr || w->dtype != DType::BF16 || w->layout != TensorLayout::kRowMajor || w->rank() != 2) continue;
    auto [it, fresh] = tiled.try_emplace(w, nullptr);
    if (fresh) {
      if (graph.owns_constant(w)) {  // a fused weight the graph packed: re-lay it in place, keep one copy
        graph.replace_constant(w, kernels::to_bf16_row_tiles(*w));
        it->second = w;
      } else {  // a checkpoint weight (the embedding may read it too): a tiled copy beside it
        it->second = graph.add_constant(kernels::to_bf16_row_tiles(*w));
      }
    }
    n.weight = it->second;
    ++rewrites;
  }
  return rewrites;
}

}  // namespace minfer::graph
