// What the fusion passes share: who produces and who reads each value, and replacing a group of nodes by
// one fused node.
#pragma once

#include <cstddef>
#include <vector>

#include "graph/graph.h"

namespace minfer::graph {

class GraphIndex {
 public:
  explicit GraphIndex(const Graph& graph);
  // The node producing `v`, or -1 for none.
  int producer(ValueId v) const { return producer_[static_cast<size_t>(v)]; }
  const std::vector<int>& readers(ValueId v) const { return readers_[static_cast<size_t>(v)]; }
  // True when `v` is read by `node` only (and is not the graph output).
  bool only_reader(ValueId v, int node) const;
  // The node producing `v` when it has this kind, else null.
  const Node* producer_of_kind(ValueId v, OpKind kind, int* index = nullptr) const;

 private:
  const Graph& graph_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> readers_;
};

// Replaces nodes `group` (indices) with `fused`, placed where the last of them was. Returns false (graph
// unchanged) when that order would be invalid: a reader of a fused output, or a producer of a fused input,
// outside the group on the wrong side of that position.
bool replace_nodes(Graph& graph, const GraphIndex& index, std::vector<int> group, Node fused);

// Runs `try_at(node index, index)` from the first node on; after each successful rewrite the index is rebuilt
// and the scan restarts. Returns the number of rewrites.
template <typename TryAt>
int rewrite_all(Graph& graph, TryAt try_at) {
  int rewrites = 0;
  for (bool changed = true; changed;) {
    changed = false;
    const GraphIndex index(graph);
    for (int i = 0; i < static_cast<int>(graph.nodes().size()); ++i) {
      if (try_at(i, index)) {
        ++rewrites;
        changed = true;
        break;
      }
    }
  }
  return rewrites;
}

// What the layout passes share: points every matmul whose weight `wants` accepts at convert(weight). A weight the
// graph packed itself (fused) is re-laid in place, keeping one copy; a checkpoint weight gets a copy beside it (the
// embedding may read the original); a weight two nodes share is converted once. `convert` gets the pool to split
// its copy across (null: serial). Returns the nodes rewritten.
int relayout_weights(Graph& graph, bool (*wants)(const Tensor&), Tensor (*convert)(const Tensor&, ThreadPool*),
                     ThreadPool* pool);

}  // namespace minfer::graph
