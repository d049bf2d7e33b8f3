// LM-head rows pass: the gather of the rows that sample (the last token of each sequence) moves into the
// prologue of the GEMM that reads it, so the final norm and the lm_head GEMM run on those rows only, in one
// dispatch. (The unfused graph already computes the lm_head on those rows only; this removes the copy node.)
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"

namespace minfer::graph {

int fuse_lm_head_rows(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& gather = graph.nodes()[static_cast<size_t>(i)];
    if (gather.kind != OpKind::kGatherRows) return false;
    const auto& readers = index.readers(gather.output);
    if (readers.size() != 1 || !index.only_reader(gather.output, readers[0])) return false;
    const Node& mm = graph.nodes()[static_cast<size_t>(readers[0])];
    const bool gemm = mm.kind == OpKind::kMatMul ||
                      (mm.kind == OpKind::kFusedMatMul && mm.epilogue == kernels::fused::Epilogue::kNone);
    if (!gemm || mm.gather || mm.inputs.size() != 1 || graph.value(gather.inputs[0]).rows != RowSpace::kTokens)
      return false;
    Node fused = mm;
    fused.kind = OpKind::kFusedMatMul;
    fused.inputs[0] = gather.inputs[0];
    fused.gather = true;
    return replace_nodes(graph, index, {i, readers[0]}, std::move(fused));
  });
}

}  // namespace minfer::graph
