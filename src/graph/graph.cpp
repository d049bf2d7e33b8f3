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
    case OpKind::kGeluTanhMul: return "gelu_tanh_mul";
    case OpKind::kSoftcap: return "softcap";
    case OpKind::kMoe: return "moe";
    case OpKind::kGatherRows: return "gather_rows";
    case OpKind::kSigmoidMul: return "sigmoid_mul";
    case OpKind::kMul: return "mul";
    case OpKind::kRelu2: return "relu2";
    case OpKind::kInput: return "input";
    case OpKind::kLayerNorm: return "layernorm";
    case OpKind::kGeluTanh: return "gelu_tanh";
    case OpKind::kAvgPool: return "avg_pool";
    case OpKind::kEncoderAttention: return "encoder_attention";
    case OpKind::kConv1d: return "conv1d";
    case OpKind::kDeltaNet: return "delta_net";
    case OpKind::kSsmScan: return "ssm_scan";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kGatherVocab: return "gather_vocab";
    case OpKind::kAddRmsNorm: return "add_rmsnorm";
    case OpKind::kFusedMatMul: return "fused_matmul";
  }
  return "?";
}

std::string node_label(const Node& node) {
  if (node.kind == OpKind::kRmsNorm && node.inputs.size() == 2)
    return node.gate_first ? "fused_rmsnorm[silu_mul+rmsnorm]" : "fused_rmsnorm[rmsnorm+silu_mul]";
  if (node.kind == OpKind::kConv1d && node.inputs.size() == 3) return "fused_conv1d[mul+conv1d+mul]";
  if (node.kind != OpKind::kFusedMatMul) return op_name(node.kind);
  std::string parts;
  if (node.gather) parts += "gather+";
  if (node.norm_weight) parts += "rmsnorm+";
  parts += node.bias ? "gemm+bias" : "gemm";
  switch (node.epilogue) {
    case kernels::fused::Epilogue::kNone: break;
    case kernels::fused::Epilogue::kResidual: parts += "+residual"; break;
    case kernels::fused::Epilogue::kSiluMul: parts += "+silu_mul"; break;
    case kernels::fused::Epilogue::kGeluTanhMul: parts += "+gelu_tanh_mul"; break;
    case kernels::fused::Epilogue::kRopeKvWrite:
      parts += node.q_norm ? "+qk_norm+rope+kv_write" : "+rope+kv_write";
      break;
  }
  return fmt::format("fused_matmul[{}]", parts);
}

ValueId Graph::add_value(std::string name, int64_t width, RowSpace rows) {
  values_.push_back(Value{std::move(name), width, rows});
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.back().output;
}

void Graph::verify_fused_matmul(size_t i, const Node& n) const {
  using kernels::fused::Epilogue;
  MINFER_CHECK(n.weight != nullptr && n.weight->rank() == 2 && n.output != kNoValue && !n.inputs.empty(),
               "fused matmul node {} needs a 2-D weight, an input and an output", i);
  const int64_t k = value(n.inputs[0]).width;
  const int64_t cols = n.weight->dim(0);
  MINFER_CHECK(k == n.weight->dim(1), "fused matmul node {}: input width {} vs weight {}", i, k,
               n.weight->shape_string());
  MINFER_CHECK(!n.norm_weight || n.norm_weight->numel() == k, "fused matmul node {}: norm weight for width {}", i, k);
  MINFER_CHECK(n.gather == (value(n.output).rows == RowSpace::kSampled && value(n.inputs[0]).rows == RowSpace::kTokens),
               "fused matmul node {}: a gather prologue maps token rows to sampled rows", i);
  int64_t want = cols;
  if (n.epilogue == Epilogue::kSiluMul || n.epilogue == Epilogue::kGeluTanhMul) want = cols / 2;
  if (n.epilogue == Epilogue::kRopeKvWrite) {
    want = n.heads * n.head_dim;
    MINFER_CHECK(cols == (n.heads + 2 * n.kv_heads) * n.head_dim && n.layer >= 0,
                 "fused matmul node {}: {} columns are not q, k, v of {} + 2 x {} heads", i, cols, n.heads, n.kv_heads);
  }
  MINFER_CHECK(value(n.output).width == want, "fused matmul node {}: output width {} (want {})", i,
               value(n.output).width, want);
  if (n.epilogue == Epilogue::kResidual)
    MINFER_CHECK(n.inputs.size() == 2 && value(n.inputs[1]).width == want, "fused matmul node {}: residual width", i);
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
    for (ValueId out : {n.output, n.aux_output}) {
      if (out == kNoValue) continue;
      MINFER_CHECK(out >= 0 && static_cast<size_t>(out) < values_.size(), "node {} writes unknown value", i);
      MINFER_CHECK(!produced[static_cast<size_t>(out)], "value '{}' produced twice",
                   values_[static_cast<size_t>(out)].name);
      produced[static_cast<size_t>(out)] = true;
    }
    if (n.kind == OpKind::kFusedMatMul) verify_fused_matmul(i, n);
    if (n.kind == OpKind::kMoe) {
      const int64_t width = value(n.inputs.at(0)).width;
      MINFER_CHECK(n.weight && n.weight->rank() == 2 && n.weight->dim(1) == width && value(n.output).width == width,
                   "moe node {}: router and widths", i);
      const int64_t experts = static_cast<int64_t>(n.experts.size()) / (n.block > 0 ? 2 : 3);
      MINFER_CHECK((n.expert_parallel ? n.expert_begin + experts <= n.weight->dim(0) : experts == n.weight->dim(0)) &&
                       n.top_k >= 1 && n.top_k <= n.weight->dim(0),
                   "moe node {}: {} expert matrices, top_k {}, for {} experts", i, n.experts.size(), n.top_k,
                   n.weight->dim(0));
    }
    if (n.kind == OpKind::kConv1d)
      MINFER_CHECK(n.weight && n.weight->rank() == 2 && n.weight->dim(0) == value(n.inputs.at(0)).width &&
                       value(n.output).width == n.weight->dim(0) && n.layer >= 0 &&
                       (n.inputs.size() == 1 || n.inputs.size() == 3),
                   "conv1d node {}: weight {} for {} channels", i, n.weight ? n.weight->shape_string() : "none",
                   value(n.inputs.at(0)).width);
    // Fused gates (gated norm, gated conv) are as wide as the node's output.
    const bool gated = (n.kind == OpKind::kRmsNorm && n.inputs.size() >= 2) || (n.kind == OpKind::kConv1d);
    for (size_t g = 1; gated && g < n.inputs.size(); ++g)
      MINFER_CHECK(value(n.inputs[g]).width == value(n.output).width, "{} node {}: gate width {} for output {}",
                   op_name(n.kind), i, value(n.inputs[g]).width, value(n.output).width);
    if (n.kind == OpKind::kDeltaNet)
      MINFER_CHECK(n.inputs.size() == 3 && n.kv_heads > 0 && n.heads % n.kv_heads == 0 &&
                       value(n.inputs[0]).width == 2 * n.kv_heads * n.head_dim + n.heads * n.value_dim &&
                       value(n.inputs[1]).width == n.heads && value(n.inputs[2]).width == n.heads &&
                       value(n.output).width == n.heads * n.value_dim && n.weight && n.bias && n.layer >= 0,
                   "delta_net node {}: widths", i);
    if (n.kind == OpKind::kSsmScan)
      MINFER_CHECK(n.inputs.size() == 2 && n.kv_heads > 0 && n.heads % n.kv_heads == 0 &&
                       value(n.inputs[0]).width == n.heads * n.head_dim + 2 * n.kv_heads * n.value_dim &&
                       value(n.inputs[1]).width == n.heads && value(n.output).width == n.heads * n.head_dim &&
                       n.weight && n.bias && n.skip && n.layer >= 0,
                   "ssm_scan node {}: widths", i);
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
    s += fmt::format("{:4} {:<12}", i, node_label(n));
    for (ValueId in : n.inputs) s += " " + values_[static_cast<size_t>(in)].name;
    if (n.output != kNoValue) s += " -> " + values_[static_cast<size_t>(n.output)].name;
    if (n.aux_output != kNoValue) s += ", " + values_[static_cast<size_t>(n.aux_output)].name;
    s += "\n";
  }
  return s;
}

}  // namespace minfer::graph
