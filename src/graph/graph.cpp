#include "graph/graph.h"

#include <fmt/format.h>

#include "base/error.h"

namespace minfer::graph {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kRmsNorm: return "rmsnorm";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kRope: return "rope";
    case OpKind::kKvWrite: return "kv_write";
    case OpKind::kAttention: return "attention";
    case OpKind::kAdd: return "add";
    case OpKind::kSiluMul: return "silu_mul";
    case OpKind::kGatherRows: return "gather_rows";
  }
  return "?";
}

ValueId Graph::add_value(std::string name, int64_t width, RowSpace rows) {
  values_.push_back(Value{std::move(name), width, rows});
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.back().output;
}

void Graph::verify() const {
  std::vector<bool> produced(values_.size(), false);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    for (ValueId in : n.inputs) {
      MINFER_CHECK(in >= 0 && static_cast<size_t>(in) < values_.size(), "node {} ({}) reads unknown value {}", i,
                   op_name(n.kind), in);
      MINFER_CHECK(produced[static_cast<size_t>(in)], "node {} ({}) reads value '{}' before it is produced", i,
                   op_name(n.kind), values_[static_cast<size_t>(in)].name);
    }
    if (n.output != kNoValue) {
      MINFER_CHECK(static_cast<size_t>(n.output) < values_.size(), "node {} writes unknown value", i);
      MINFER_CHECK(!produced[static_cast<size_t>(n.output)], "value '{}' produced twice",
                   values_[static_cast<size_t>(n.output)].name);
      produced[static_cast<size_t>(n.output)] = true;
    }
    if (n.kind == OpKind::kMatMul) {
      MINFER_CHECK(n.weight != nullptr && n.weight->rank() == 2, "matmul node {} needs a 2-D weight", i);
      MINFER_CHECK(value(n.inputs.at(0)).width == n.weight->dim(1), "matmul node {}: input width {} vs weight {}", i,
                   value(n.inputs.at(0)).width, n.weight->shape_string());
      MINFER_CHECK(value(n.output).width == n.weight->dim(0), "matmul node {}: output width mismatch", i);
    }
  }
  MINFER_CHECK(output_ != kNoValue && produced[static_cast<size_t>(output_)], "graph output is not produced");
}

std::string Graph::to_string() const {
  std::string s;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    s += fmt::format("{:4} {:<12}", i, op_name(n.kind));
    for (ValueId in : n.inputs) s += " " + values_[static_cast<size_t>(in)].name;
    if (n.output != kNoValue) s += " -> " + values_[static_cast<size_t>(n.output)].name;
    s += "\n";
  }
  return s;
}

}  // namespace minfer::graph
