// The recurrent mixers' gates, fused into the op beside them (the "norm + gate", "conv + gate"):
//   gated-norm  Qwen3.5's rmsnorm per head then silu(z) *, and Mamba2's silu(z) * then rmsnorm per group
//               -> one rmsnorm node reading z, in one pass over the row (executor: the same two leaves, in order);
//   conv-gates  LFM2's B * x -> conv -> C * -> one conv1d node gating its input and output in its channel blocks.
// Each saves the dispatches of the gates and a write and read of their results.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"

namespace minfer::graph {
namespace {

// The other input of a two-input node, given one of them.
ValueId other_input(const Node& n, ValueId one) { return n.inputs[0] == one ? n.inputs[1] : n.inputs[0]; }

// rmsnorm(v) read only by silu_mul(z, .): the norm reads the gate after it.
bool fuse_norm_then_gate(Graph& graph, const GraphIndex& index, int i) {
  const Node& gate = graph.nodes()[static_cast<size_t>(i)];
  int norm_at;
  const Node* norm = index.producer_of_kind(gate.inputs[1], OpKind::kRmsNorm, &norm_at);
  if (!norm || norm->inputs.size() != 1 || gate.inputs[0] == gate.inputs[1] || !index.only_reader(gate.inputs[1], i))
    return false;
  Node fused = *norm;
  fused.inputs = {norm->inputs[0], gate.inputs[0]};
  fused.output = gate.output;
  return replace_nodes(graph, index, {norm_at, i}, std::move(fused));
}

// silu_mul(z, y) read only by rmsnorm: the norm reads the gate before it.
bool fuse_gate_then_norm(Graph& graph, const GraphIndex& index, int i) {
  const Node& norm = graph.nodes()[static_cast<size_t>(i)];
  if (norm.inputs.size() != 1) return false;
  int gate_at;
  const Node* gate = index.producer_of_kind(norm.inputs[0], OpKind::kSiluMul, &gate_at);
  if (!gate || gate->inputs[0] == gate->inputs[1] || !index.only_reader(norm.inputs[0], i)) return false;
  Node fused = norm;
  fused.inputs = {gate->inputs[1], gate->inputs[0]};
  fused.gate_first = true;
  return replace_nodes(graph, index, {gate_at, i}, std::move(fused));
}

}  // namespace

int fuse_gated_norm(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const OpKind kind = graph.nodes()[static_cast<size_t>(i)].kind;
    if (kind == OpKind::kSiluMul) return fuse_norm_then_gate(graph, index, i);
    if (kind == OpKind::kRmsNorm) return fuse_gate_then_norm(graph, index, i);
    return false;
  });
}

int fuse_conv_gates(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& conv = graph.nodes()[static_cast<size_t>(i)];
    if (conv.kind != OpKind::kConv1d || conv.inputs.size() != 1) return false;
    int in_at;
    const Node* in = index.producer_of_kind(conv.inputs[0], OpKind::kMul, &in_at);
    const auto& readers = index.readers(conv.output);
    if (!in || !index.only_reader(conv.inputs[0], i) || readers.size() != 1) return false;
    const int out_at = readers[0];
    const Node& out = graph.nodes()[static_cast<size_t>(out_at)];
    if (out.kind != OpKind::kMul || out.inputs[0] == out.inputs[1] || !index.only_reader(conv.output, out_at))
      return false;
    Node fused = conv;  // the product's operands commute: in0 is the convolved input, in1 its gate
    fused.inputs = {in->inputs[1], in->inputs[0], other_input(out, conv.output)};
    fused.output = out.output;
    return replace_nodes(graph, index, {in_at, i, out_at}, std::move(fused));
  });
}

}  // namespace minfer::graph
