// Add + RMSNorm pass: s = a + b followed by rmsnorm(s) becomes one row-wise pass that writes s (still read by
// the residual stream) and its normalised form while the row is in L1.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"

namespace minfer::graph {

int fuse_add_rmsnorm(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& norm = graph.nodes()[static_cast<size_t>(i)];
    if (norm.kind != OpKind::kRmsNorm || norm.head_dim > 0 || norm.inputs.size() > 1) return false;
    int add_at;
    const Node* add = index.producer_of_kind(norm.inputs[0], OpKind::kAdd, &add_at);
    if (!add) return false;
    Node fused{.kind = OpKind::kAddRmsNorm, .inputs = add->inputs, .output = norm.output};
    fused.aux_output = add->output;
    fused.weight = norm.weight;
    fused.eps = norm.eps;
    return replace_nodes(graph, index, {add_at, i}, std::move(fused));
  });
}

}  // namespace minfer::graph
