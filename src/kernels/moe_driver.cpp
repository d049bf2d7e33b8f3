#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "kernels/dispatch.h"
#include "kernels/fused/fused_matmul.h"
#include "kernels/kernels.h"
#include "kernels/moe.h"

namespace minfer::kernels {
namespace {

float* grow(std::vector<float>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

void check_weights(const MoeWeights& m, int64_t hidden) {
  MINFER_CHECK(m.router != nullptr && m.router->rank() == 2 && m.router->dim(1) == hidden,
               "moe: router {} for width {}", m.router ? m.router->shape_string() : "null", hidden);
  const int64_t experts = m.router->dim(0), per_expert = m.gate_up_block > 0 ? 2 : 3;
  MINFER_CHECK(static_cast<int64_t>(m.experts.size()) == per_expert * experts, "moe: {} expert matrices for {} experts",
               m.experts.size(), experts);
  MINFER_CHECK(m.top_k >= 1 && m.top_k <= experts, "moe: top_k {} of {} experts", m.top_k, experts);
  MINFER_CHECK(m.router_bias == nullptr || (m.router_bias->dtype == DType::F32 && m.router_bias->numel() == experts),
               "moe: router bias {} for {} experts", m.router_bias ? m.router_bias->shape_string() : "", experts);
  MINFER_CHECK(
      m.selection_bias == nullptr || (m.selection_bias->dtype == DType::F32 && m.selection_bias->numel() == experts),
      "moe: selection bias {} for {} experts", m.selection_bias ? m.selection_bias->shape_string() : "", experts);
  MINFER_CHECK(m.expert_biases.empty() || (m.gate_up_block == 0 && m.expert_biases.size() == m.experts.size()),
               "moe: {} expert biases for {} expert matrices (gate/up interleaved by {})", m.expert_biases.size(),
               m.experts.size(), m.gate_up_block);
}

// Expert e's bias i (0 gate, 1 up, 2 down) as f32 data, or null.
const float* expert_bias(const MoeWeights& m, int64_t e, int64_t i) {
  return m.expert_biases.empty() ? nullptr : m.expert_biases[static_cast<size_t>(3 * e + i)]->as<float>();
}

// act(gate_e(xe)) * up_e(xe) into s.gate [n, ff]: one GEMM over the interleaved gate/up weights with the SiLU
// product in its epilogue when they are packed (one pass over the rows, one fork of the pool), else two GEMMs.
// Returns ff.
int64_t expert_gate_up(const MoeWeights& m, int64_t e, const float* xe, int64_t n, int64_t hidden, ThreadPool& pool,
                       MoeScratch& s) {
  if (m.gate_up_block > 0) {
    MINFER_CHECK(m.activation == MoeActivation::kSilu, "moe: interleaved gate/up weights gate with SiLU only");
    const Tensor& gate_up = *m.experts[static_cast<size_t>(2 * e)];
    const int64_t ff = gate_up.dim(0) / 2;
    fused::FusedMatMul op;
    op.x = xe;
    op.rows = n;
    op.k = hidden;
    op.weight = &gate_up;
    op.y = grow(s.up, n * 2 * ff);
    op.epilogue = fused::Epilogue::kSiluMul;
    op.out = grow(s.gate, n * ff);
    op.block = m.gate_up_block;
    fused::fused_matmul(active_kernels(), op, pool);
    return ff;
  }
  const Tensor& gate = *m.experts[static_cast<size_t>(3 * e)];
  const Tensor& up = *m.experts[static_cast<size_t>(3 * e + 1)];
  const int64_t ff = gate.dim(0);
  float* g = grow(s.gate, n * ff);
  float* u = grow(s.up, n * ff);
  gemm(xe, n, hidden, gate, expert_bias(m, e, 0), g, pool);
  gemm(xe, n, hidden, up, expert_bias(m, e, 1), u, pool);
  (m.activation == MoeActivation::kSwigluOai ? swiglu_oai : silu_mul)(g, u, g, n * ff);
  return ff;
}

}  // namespace

void moe_route(const float* logits, int64_t rows, int64_t experts, const MoeRouting& r, int32_t* choice, float* prob) {
  std::vector<float> p(static_cast<size_t>(experts)), key(static_cast<size_t>(experts));
  std::vector<int32_t> order(static_cast<size_t>(experts));
  const int64_t top_k = r.top_k;
  for (int64_t row = 0; row < rows; ++row) {
    const float* l = logits + row * experts;
    if (r.gating == MoeGating::kSigmoid) {
      for (int64_t e = 0; e < experts; ++e) p[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-l[e]));
    } else {  // softmax in f32 (transformers: softmax(router_logits, dim=1, dtype=torch.float))
      const float mx = *std::max_element(l, l + experts);
      float sum = 0.0f;
      for (int64_t e = 0; e < experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(l[e] - mx);
      for (float& v : p) v /= sum;
    }
    for (int64_t e = 0; e < experts; ++e)
      key[static_cast<size_t>(e)] = p[static_cast<size_t>(e)] + (r.selection_bias ? r.selection_bias[e] : 0.0f);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)] ||
             (key[static_cast<size_t>(a)] == key[static_cast<size_t>(b)] && a < b);
    });
    float chosen = 0.0f;
    for (int64_t s = 0; s < top_k; ++s) chosen += p[static_cast<size_t>(order[static_cast<size_t>(s)])];
    // Sigmoid scores need not sum to anything: transformers adds 1e-20 (DeepSeek-V3) / 1e-6 (LFM2-MoE) to the
    // denominator; the chosen sum is far above either unless every chosen logit is below -40.
    if (r.gating == MoeGating::kSigmoid) chosen += 1e-6f;
    for (int64_t s = 0; s < top_k; ++s) {
      const int32_t e = order[static_cast<size_t>(s)];
      choice[row * top_k + s] = e;
      prob[row * top_k + s] =
          (r.renormalize ? p[static_cast<size_t>(e)] / chosen : p[static_cast<size_t>(e)]) * r.scale;
    }
  }
}

void moe_expert_ffn(const MoeWeights& m, int64_t e, const float* x, int64_t n, int64_t hidden, float* out,
                    ThreadPool& pool, MoeScratch& s) {
  const int64_t per_expert = m.gate_up_block > 0 ? 2 : 3;
  const int64_t ff = expert_gate_up(m, e, x, n, hidden, pool, s);
  const Tensor& down = *m.experts[static_cast<size_t>(per_expert * e + per_expert - 1)];
  gemm(s.gate.data(), n, ff, down, per_expert == 3 ? expert_bias(m, e, 2) : nullptr, out, pool);
}

void moe_ffn(const float* x, int64_t rows, int64_t hidden, const MoeWeights& m, float* out, ThreadPool& pool,
             MoeScratch& s) {
  check_weights(m, hidden);
  const int64_t experts = m.router->dim(0), k = m.top_k;
  gemm(x, rows, hidden, *m.router, m.router_bias ? m.router_bias->as<float>() : nullptr, grow(s.logits, rows * experts),
       pool);
  s.choice.resize(static_cast<size_t>(rows * k));
  s.prob.resize(static_cast<size_t>(rows * k));
  moe_route(s.logits.data(), rows, experts, m.routing(), s.choice.data(), s.prob.data());

  // The (row, slot) pairs of each expert, grouped by expert in row order (a counting sort).
  s.offsets.assign(static_cast<size_t>(experts + 1), 0);
  for (int32_t e : s.choice) ++s.offsets[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < experts; ++e) s.offsets[static_cast<size_t>(e + 1)] += s.offsets[static_cast<size_t>(e)];
  s.by_expert.resize(static_cast<size_t>(rows * k));
  {
    std::vector<int32_t> next(s.offsets.begin(), s.offsets.end() - 1);
    for (int64_t i = 0; i < rows * k; ++i)
      s.by_expert[static_cast<size_t>(next[static_cast<size_t>(s.choice[static_cast<size_t>(i)])]++)] =
          static_cast<int32_t>(i);
  }

  // Each expert once over its rows: gather, gate and up GEMMs, SiLU product, down GEMM into the rows' slots.
  float* slot_out = grow(s.slot_out, rows * k * hidden);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t begin = s.offsets[static_cast<size_t>(e)], n = s.offsets[static_cast<size_t>(e + 1)] - begin;
    if (n == 0) continue;
    float* xe = grow(s.gathered, n * hidden);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = s.by_expert[static_cast<size_t>(begin + i)] / k;
      std::copy(x + row * hidden, x + (row + 1) * hidden, xe + i * hidden);
    }
    float* d = grow(s.expert_out, n * hidden);
    moe_expert_ffn(m, e, xe, n, hidden, d, pool, s);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot = s.by_expert[static_cast<size_t>(begin + i)];
      std::copy(d + i * hidden, d + (i + 1) * hidden, slot_out + slot * hidden);
    }
  }

  moe_combine(rows, k, hidden, s.choice.data(), s.prob.data(), slot_out, out, pool);
}

void moe_combine(int64_t rows, int64_t k, int64_t hidden, const int32_t* choice, const float* prob,
                 const float* slot_out, float* out, ThreadPool& pool) {
  pool.parallel_for(static_cast<size_t>(rows), 1, [&](size_t r0, size_t r1) {
    std::vector<int32_t> slots(static_cast<size_t>(k));
    for (size_t r = r0; r < r1; ++r) {
      const auto row = static_cast<int64_t>(r);
      std::iota(slots.begin(), slots.end(), static_cast<int32_t>(row * k));
      std::sort(slots.begin(), slots.end(), [&](int32_t a, int32_t b) { return choice[a] < choice[b]; });
      float* y = out + row * hidden;
      std::fill(y, y + hidden, 0.0f);
      for (int32_t slot : slots) {
        const float w = prob[slot];
        const float* v = slot_out + static_cast<int64_t>(slot) * hidden;
        for (int64_t h = 0; h < hidden; ++h) y[h] += w * v[h];
      }
    }
  });
}

}  // namespace minfer::kernels
