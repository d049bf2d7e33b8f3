// Gate/up pass: the gate and up projections of one input and their SiLU product become one GEMM over the two
// weights interleaved in blocks (packed once here), whose epilogue writes silu(gate) * up (gelu_tanh for Gemma); the
// same for each expert of a MoE node.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"
#include "kernels/fused/fused_weights.h"

namespace minfer::graph {
namespace {

// Gate/up rows per interleave block: a multiple of every GEMM tile width, small enough that column tiles
// (multiples of 2 x this) still split the FFN finely across threads.
constexpr int64_t kGateUpBlock = 32;

}  // namespace

// Each expert's gate and up of a MoE node packed the same way, so the expert's GEMM writes silu(gate) * up in one pass.
int fuse_moe_gate_up(Graph& graph) {
  int rewrites = 0;
  for (Node& n : graph.mutable_nodes()) {
    // gpt-oss's experts (biases, clamped SwiGLU) keep their two GEMMs: the packed epilogue is SiLU without bias.
    if (n.kind != OpKind::kMoe || n.block > 0 || !n.expert_biases.empty() ||
        n.moe_activation != kernels::MoeActivation::kSilu)
      continue;
    const size_t experts = n.experts.size() / 3;
    bool packable = true;
    for (size_t e = 0; e < experts && packable; ++e)
      packable = kernels::fused::packable(*n.experts[3 * e], *n.experts[3 * e + 1]) &&
                 n.experts[3 * e]->dim(0) == n.experts[3 * e + 1]->dim(0);
    if (!packable) continue;
    std::vector<const Tensor*> packed;
    for (size_t e = 0; e < experts; ++e) {
      packed.push_back(graph.add_constant(
          kernels::fused::interleave_gate_up(*n.experts[3 * e], *n.experts[3 * e + 1], kGateUpBlock)));
      packed.push_back(n.experts[3 * e + 2]);
    }
    n.experts = std::move(packed);
    n.block = kGateUpBlock;
    ++rewrites;
  }
  return rewrites;
}

int fuse_gate_up(Graph& graph) {
  return fuse_moe_gate_up(graph) + rewrite_all(graph, [&](int i, const GraphIndex& index) {
           const Node& act = graph.nodes()[static_cast<size_t>(i)];
           const bool gelu = act.kind == OpKind::kGeluTanhMul;
           if ((act.kind != OpKind::kSiluMul && !gelu) || act.inputs[0] == act.inputs[1]) return false;
           int gate_at, up_at;
           const Node* gate = index.producer_of_kind(act.inputs[0], OpKind::kMatMul, &gate_at);
           const Node* up = index.producer_of_kind(act.inputs[1], OpKind::kMatMul, &up_at);
           if (!gate || !up || gate->inputs[0] != up->inputs[0] || gate->bias || up->bias) return false;
           if (!index.only_reader(act.inputs[0], i) || !index.only_reader(act.inputs[1], i)) return false;
           if (!kernels::fused::packable(*gate->weight, *up->weight) || gate->weight->dim(0) != up->weight->dim(0))
             return false;
           Node fused{.kind = OpKind::kFusedMatMul, .inputs = {gate->inputs[0]}, .output = act.output};
           fused.weight =
               graph.add_constant(kernels::fused::interleave_gate_up(*gate->weight, *up->weight, kGateUpBlock));
           fused.epilogue = gelu ? kernels::fused::Epilogue::kGeluTanhMul : kernels::fused::Epilogue::kSiluMul;
           fused.block = kGateUpBlock;
           return replace_nodes(graph, index, {gate_at, up_at, i}, std::move(fused));
         });
}

}  // namespace minfer::graph
