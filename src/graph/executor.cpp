#include "graph/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/error.h"
#include "kernels/dispatch.h"
#include "kernels/fused/fused_matmul.h"

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

void Executor::run_node(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers,
                        int64_t tokens, int64_t sampled) {
  auto in = [&](size_t i) { return buffer(node.inputs.at(i)); };
  auto width = [&](ValueId v) { return graph_.value(v).width; };
  auto rows_of = [&](ValueId v) { return graph_.value(v).rows == RowSpace::kTokens ? tokens : sampled; };
  switch (node.kind) {
    case OpKind::kEmbedding: run_embedding(node, step, tokens); return;
    case OpKind::kRmsNorm: {
      // A per-head norm is the row norm over rows of head_dim: the heads of a row are contiguous.
      const int64_t dim = node.head_dim > 0 ? node.head_dim : width(node.output);
      const int64_t rows = rows_of(node.output) * (width(node.output) / dim);
      const float* x = in(0);
      float* y = buffer(node.output);
      pool_.parallel_for(static_cast<size_t>(rows), 1, [&](size_t b, size_t e) {
        kernels::rmsnorm(x + static_cast<int64_t>(b) * dim, *node.weight, node.eps, y + static_cast<int64_t>(b) * dim,
                         static_cast<int64_t>(e - b), dim);
      });
      return;
    }
    case OpKind::kMatMul:
      if (matmul_observer_) matmul_observer_(node, in(0), rows_of(node.inputs[0]), width(node.inputs[0]));
      kernels::gemm(in(0), rows_of(node.inputs[0]), width(node.inputs[0]), *node.weight,
                    node.bias ? node.bias->as<float>() : nullptr, buffer(node.output), pool_);
      return;
    case OpKind::kRope: {
      const int64_t w = width(node.output);
      const float* x = in(0);
      float* y = buffer(node.output);
      const RopeTable& table = ropes_[static_cast<size_t>(node.rope)];
      const RopeAngles& angles = angles_[static_cast<size_t>(node.rope)];
      const int64_t half_rot = static_cast<int64_t>(table.inv_freq.size());
      pool_.parallel_for(static_cast<size_t>(tokens), 1, [&](size_t b, size_t e) {
        const auto first = static_cast<int64_t>(b);
        std::copy(x + first * w, x + static_cast<int64_t>(e) * w, y + first * w);
        kernels::rope(y + first * w, angles.cos.data() + first * half_rot, angles.sin.data() + first * half_rot,
                      static_cast<int64_t>(e - b), node.heads, node.head_dim, half_rot, table.style);
      });
      return;
    }
    case OpKind::kKvWrite:
      kernels::kv_write(kv_layers[static_cast<size_t>(node.layer)], in(0), in(1), step.slots_of(node.layer), tokens);
      return;
    case OpKind::kAttention:
      kernels::paged_attention(in(0), buffer(node.output), node.heads, kv_layers[static_cast<size_t>(node.layer)],
                               step.attention_of(node.layer),
                               {.scale = node.scale,
                                .window = node.window,
                                .softcap = node.softcap,
                                .sinks = node.sinks ? node.sinks->as<float>() : nullptr},
                               pool_);
      return;
    case OpKind::kAdd: {
      const float* a = in(0);
      const float* b = in(1);
      float* y = buffer(node.output);
      pool_.parallel_for(
          static_cast<size_t>(rows_of(node.output) * width(node.output)), 1024,
          [&](size_t lo, size_t hi) { kernels::add(a + lo, b + lo, y + lo, static_cast<int64_t>(hi - lo)); });
      return;
    }
    case OpKind::kSiluMul:
    case OpKind::kGeluTanhMul: {
      const float* g = in(0);
      const float* u = in(1);
      float* y = buffer(node.output);
      const auto gated = node.kind == OpKind::kSiluMul ? kernels::silu_mul : kernels::gelu_tanh_mul;
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output) * width(node.output)), 1024,
                         [&](size_t lo, size_t hi) { gated(g + lo, u + lo, y + lo, static_cast<int64_t>(hi - lo)); });
      return;
    }
    case OpKind::kSoftcap: {
      const float* x = in(0);
      float* y = buffer(node.output);
      const float cap = node.softcap;
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output) * width(node.output)), 4096,
                         [&](size_t lo, size_t hi) {
                           for (size_t i = lo; i < hi; ++i) y[i] = cap * std::tanh(x[i] / cap);
                         });
      return;
    }
    case OpKind::kAddRmsNorm: {
      const int64_t dim = width(node.output);
      const float* a = in(0);
      const float* b = in(1);
      float* sum = buffer(node.aux_output);
      float* y = buffer(node.output);
      const kernels::KernelTable& table = kernels::active_kernels();
      pool_.parallel_for(static_cast<size_t>(rows_of(node.output)), 1, [&](size_t lo, size_t hi) {
        const int64_t off = static_cast<int64_t>(lo) * dim;
        kernels::fused::add_rmsnorm(table, a + off, b + off, *node.weight, node.eps, sum + off, y + off,
                                    static_cast<int64_t>(hi - lo), dim);
      });
      return;
    }
    case OpKind::kFusedMatMul: run_fused_matmul(node, step, kv_layers, tokens, sampled); return;
    case OpKind::kMoe: {
      const kernels::MoeWeights moe{.router = node.weight,
                                    .experts = node.experts,
                                    .top_k = node.top_k,
                                    .renormalize = node.renormalize,
                                    .gate_up_block = node.block,
                                    .router_bias = node.bias,
                                    .expert_biases = node.expert_biases,
                                    .activation = node.moe_activation};
      if (node.expert_parallel)
        dist::moe_ffn_expert_parallel(in(0), rows_of(node.output), width(node.output), moe, node.expert_begin,
                                      buffer(node.output), pool_, moe_scratch_, ep_scratch_, *comm_);
      else
        kernels::moe_ffn(in(0), rows_of(node.output), width(node.output), moe, buffer(node.output), pool_,
                         moe_scratch_);
      return;
    }
    case OpKind::kAllReduce: {
      const int64_t n = rows_of(node.output) * width(node.output);
      float* y = buffer(node.output);
      std::copy(in(0), in(0) + n, y);
      comm_->all_reduce_sum(y, n);
      return;
    }
    case OpKind::kGatherVocab: run_gather_vocab(node, sampled); return;
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

void Executor::run_fused_matmul(const Node& node, const StepInputs& step,
                                std::span<const kernels::KvLayerView> kv_layers, int64_t tokens, int64_t sampled) {
  using kernels::fused::Epilogue;
  const int64_t k = graph_.value(node.inputs[0]).width;
  const int64_t n = node.weight->dim(0);
  const int64_t rows = graph_.value(node.inputs[0]).rows == RowSpace::kTokens ? tokens : sampled;
  const int64_t out_rows = node.gather ? sampled : rows;
  kernels::fused::FusedMatMul op;
  op.x = buffer(node.inputs[0]);
  op.rows = rows;
  op.k = k;
  if (node.gather) {
    op.gather_rows = step.sample_rows.data();
    op.gather_count = sampled;
  }
  op.norm_weight = node.norm_weight;
  op.eps = node.eps;
  if (node.gather || node.norm_weight) op.prologue_scratch = grow(prologue_scratch_, out_rows * k);
  op.weight = node.weight;
  op.bias = node.bias ? node.bias->as<float>() : nullptr;
  op.epilogue = node.epilogue;
  op.block = node.block;
  switch (node.epilogue) {
    case Epilogue::kNone: op.y = buffer(node.output); break;
    case Epilogue::kResidual:
      op.y = buffer(node.output);
      op.residual = buffer(node.inputs[1]);
      break;
    case Epilogue::kSiluMul:
    case Epilogue::kGeluTanhMul:
    case Epilogue::kRopeKvWrite:
      op.y = grow(gemm_scratch_, out_rows * n);
      op.out = buffer(node.output);
      break;
  }
  if (node.epilogue == Epilogue::kRopeKvWrite) {
    MINFER_CHECK(!node.gather, "a rope/kv-write epilogue runs on every token");
    const RopeTable& table = ropes_[static_cast<size_t>(node.rope)];
    op.rope_cos = angles_[static_cast<size_t>(node.rope)].cos.data();
    op.rope_sin = angles_[static_cast<size_t>(node.rope)].sin.data();
    op.slot_mapping = step.slots_of(node.layer);
    op.cache = kv_layers[static_cast<size_t>(node.layer)];
    op.heads = node.heads;
    op.head_dim = node.head_dim;
    op.half_rot = static_cast<int64_t>(table.inv_freq.size());
    op.style = table.style;
    op.q_norm = node.q_norm;
    op.k_norm = node.k_norm;
    op.head_norm_eps = node.head_norm_eps;
  }
  kernels::fused::fused_matmul(kernels::active_kernels(), op, pool_);
}

void Executor::run_embedding(const Node& node, const StepInputs& step, int64_t tokens) {
  float* y = buffer(node.output);
  const int64_t w = graph_.value(node.output).width;
  if (node.vocab_stride == 0) {
    kernels::embedding(step.tokens.data(), tokens, *node.weight, y);
  } else {
    // A vocab shard: its own tokens' rows, zeros for the others' (the all-reduce after this adds theirs).
    const int64_t rows = node.weight->dim(0);
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t local = step.tokens[static_cast<size_t>(t)] - static_cast<int32_t>(node.row_offset);
      if (local >= 0 && local < rows)
        kernels::embedding(&local, 1, *node.weight, y + t * w);
      else
        std::fill(y + t * w, y + (t + 1) * w, 0.0f);
    }
  }
  if (node.scale != 0.0f) {
    for (int64_t i = 0; i < tokens * w; ++i) y[i] *= node.scale;
  }
}

// Each rank's logits columns, padded to the common stride, gathered on rank 0 and laid side by side.
void Executor::run_gather_vocab(const Node& node, int64_t sampled) {
  const int64_t local = graph_.value(node.inputs[0]).width, stride = node.vocab_stride;
  const int64_t width = graph_.value(node.output).width, ranks = comm_->size();
  const float* x = buffer(node.inputs[0]);
  float* send = grow(gather_send_, sampled * stride);
  for (int64_t r = 0; r < sampled; ++r) {
    std::copy(x + r * local, x + (r + 1) * local, send + r * stride);
    std::fill(send + r * stride + local, send + (r + 1) * stride, 0.0f);
  }
  float* recv = grow(gather_recv_, ranks * sampled * stride);
  comm_->gather_to_root(send, sampled * stride * static_cast<int64_t>(sizeof(float)), recv);
  if (comm_->rank() != 0) return;
  float* y = buffer(node.output);
  for (int64_t p = 0; p < ranks; ++p) {
    const int64_t first = p * stride, cols = std::min(stride, width - first);
    for (int64_t r = 0; r < sampled && cols > 0; ++r) {
      const float* src = recv + (p * sampled + r) * stride;
      std::copy(src, src + cols, y + r * width + first);
    }
  }
}

float* Executor::grow(std::vector<float>& scratch, int64_t floats) {
  if (scratch.size() < static_cast<size_t>(floats)) scratch.resize(static_cast<size_t>(floats));
  return scratch.data();
}

}  // namespace minfer::graph
