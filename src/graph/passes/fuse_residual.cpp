// Residual pass: out = x + matmul(a) becomes one GEMM whose epilogue adds x to each tile it computes, so the
// projection's result is written once, already summed (o-proj and down-proj).
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"

namespace minfer::graph {

int fuse_residual(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& add = graph.nodes()[static_cast<size_t>(i)];
    if (add.kind != OpKind::kAdd || add.inputs[0] == add.inputs[1]) return false;
    for (int side : {1, 0}) {
      const ValueId y = add.inputs[static_cast<size_t>(side)];
      const ValueId residual = add.inputs[static_cast<size_t>(1 - side)];
      const int p = index.producer(y);
      if (p < 0 || !index.only_reader(y, i)) continue;
      const Node& mm = graph.nodes()[static_cast<size_t>(p)];
      const bool plain = mm.kind == OpKind::kMatMul ||
                         (mm.kind == OpKind::kFusedMatMul && mm.epilogue == kernels::fused::Epilogue::kNone);
      if (!plain || graph.value(y).rows != graph.value(add.output).rows) continue;
      Node fused = mm;
      fused.kind = OpKind::kFusedMatMul;
      fused.inputs = {mm.inputs[0], residual};
      fused.output = add.output;
      fused.epilogue = kernels::fused::Epilogue::kResidual;
      if (replace_nodes(graph, index, {p, i}, std::move(fused))) return true;
    }
    return false;
  });
}

}  // namespace minfer::graph
