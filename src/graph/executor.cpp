#include "graph/executor.h"

#include <algorithm>

#include "base/error.h"

namespace minfer::graph {

Executor::Executor(const Graph& graph, ThreadPool& pool, RopeTable rope)
    : graph_(graph), pool_(pool), rope_(std::move(rope)) {
  graph_.verify();
  plan_buffers();
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
    if (n.output != kNoValue) {
      int32_t slot;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
      } else {
        slot = static_cast<int32_t>(slot_width_.size());
        slot_width_.push_back(0);
      }
      slot_of_[static_cast<size_t>(n.output)] = slot;
      slot_width_[static_cast<size_t>(slot)] =
          std::max(slot_width_[static_cast<size_t>(slot)], graph_.value(n.output).width);
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
  MINFER_CHECK(step.positions.size() == step.tokens.size() && step.slot_mapping.size() == step.tokens.size(),
               "step arrays disagree in length");
  for (size_t s = 0; s < slots_.size(); ++s) {
    const size_t need = static_cast<size_t>(std::max(tokens, sampled) * slot_width_[s]);
    if (slots_[s].size() < need) slots_[s].resize(need);
  }
  dispatches_last_step_ = 0;
  for (const Node& node : graph_.nodes()) {
    // A step that samples nothing (a middle prefill chunk) skips the final norm and lm_head.
    if (sampled == 0 && node.output != kNoValue && graph_.value(node.output).rows == RowSpace::kSampled) continue;
    run_node(node, step, kv_layers, tokens, sampled);
    ++dispatches_last_step_;
  }
  dispatches_total_ += dispatches_last_step_;
  return sampled == 0 ? nullptr : buffer(graph_.output());
}

void Executor::run_node(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers,
                        int64_t tokens, int64_t sampled) {
  auto in = [&](size_t i) { return buffer(node.inputs.at(i)); };
  auto width = [&](ValueId v) { return graph_.value(v).width; };
  auto rows_of = [&](ValueId v) { return graph_.value(v).rows == RowSpace::kTokens ? tokens : sampled; };
  switch (node.kind) {
    case OpKind::kEmbedding:
      kernels::embedding(step.tokens.data(), tokens, *node.weight, buffer(node.output));
      return;
    case OpKind::kRmsNorm: {
      const int64_t dim = width(node.output);
      const float* x = in(0);
      float* y = buffer(node.output);
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output)), 1, [&](size_t b, size_t e) {
        kernels::rmsnorm(x + static_cast<int64_t>(b) * dim, *node.weight, node.eps, y + static_cast<int64_t>(b) * dim,
                         static_cast<int64_t>(e - b), dim);
      });
      return;
    }
    case OpKind::kMatMul:
      kernels::gemm(in(0), rows_of(node.inputs[0]), width(node.inputs[0]), *node.weight,
                    node.bias ? node.bias->as<float>() : nullptr, buffer(node.output), pool_);
      return;
    case OpKind::kRope: {
      const int64_t w = width(node.output);
      const float* x = in(0);
      float* y = buffer(node.output);
      const int64_t half_rot = static_cast<int64_t>(rope_.inv_freq.size());
      pool_.parallel_for(static_cast<size_t>(tokens), 1, [&](size_t b, size_t e) {
        std::copy(x + static_cast<int64_t>(b) * w, x + static_cast<int64_t>(e) * w, y + static_cast<int64_t>(b) * w);
        kernels::rope(y + static_cast<int64_t>(b) * w, step.positions.data() + b, static_cast<int64_t>(e - b),
                      node.heads, node.head_dim, rope_.inv_freq.data(), half_rot, rope_.style);
      });
      return;
    }
    case OpKind::kKvWrite:
      kernels::kv_write(kv_layers[static_cast<size_t>(node.layer)], in(0), in(1), step.slot_mapping.data(), tokens);
      return;
    case OpKind::kAttention:
      kernels::paged_attention(in(0), buffer(node.output), node.heads, kv_layers[static_cast<size_t>(node.layer)],
                               step.attention, node.scale, pool_);
      return;
    case OpKind::kAdd: {
      const float* a = in(0);
      const float* b = in(1);
      float* y = buffer(node.output);
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output) * width(node.output)), 1024,
                         [&](size_t lo, size_t hi) {
                           kernels::add(a + lo, b + lo, y + lo, static_cast<int64_t>(hi - lo));
                         });
      return;
    }
    case OpKind::kSiluMul: {
      const float* g = in(0);
      const float* u = in(1);
      float* y = buffer(node.output);
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output) * width(node.output)), 1024,
                         [&](size_t lo, size_t hi) {
                           kernels::silu_mul(g + lo, u + lo, y + lo, static_cast<int64_t>(hi - lo));
                         });
      return;
    }
    case OpKind::kGatherRows: {
      const int64_t w = width(node.output);
      const float* x = in(0);
      float* y = buffer(node.output);
      for (int64_t r = 0; r < sampled; ++r) {
        const int64_t src = step.sample_rows[static_cast<size_t>(r)];
        MINFER_CHECK(src >= 0 && src < tokens, "sample row {} outside the step's {} tokens", src, tokens);
        std::copy(x + src * w, x + (src + 1) * w, y + r * w);
      }
      return;
    }
  }
  fail("executor: unknown op kind {}", static_cast<int>(node.kind));
}

}  // namespace minfer::graph
