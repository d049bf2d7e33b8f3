#include "graph/passes/graph_rewrite.h"

#include <algorithm>
#include <unordered_map>

#include "base/mapped_file.h"

namespace minfer::graph {

GraphIndex::GraphIndex(const Graph& graph)
    : graph_(graph), producer_(graph.values().size(), -1), readers_(graph.values().size()) {
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId in : nodes[i].inputs) readers_[static_cast<size_t>(in)].push_back(static_cast<int>(i));
    for (ValueId out : {nodes[i].output, nodes[i].aux_output})
      if (out != kNoValue) producer_[static_cast<size_t>(out)] = static_cast<int>(i);
  }
}

bool GraphIndex::only_reader(ValueId v, int node) const {
  const auto& r = readers(v);
  return v != graph_.output() && !r.empty() && std::all_of(r.begin(), r.end(), [&](int i) { return i == node; });
}

const Node* GraphIndex::producer_of_kind(ValueId v, OpKind kind, int* index) const {
  const int p = producer(v);
  if (p < 0 || graph_.nodes()[static_cast<size_t>(p)].kind != kind) return nullptr;
  if (index) *index = p;
  return &graph_.nodes()[static_cast<size_t>(p)];
}

bool replace_nodes(Graph& graph, const GraphIndex& index, std::vector<int> group, Node fused) {
  std::sort(group.begin(), group.end());
  group.erase(std::unique(group.begin(), group.end()), group.end());
  const int at = group.back();
  auto in_group = [&](int i) { return std::binary_search(group.begin(), group.end(), i); };
  for (ValueId out : {fused.output, fused.aux_output}) {
    if (out == kNoValue) continue;
    for (int r : index.readers(out))
      if (!in_group(r) && r <= at) return false;
  }
  for (ValueId in : fused.inputs) {
    const int p = index.producer(in);
    if (p >= 0 && !in_group(p) && p >= at) return false;
  }
  std::vector<Node>& nodes = graph.mutable_nodes();
  std::vector<Node> out;
  out.reserve(nodes.size() - group.size() + 1);
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (i == at) {
      out.push_back(std::move(fused));
    } else if (!in_group(i)) {
      out.push_back(std::move(nodes[static_cast<size_t>(i)]));
    }
  }
  nodes = std::move(out);
  return true;
}

int relayout_weights(Graph& graph, bool (*wants)(const Tensor&), Tensor (*convert)(const Tensor&, ThreadPool*),
                     ThreadPool* pool) {
  std::unordered_map<const Tensor*, const Tensor*> converted;
  int rewrites = 0;
  auto relayout = [&](const Tensor*& w) {
    if (w == nullptr || w->rank() != 2 || !wants(*w)) return;
    auto [it, fresh] = converted.try_emplace(w, nullptr);
    if (fresh) {
      if (graph.owns_constant(w)) {
        graph.replace_constant(w, convert(*w, pool));
        it->second = w;
      } else {
        it->second = graph.add_constant(convert(*w, pool));
        // The checkpoint's copy stays mapped (the embedding may look rows up in it) but need not stay resident.
        MappedFile::release_pages(w->data, w->nbytes());
      }
    }
    w = it->second;
    ++rewrites;
  };
  for (Node& n : graph.mutable_nodes()) {
    if (n.kind == OpKind::kMatMul || n.kind == OpKind::kFusedMatMul) relayout(n.weight);
    if (n.kind == OpKind::kMoe)  // the experts' GEMMs read the same layouts (the router is a plain GEMM too)
      for (const Tensor*& w : n.experts) relayout(w);
  }
  return rewrites;
}

}  // namespace minfer::graph
