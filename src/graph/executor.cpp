#include "graph/executor.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace minfer::graph {

Executor::Executor(const Graph& graph, ThreadPool& pool, RopeTables ropes, dist::Communicator* comm)
    : graph_(graph), pool_(pool), ropes_(std::move(ropes)), comm_(comm ? comm : &dist::Communicator::world()) {
  angles_.resize(ropes_.size());
  graph_.verify();
  for (const Node& n : graph_.nodes()) {
    const bool rotates = n.kind == OpKind::kRope ||
                         (n.kind == OpKind::kFusedMatMul && n.epilogue == kernels::fused::Epilogue::kRopeKvWrite);
    MINFER_CHECK(!rotates || (n.rope >= 0 && static_cast<size_t>(n.rope) < ropes_.size()),
                 "executor: a rope node reads table {} of {}", n.rope, ropes_.size());
  }
  plan_buffers();
}

void Executor::set_profiling(bool on) {
  profiling_ = on;
  node_seconds_.assign(graph_.nodes().size(), 0.0);
}

// Greedy interval allocation: walk the nodes in order, free a value's slot after its last reader, give each
// new value a free slot (or a new one). The graph output is never freed.
void Executor::plan_buffers() {
  const auto& nodes = graph_.nodes();
  const size_t num_values = graph_.values().size();
  std::vector<int64_t> last_use(num_values, -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId in : nodes[i].inputs) last_use[static_cast<size_t>(in)] = static_cast<int64_t>(i);
  last_use[static_cast<size_t>(graph_.output())] = static_cast<int64_t>(nodes.size());

  slot_of_.assign(num_values, -1);
  std::vector<int32_t> free_slots;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    for (ValueId out : {n.output, n.aux_output}) {
      if (out == kNoValue) continue;
      int32_t slot;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
      } else {
        slot = static_cast<int32_t>(slot_width_.size());
        slot_width_.push_back(SlotWidth{});
      }
      slot_of_[static_cast<size_t>(out)] = slot;
      const Value& v = graph_.value(out);
      int64_t& widest = v.rows == RowSpace::kTokens ? slot_width_[static_cast<size_t>(slot)].per_token
                                                    : slot_width_[static_cast<size_t>(slot)].per_sampled;
      widest = std::max(widest, v.width);
    }
    // Release inputs whose last reader is this node (after the output took its slot: no aliasing).
    for (ValueId in : n.inputs) {
      if (last_use[static_cast<size_t>(in)] == static_cast<int64_t>(i)) {
        const int32_t s = slot_of_[static_cast<size_t>(in)];
        if (std::find(free_slots.begin(), free_slots.end(), s) == free_slots.end()) free_slots.push_back(s);
      }
    }
  }
  slots_.resize(slot_width_.size());
}

const float* Executor::run(const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers) {
  const int64_t tokens = static_cast<int64_t>(step.tokens.size());
  const int64_t sampled = static_cast<int64_t>(step.sample_rows.size());
  MINFER_CHECK(tokens > 0, "empty step");
  MINFER_CHECK(step.positions.size() == step.tokens.size() && step.slot_mapping.size() == step.tokens.size() &&
                   (step.local_layers.empty() || step.local_slot_mapping.size() == step.tokens.size()),
               "step arrays disagree in length");
  for (size_t s = 0; s < slots_.size(); ++s) {
    // Rows of a sampled-row value (the logits, vocab wide) number `sampled`, not `tokens`: a 512-token prefill
    // chunk that samples one row needs one row of logits.
    const size_t need =
        static_cast<size_t>(std::max(tokens * slot_width_[s].per_token, sampled * slot_width_[s].per_sampled));
    if (slots_[s].size() < need) slots_[s].resize(need);
  }
  // The RoPE angles of the step's rows, once for every rope node and fused QKV epilogue of every layer.
  for (size_t r = 0; r < ropes_.size(); ++r) {
    const int64_t half_rot = static_cast<int64_t>(ropes_[r].inv_freq.size());
    float* cos = grow(angles_[r].cos, tokens * half_rot);
    float* sin = grow(angles_[r].sin, tokens * half_rot);
    kernels::rope_angles(step.positions.data(), tokens, ropes_[r].inv_freq.data(), half_rot, cos, sin);
    if (const float f = ropes_[r].attention_factor; f != 1.0f) {
      for (int64_t i = 0; i < tokens * half_rot; ++i) cos[i] *= f, sin[i] *= f;
    }
  }
  dispatches_last_step_ = 0;
  const std::vector<Node>& nodes = graph_.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    // A step that samples nothing (a middle prefill chunk) skips the final norm and lm_head.
    if (sampled == 0 && node.output != kNoValue && graph_.value(node.output).rows == RowSpace::kSampled) continue;
    if (profiling_) {
      const auto t0 = std::chrono::steady_clock::now();
      run_node(node, step, kv_layers, tokens, sampled);
      node_seconds_[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      run_node(node, step, kv_layers, tokens, sampled);
    }
    ++dispatches_last_step_;
  }
  dispatches_total_ += dispatches_last_step_;
  return sampled == 0 ? nullptr : buffer(graph_.output());
}

float* Executor::grow(std::vector<float>& scratch, int64_t floats) {
  if (scratch.size() < static_cast<size_t>(floats)) scratch.resize(static_cast<size_t>(floats));
  return scratch.data();
}

}  // namespace minfer::graph
