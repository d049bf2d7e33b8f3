// QKV pass: the three projections of one normalised input become one GEMM over weights packed once here
// ([k_g v_g per kv head | q], see kernels/fused/fused_weights.h), whose epilogue adds the bias, rotates Q and
// K (each head RMSNorm-ed first where the model has q/k norms, Qwen3), writes K and V into the paged cache and hands
// the rotated Q to attention.
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"
#include "kernels/fused/fused_weights.h"

namespace minfer::graph {
namespace {

bool same_bias_presence(const Node& a, const Node& b, const Node& c) {
  return (a.bias != nullptr) == (b.bias != nullptr) && (a.bias != nullptr) == (c.bias != nullptr);
}

// The projection a RoPE node rotates: its matmul, read directly or through a per-head RMSNorm (Qwen3's q/k norms),
// each value read by that one consumer only.
struct Projection {
  const Node* mm = nullptr;
  int mm_at = -1;
  const Node* norm = nullptr;  // the per-head norm, if any
  int norm_at = -1;
};

bool projection_of(const GraphIndex& index, const Node& rope, int rope_at, Projection* p) {
  ValueId v = rope.inputs[0];
  if (!index.only_reader(v, rope_at)) return false;
  if (const Node* norm = index.producer_of_kind(v, OpKind::kRmsNorm, &p->norm_at)) {
    if (norm->head_dim != rope.head_dim || !index.only_reader(norm->inputs[0], p->norm_at)) return false;
    p->norm = norm;
    v = norm->inputs[0];
  }
  p->mm = index.producer_of_kind(v, OpKind::kMatMul, &p->mm_at);
  return p->mm != nullptr;
}

}  // namespace

int fuse_qkv(Graph& graph) {
  return rewrite_all(graph, [&](int i, const GraphIndex& index) {
    const Node& kw = graph.nodes()[static_cast<size_t>(i)];
    if (kw.kind != OpKind::kKvWrite || kw.inputs.size() != 2) return false;
    int rope_k_at, v_at;
    const Node* rope_k = index.producer_of_kind(kw.inputs[0], OpKind::kRope, &rope_k_at);
    const Node* mv = index.producer_of_kind(kw.inputs[1], OpKind::kMatMul, &v_at);
    if (!rope_k || !mv || !index.only_reader(kw.inputs[0], i) || !index.only_reader(kw.inputs[1], i)) return false;
    Projection pk;
    if (!projection_of(index, *rope_k, rope_k_at, &pk)) return false;
    const Node* mk = pk.mm;
    const ValueId x = mk->inputs[0];
    if (mv->inputs[0] != x) return false;
    // The attention of the same layer reads rope(matmul q(x)), normed per head exactly when k is.
    for (const Node& attn : graph.nodes()) {
      if (attn.kind != OpKind::kAttention || attn.layer != kw.layer) continue;
      int rope_q_at;
      const Node* rope_q = index.producer_of_kind(attn.inputs[0], OpKind::kRope, &rope_q_at);
      if (!rope_q) return false;
      Projection pq;
      if (!projection_of(index, *rope_q, rope_q_at, &pq) || (pq.norm != nullptr) != (pk.norm != nullptr)) return false;
      const Node* mq = pq.mm;
      if (mq->inputs[0] != x) return false;
      const int64_t hd = rope_k->head_dim;
      if (rope_q->head_dim != hd || hd <= 0 || rope_q->rope != rope_k->rope ||
          mk->weight->dim(0) != rope_k->heads * hd || mq->weight->dim(0) != rope_q->heads * hd ||
          !same_bias_presence(*mq, *mk, *mv))
        return false;
      if (!kernels::fused::packable(*mq->weight, *mk->weight) || !kernels::fused::packable(*mq->weight, *mv->weight))
        return false;
      if (graph.value(x).rows != RowSpace::kTokens) return false;
      Node fused{.kind = OpKind::kFusedMatMul, .inputs = {x}, .output = rope_q->output};
      fused.weight = graph.add_constant(kernels::fused::pack_qkv(*mq->weight, *mk->weight, *mv->weight, hd));
      if (mq->bias) fused.bias = graph.add_constant(kernels::fused::pack_qkv(*mq->bias, *mk->bias, *mv->bias, hd));
      fused.epilogue = kernels::fused::Epilogue::kRopeKvWrite;
      fused.layer = kw.layer;
      fused.rope = rope_k->rope;
      fused.heads = rope_q->heads;
      fused.head_dim = hd;
      fused.kv_heads = rope_k->heads;
      std::vector<int> replaced = {pq.mm_at, pk.mm_at, v_at, rope_q_at, rope_k_at, i};
      if (pq.norm) {
        fused.q_norm = pq.norm->weight;
        fused.k_norm = pk.norm->weight;
        fused.head_norm_eps = pq.norm->eps;
        replaced.push_back(pq.norm_at);
        replaced.push_back(pk.norm_at);
      }
      return replace_nodes(graph, index, replaced, std::move(fused));
    }
    return false;
  });
}

}  // namespace minfer::graph
