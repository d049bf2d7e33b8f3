// What each kind of node computes (Executor::run_node and a helper per kind); the buffers, the step loop and the
// RoPE angles they read are executor.cpp's.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "graph/executor.h"
#include "kernels/dispatch.h"
#include "kernels/fused/fused_matmul.h"

namespace minfer::graph {

// One dispatch: the kernel of the node's kind over the step's rows (a value has a row per token, or per sampled
// row).
void Executor::run_node(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers,
                        int64_t tokens, int64_t sampled) {
  auto rows_of = [&](ValueId v) { return graph_.value(v).rows == RowSpace::kTokens ? tokens : sampled; };
  switch (node.kind) {
    case OpKind::kEmbedding: run_embedding(node, step, tokens); return;
    case OpKind::kRmsNorm: run_rmsnorm(node, rows_of(node.output)); return;
    case OpKind::kMatMul: run_matmul(node, rows_of(node.inputs[0])); return;
    case OpKind::kRope: run_rope(node, tokens); return;
    case OpKind::kKvWrite:
      kernels::kv_write(kv_layers[static_cast<size_t>(node.layer)], input(node, 0), input(node, 1),
                        step.slots_of(node.layer), tokens);
      return;
    case OpKind::kAttention: run_attention(node, step, kv_layers); return;
    case OpKind::kAdd:
    case OpKind::kSiluMul:
    case OpKind::kGeluTanhMul:
    case OpKind::kRelu2:
    case OpKind::kSoftcap: run_elementwise(node, rows_of(node.output)); return;
    case OpKind::kAddRmsNorm: run_add_rmsnorm(node, rows_of(node.output)); return;
    case OpKind::kFusedMatMul: run_fused_matmul(node, step, kv_layers, tokens, sampled); return;
    case OpKind::kMoe: run_moe(node, rows_of(node.output)); return;
    case OpKind::kAllReduce: run_all_reduce(node, rows_of(node.output)); return;
    case OpKind::kGatherVocab: run_gather_vocab(node, sampled); return;
    case OpKind::kGatherRows: run_gather_rows(node, step, tokens, sampled); return;
    case OpKind::kSigmoidMul:
    case OpKind::kMul: run_elementwise(node, rows_of(node.output)); return;
    case OpKind::kInput: run_input(node, step, tokens); return;
    case OpKind::kLayerNorm: run_layernorm(node, rows_of(node.output)); return;
    case OpKind::kGeluTanh: run_elementwise(node, rows_of(node.output)); return;
    case OpKind::kAvgPool: run_avg_pool(node, step, sampled); return;
    case OpKind::kEncoderAttention: run_encoder_attention(node, step); return;
    case OpKind::kConv1d: run_conv1d(node, step); return;
    case OpKind::kDeltaNet: run_delta_net(node, step); return;
    case OpKind::kSsmScan: run_ssm_scan(node, step); return;
  }
  fail("executor: unknown op kind {}", static_cast<int>(node.kind));
}

void Executor::run_rmsnorm(const Node& node, int64_t rows) {
  // A per-head norm is the row norm over rows of head_dim: the heads of a row are contiguous.
  const int64_t width = graph_.value(node.output).width;
  const int64_t dim = node.head_dim > 0 ? node.head_dim : width;
  const float* x = input(node, 0);
  const float* gate = node.inputs.size() > 1 ? input(node, 1) : nullptr;  // fused gated norm (gated-norm pass)
  float* y = buffer(node.output);
  // Groups with a weight of their own each (Mamba2's gated norm: one weight over the row, normalised per group).
  const bool group_weights = node.head_dim > 0 && node.weight->numel() == width && width > dim;
  const int64_t groups = width / dim;
  // Units [b, e) of dim floats each: the same leaves, in the same order, as the unfused rmsnorm and silu_mul nodes.
  auto norm_units = [&](int64_t b, int64_t e) {
    const int64_t n = (e - b) * dim;
    const float* in = x + b * dim;
    float* out = y + b * dim;
    if (gate && node.gate_first) {
      kernels::silu_mul(gate + b * dim, in, out, n);
      in = out;  // the leaf reads a row completely before writing it
    }
    if (group_weights) {
      for (int64_t u = b; u < e; ++u) {
        const Tensor w = vector_slice(*node.weight, (u % groups) * dim, (u % groups + 1) * dim);
        kernels::rmsnorm(in + (u - b) * dim, w, node.eps, out + (u - b) * dim, 1, dim);
      }
    } else {
      kernels::rmsnorm(in, *node.weight, node.eps, out, e - b, dim);
    }
    if (gate && !node.gate_first) kernels::silu_mul(gate + b * dim, out, out, n);
  };
  pool_.parallel_for(static_cast<size_t>(rows * groups), 1,
                     [&](size_t b, size_t e) { norm_units(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
}

void Executor::run_matmul(const Node& node, int64_t rows) {
  const int64_t width = graph_.value(node.inputs[0]).width;
  if (matmul_observer_) matmul_observer_(node, input(node, 0), rows, width);
  kernels::gemm(input(node, 0), rows, width, *node.weight, node.bias ? node.bias->as<float>() : nullptr,
                buffer(node.output), pool_);
}

void Executor::run_rope(const Node& node, int64_t tokens) {
  const int64_t w = graph_.value(node.output).width;
  const float* x = input(node, 0);
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
}

void Executor::run_attention(const Node& node, const StepInputs& step,
                             std::span<const kernels::KvLayerView> kv_layers) {
  kernels::paged_attention(input(node, 0), buffer(node.output), node.heads, kv_layers[static_cast<size_t>(node.layer)],
                           step.attention_of(node.layer),
                           {.scale = node.scale,
                            .window = node.window,
                            .softcap = node.softcap,
                            .sinks = node.sinks ? node.sinks->as<float>() : nullptr},
                           pool_);
}

// Every element of the output on its own: a + b, the gated activations gate(g) * u, and cap * tanh(x / cap).
void Executor::run_elementwise(const Node& node, int64_t rows) {
  const size_t n = static_cast<size_t>(rows * graph_.value(node.output).width);
  const float* x = input(node, 0);
  float* y = buffer(node.output);
  if (node.kind == OpKind::kSoftcap) {
    const float cap = node.softcap;
    pool_.parallel_for(n, 4096, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) y[i] = cap * std::tanh(x[i] / cap);
    });
    return;
  }
  if (node.kind == OpKind::kRelu2 || node.kind == OpKind::kGeluTanh) {
    const auto op = node.kind == OpKind::kRelu2 ? kernels::relu2 : kernels::gelu_tanh;
    pool_.parallel_for(n, 4096, [&](size_t lo, size_t hi) { op(x + lo, y + lo, static_cast<int64_t>(hi - lo)); });
    return;
  }
  const float* x2 = input(node, 1);
  if (node.kind == OpKind::kSigmoidMul && graph_.value(node.inputs[0]).width == 1) {
    run_row_gate(node, rows);
    return;
  }
  const auto op = node.kind == OpKind::kAdd          ? kernels::add
                  : node.kind == OpKind::kSiluMul    ? kernels::silu_mul
                  : node.kind == OpKind::kSigmoidMul ? kernels::sigmoid_mul
                  : node.kind == OpKind::kMul        ? kernels::mul
                                                     : kernels::gelu_tanh_mul;
  pool_.parallel_for(n, 1024,
                     [&](size_t lo, size_t hi) { op(x + lo, x2 + lo, y + lo, static_cast<int64_t>(hi - lo)); });
}

// out[t, :] = in1[t, :] * sigmoid(in0[t]): a gate of one value per row (Qwen3.5-MoE's shared expert).
void Executor::run_row_gate(const Node& node, int64_t rows) {
  const int64_t width = graph_.value(node.output).width;
  const float* gate = input(node, 0);
  const float* x = input(node, 1);
  float* y = buffer(node.output);
  pool_.parallel_for(static_cast<size_t>(rows), 16, [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const float s = 1.0f / (1.0f + std::exp(-gate[r]));
      const int64_t off = static_cast<int64_t>(r) * width;
      for (int64_t i = 0; i < width; ++i) y[off + i] = x[off + i] * s;
    }
  });
}

void Executor::run_add_rmsnorm(const Node& node, int64_t rows) {
  const int64_t dim = graph_.value(node.output).width;
  const float* a = input(node, 0);
  const float* b = input(node, 1);
  float* sum = buffer(node.aux_output);
  float* y = buffer(node.output);
  const kernels::KernelTable& table = kernels::active_kernels();
  pool_.parallel_for(static_cast<size_t>(rows), 1, [&](size_t lo, size_t hi) {
    const int64_t off = static_cast<int64_t>(lo) * dim;
    kernels::fused::add_rmsnorm(table, a + off, b + off, *node.weight, node.eps, sum + off, y + off,
                                static_cast<int64_t>(hi - lo), dim);
  });
}

void Executor::run_moe(const Node& node, int64_t rows) {
  const kernels::MoeWeights moe{.router = node.weight,
                                .experts = node.experts,
                                .top_k = node.top_k,
                                .renormalize = node.renormalize,
                                .gate_up_block = node.block,
                                .router_bias = node.bias,
                                .expert_biases = node.expert_biases,
                                .activation = node.moe_activation,
                                .gating = node.moe_gating,
                                .selection_bias = node.selection_bias,
                                .routed_scale = node.routed_scale};
  const int64_t width = graph_.value(node.output).width;
  if (node.expert_parallel)
    dist::moe_ffn_expert_parallel(input(node, 0), rows, width, moe, node.expert_begin, buffer(node.output), pool_,
                                  moe_scratch_, ep_scratch_, *comm_);
  else
    kernels::moe_ffn(input(node, 0), rows, width, moe, buffer(node.output), pool_, moe_scratch_);
}

void Executor::run_all_reduce(const Node& node, int64_t rows) {
  const int64_t n = rows * graph_.value(node.output).width;
  const float* x = input(node, 0);
  float* y = buffer(node.output);
  std::copy(x, x + n, y);
  comm_->all_reduce_sum(y, n);
}

void Executor::run_gather_rows(const Node& node, const StepInputs& step, int64_t tokens, int64_t sampled) {
  const int64_t w = graph_.value(node.output).width;
  const float* x = input(node, 0);
  float* y = buffer(node.output);
  for (int64_t r = 0; r < sampled; ++r) {
    const int64_t src = step.sample_rows[static_cast<size_t>(r)];
    MINFER_CHECK(src >= 0 && src < tokens, "sample row {} outside the step's {} tokens", src, tokens);
    std::copy(x + src * w, x + (src + 1) * w, y + r * w);
  }
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
  // An image's rows replace its tokens' after the scale (Gemma 3 scales the text embeddings only).
  if (!step.given_rows.empty()) {
    MINFER_CHECK(node.vocab_stride == 0, "image rows in a vocab-parallel embedding");
    put_given_rows(node, step);
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

}  // namespace minfer::graph
