// Norm-into-GEMM pass: an RMSNorm read only by a GEMM moves into that GEMM's prologue (the GEMM's caller
// normalises the rows just before the threads start), which removes a dispatch and a buffer per norm.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"

namespace minfer::graph {

int fuse_norm_gemm(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& norm = graph.nodes()[static_cast<size_t>(i)];
    // A per-head or gated norm is no GEMM prologue (the prologue normalises whole rows).
    if (norm.kind != OpKind::kRmsNorm || norm.head_dim > 0 || norm.inputs.size() > 1) return false;
    const auto& readers = index.readers(norm.output);
    if (readers.size() != 1 || !index.only_reader(norm.output, readers[0])) return false;
    const Node& mm = graph.nodes()[static_cast<size_t>(readers[0])];
    const bool gemm = mm.kind == OpKind::kMatMul || mm.kind == OpKind::kFusedMatMul;
    if (!gemm || mm.norm_weight || mm.gather || mm.inputs[0] != norm.output) return false;
    if (mm.inputs.size() > 1 && mm.inputs[1] == norm.output) return false;
    Node fused = mm;
    fused.kind = OpKind::kFusedMatMul;
    fused.inputs[0] = norm.inputs[0];
    fused.norm_weight = norm.weight;
    fused.eps = norm.eps;
    return replace_nodes(graph, index, {i, readers[0]}, std::move(fused));
  });
}

}  // namespace minfer::graph
