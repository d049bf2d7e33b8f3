// The recurrent mixers' nodes (kernels/mixers.h): each sequence of the step reads and leaves its state slot of the
// node's layer.
#include "base/error.h"
#include "graph/executor.h"
#include "kernels/dispatch.h"

namespace minfer::graph {
namespace {

const kernels::StateLayerView& state_of(const Node& node, const StepInputs& step) {
  MINFER_CHECK(
      static_cast<size_t>(node.layer) < step.states.size() && step.states[static_cast<size_t>(node.layer)].base,
      "{} node of layer {}: the step has no recurrent state for it", op_name(node.kind), node.layer);
  MINFER_CHECK(static_cast<int64_t>(step.state_slots.size()) == step.attention.num_seqs,
               "{} state slots for {} sequences", step.state_slots.size(), step.attention.num_seqs);
  return step.states[static_cast<size_t>(node.layer)];
}

}  // namespace

void Executor::run_conv1d(const Node& node, const StepInputs& step) {
  const int64_t channels = graph_.value(node.output).width;
  kernels::ConvGates gates;  // LFM2's, fused in by the conv-gates pass
  if (node.inputs.size() == 3) gates = {input(node, 1), input(node, 2)};
  kernels::causal_conv1d(kernels::active_mixers(), input(node, 0), channels, buffer(node.output), channels,
                         node.weight->as<float>(), node.bias ? node.bias->as<float>() : nullptr, node.weight->dim(1),
                         node.silu, state_of(node, step), step.recurrent(), pool_, gates);
}

void Executor::run_delta_net(const Node& node, const StepInputs& step) {
  const kernels::DeltaNetParams params{.k_heads = node.kv_heads,
                                       .v_heads = node.heads,
                                       .k_dim = node.head_dim,
                                       .v_dim = node.value_dim,
                                       .tiled_heads = node.tiled_heads,
                                       .a_coef = node.weight->as<float>(),
                                       .dt_bias = node.bias->as<float>()};
  kernels::gated_delta_net(kernels::active_mixers(), input(node, 0), input(node, 1), input(node, 2),
                           buffer(node.output), params, state_of(node, step), step.recurrent(), pool_);
}

void Executor::run_ssm_scan(const Node& node, const StepInputs& step) {
  const kernels::SsmParams params{.heads = node.heads,
                                  .head_dim = node.head_dim,
                                  .groups = node.kv_heads,
                                  .state_size = node.value_dim,
                                  .a = node.weight->as<float>(),
                                  .dt_bias = node.bias->as<float>(),
                                  .d = node.skip->as<float>()};
  kernels::ssm_scan(kernels::active_mixers(), input(node, 0), input(node, 1), buffer(node.output), params,
                    state_of(node, step), step.recurrent(), pool_);
}

}  // namespace minfer::graph
