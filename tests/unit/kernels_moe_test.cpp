// The mixture-of-experts FFN (kernels/moe.h) against a dense reference written from transformers' maths (softmax
// over all experts in double, the top-k, renormalised or not, each expert's SwiGLU, the weighted sum): random
// inputs of awkward sizes, f32 and bf16 weights, 1 and 3 threads; the routing's ties and order; and that a row's
// output does not depend on the other rows of the batch; gpt-oss's biased experts with the clamped SwiGLU likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/half.h"
#include "kernels/fused/fused_weights.h"
#include "kernels/moe.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::expect_close;
using testing::make_tensor;
using testing::random_floats;

constexpr int64_t kPackBlock = 8;

struct Model {
  int64_t hidden, ff, experts;
  Tensor router;
  std::vector<Tensor> mats;  // gate, up, down per expert
  std::vector<const Tensor*> ptrs;
  std::vector<Tensor> packed;              // gate/up interleaved by kPackBlock, per expert
  std::vector<const Tensor*> packed_ptrs;  // packed gate/up, down per expert
};

Model make_model(std::mt19937& rng, int64_t hidden, int64_t ff, int64_t experts, DType dtype) {
  Model m{hidden, ff, experts, {}, {}, {}};
  m.router = make_tensor(random_floats(rng, static_cast<size_t>(experts * hidden)), {experts, hidden}, dtype);
  for (int64_t e = 0; e < experts; ++e) {
    m.mats.push_back(
        make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {ff, hidden}, dtype));
    m.mats.push_back(
        make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {ff, hidden}, dtype));
    m.mats.push_back(
        make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {hidden, ff}, dtype));
  }
  for (const Tensor& t : m.mats) m.ptrs.push_back(&t);
  for (int64_t e = 0; e < experts; ++e)
    m.packed.push_back(fused::interleave_gate_up(m.mats[static_cast<size_t>(3 * e)],
                                                 m.mats[static_cast<size_t>(3 * e + 1)], kPackBlock));
  for (int64_t e = 0; e < experts; ++e) {
    m.packed_ptrs.push_back(&m.packed[static_cast<size_t>(e)]);
    m.packed_ptrs.push_back(&m.mats[static_cast<size_t>(3 * e + 2)]);
  }
  return m;
}

std::vector<double> weights_of(const Tensor& t) {
  const Tensor f = to_f32(t);
  return std::vector<double>(f.as<float>(), f.as<float>() + f.numel());
}

// transformers' Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock in double. margin[r]: how far row r's k-th
// probability lies above the next (a near-tie can flip under rounded arithmetic, and with it the whole row).
std::vector<float> dense_moe(const Model& m, const std::vector<float>& x, int64_t rows, int64_t k, bool renormalize,
                             std::vector<double>* margin = nullptr) {
  const std::vector<double> router = weights_of(m.router);
  std::vector<float> out(static_cast<size_t>(rows * m.hidden), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * m.hidden;
    std::vector<double> p(static_cast<size_t>(m.experts));
    for (int64_t e = 0; e < m.experts; ++e)
      for (int64_t h = 0; h < m.hidden; ++h)
        p[static_cast<size_t>(e)] += router[static_cast<size_t>(e * m.hidden + h)] * xr[h];
    double mx = -INFINITY;
    for (double v : p) mx = std::max(mx, v);
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (double& v : p) v /= sum;
    std::vector<int64_t> order(static_cast<size_t>(m.experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
    double chosen = 0;
    for (int64_t s = 0; s < k; ++s) chosen += p[static_cast<size_t>(order[static_cast<size_t>(s)])];
    if (margin)
      margin->push_back(k < m.experts ? p[static_cast<size_t>(order[static_cast<size_t>(k - 1)])] -
                                            p[static_cast<size_t>(order[static_cast<size_t>(k)])]
                                      : 1.0);
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = order[static_cast<size_t>(s)];
      const double w = renormalize ? p[static_cast<size_t>(e)] / chosen : p[static_cast<size_t>(e)];
      const std::vector<double> g = weights_of(m.mats[static_cast<size_t>(3 * e)]);
      const std::vector<double> u = weights_of(m.mats[static_cast<size_t>(3 * e + 1)]);
      const std::vector<double> d = weights_of(m.mats[static_cast<size_t>(3 * e + 2)]);
      std::vector<double> act(static_cast<size_t>(m.ff));
      for (int64_t f = 0; f < m.ff; ++f) {
        double gv = 0, uv = 0;
        for (int64_t h = 0; h < m.hidden; ++h) {
          gv += g[static_cast<size_t>(f * m.hidden + h)] * xr[h];
          uv += u[static_cast<size_t>(f * m.hidden + h)] * xr[h];
        }
        act[static_cast<size_t>(f)] = gv / (1 + std::exp(-gv)) * uv;
      }
      for (int64_t h = 0; h < m.hidden; ++h) {
        double y = 0;
        for (int64_t f = 0; f < m.ff; ++f) y += d[static_cast<size_t>(h * m.ff + f)] * act[static_cast<size_t>(f)];
        out[static_cast<size_t>(r * m.hidden + h)] += static_cast<float>(w * y);
      }
    }
  }
  return out;
}

TEST(KernelsMoe, RandomBatchesMatchDenseReference) {
  std::mt19937 rng(21);
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (auto [hidden, ff, experts, k] :
         {std::tuple{24, 40, 5, 2}, std::tuple{33, 17, 8, 3}, std::tuple{64, 96, 4, 1}}) {
      const Model m = make_model(rng, hidden, ff, experts, dtype);
      for (int64_t rows : {1, 7, 33}) {
        for (bool renormalize : {true, false}) {
          const std::vector<float> x = random_floats(rng, static_cast<size_t>(rows * hidden), -1.5f, 1.5f);
          std::vector<double> margin;
          const std::vector<float> want = dense_moe(m, x, rows, k, renormalize, &margin);
          // bf16 weights: the GEMMs round activations to bf16 (as every bf16 GEMM of the engine does), which may
          // swap two experts of nearly equal probability; such rows are not compared.
          // Errors are measured against the row's largest output.
          std::vector<float> scale(want.size());
          for (size_t i = 0; i < want.size(); ++i) {
            const size_t row = i / static_cast<size_t>(hidden);
            const auto first = want.begin() + static_cast<int64_t>(row) * hidden;
            float row_max = 0.0f;
            for (auto it = first; it != first + hidden; ++it) row_max = std::max(row_max, std::fabs(*it));
            const bool near_tie = dtype == DType::BF16 && margin[row] < 0.02;
            scale[i] = near_tie ? 1e30f : row_max;
          }
          for (int threads : {1, 3}) {
            ThreadPool pool(threads);
            MoeScratch scratch;
            std::vector<float> got(want.size(), NAN);
            moe_ffn(x.data(), rows, hidden, {&m.router, m.ptrs, k, renormalize}, got.data(), pool, scratch);
            const float tol = dtype == DType::BF16 ? 2e-2f : 2e-5f;
            const std::string what = std::string(dtype_name(dtype)) + " hidden " + std::to_string(hidden) +
                                     " experts " + std::to_string(experts) + " top " + std::to_string(k) + " rows " +
                                     std::to_string(rows) + (renormalize ? " renormalised" : "") + " threads " +
                                     std::to_string(threads);
            expect_close(got, want, tol, tol * 0.1f, what, &scale);
            // Gate and up packed as the gate/up fusion pass packs them: one GEMM with the SiLU product epilogue.
            std::vector<float> packed_out(want.size(), NAN);
            moe_ffn(x.data(), rows, hidden, {&m.router, m.packed_ptrs, k, renormalize, kPackBlock}, packed_out.data(),
                    pool, scratch);
            expect_close(packed_out, want, tol, tol * 0.1f, what + " (gate/up packed)", &scale);
          }
        }
      }
    }
  }
}

// gpt-oss's experts in double (transformers' GptOssMLP): router logits plus its bias, a softmax over the top-k
// logits, and per chosen expert min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1) with gate, up and down
// biases.
std::vector<float> dense_gpt_oss_moe(const Model& m, const std::vector<float>& x, int64_t rows, int64_t k,
                                     const std::vector<float>& router_bias, const std::vector<Tensor>& biases) {
  const std::vector<double> router = weights_of(m.router);
  std::vector<float> out(static_cast<size_t>(rows * m.hidden), 0.0f);
  auto dot = [&](const std::vector<double>& w, int64_t row, int64_t n, const double* v) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += w[static_cast<size_t>(row * n + i)] * v[i];
    return acc;
  };
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> xr(x.begin() + r * m.hidden, x.begin() + (r + 1) * m.hidden);
    std::vector<double> logit(static_cast<size_t>(m.experts));
    for (int64_t e = 0; e < m.experts; ++e)
      logit[static_cast<size_t>(e)] = dot(router, e, m.hidden, xr.data()) + router_bias[static_cast<size_t>(e)];
    std::vector<int64_t> order(static_cast<size_t>(m.experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logit[static_cast<size_t>(a)] > logit[static_cast<size_t>(b)];
    });
    double sum = 0;
    for (int64_t s = 0; s < k; ++s) sum += std::exp(logit[static_cast<size_t>(order[static_cast<size_t>(s)])]);
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = order[static_cast<size_t>(s)];
      const double w = std::exp(logit[static_cast<size_t>(e)]) / sum;
      const auto mat = [&](int i) { return weights_of(m.mats[static_cast<size_t>(3 * e + i)]); };
      const auto bias = [&](int i, int64_t j) { return biases[static_cast<size_t>(3 * e + i)].as<float>()[j]; };
      const std::vector<double> g = mat(0), u = mat(1), d = mat(2);
      std::vector<double> act(static_cast<size_t>(m.ff));
      for (int64_t f = 0; f < m.ff; ++f) {
        const double gv = std::min(dot(g, f, m.hidden, xr.data()) + bias(0, f), 7.0);
        const double uv = std::clamp(dot(u, f, m.hidden, xr.data()) + bias(1, f), -7.0, 7.0);
        act[static_cast<size_t>(f)] = gv / (1 + std::exp(-1.702 * gv)) * (uv + 1);
      }
      for (int64_t h = 0; h < m.hidden; ++h)
        out[static_cast<size_t>(r * m.hidden + h)] +=
            static_cast<float>(w * (dot(d, h, m.ff, act.data()) + bias(2, h)));
    }
  }
  return out;
}

TEST(KernelsMoe, GptOssBiasesAndClampedSwigluMatchDenseReference) {
  std::mt19937 rng(23);
  const int64_t hidden = 40, ff = 24, experts = 6, k = 2;
  const Model m = make_model(rng, hidden, ff, experts, DType::F32);
  const Tensor router_bias =
      make_tensor(random_floats(rng, static_cast<size_t>(experts), -0.5f, 0.5f), {experts}, DType::F32);
  std::vector<Tensor> biases;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t n : {ff, ff, hidden})
      biases.push_back(make_tensor(random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f), {n}, DType::F32));
  std::vector<const Tensor*> bias_ptrs;
  for (const Tensor& b : biases) bias_ptrs.push_back(&b);
  // Inputs up to 6: gate and up values past the clamps at +-7.
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(9 * hidden), -6.0f, 6.0f);
  const std::vector<float> bias_values(router_bias.as<float>(), router_bias.as<float>() + experts);
  const std::vector<float> want = dense_gpt_oss_moe(m, x, 9, k, bias_values, biases);
  MoeWeights w{.router = &m.router, .experts = m.ptrs, .top_k = k, .renormalize = true};
  w.router_bias = &router_bias;
  w.expert_biases = bias_ptrs;
  w.activation = MoeActivation::kSwigluOai;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    MoeScratch scratch;
    std::vector<float> got(want.size(), NAN);
    moe_ffn(x.data(), 9, hidden, w, got.data(), pool, scratch);
    expect_close(got, want, 2e-5f, 2e-6f, "gpt-oss experts, threads " + std::to_string(threads));
  }
  // Without the biases the result differs (the test sees them).
  w.expert_biases = {};
  std::vector<float> unbiased(want.size());
  ThreadPool pool(1);
  MoeScratch scratch;
  moe_ffn(x.data(), 9, hidden, w, unbiased.data(), pool, scratch);
  float largest = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) largest = std::max(largest, std::fabs(unbiased[i] - want[i]));
  EXPECT_GT(largest, 0.1f);
}

TEST(KernelsMoe, RoutingOrderTiesAndRenormalisation) {
  // Row 0: experts 2 and 0 tie for the top; the lower one comes first. Row 1: a clear order 3 > 1 > 0 > 2.
  const std::vector<float> logits = {1.0f, 0.0f, 1.0f, -1.0f, 0.1f, 0.5f, -2.0f, 2.0f};
  std::vector<int32_t> choice(4);
  std::vector<float> prob(4);
  moe_route(logits.data(), 2, 4, {.top_k = 2, .renormalize = true}, choice.data(), prob.data());
  EXPECT_EQ(choice, (std::vector<int32_t>{0, 2, 3, 1}));
  EXPECT_FLOAT_EQ(prob[0] + prob[1], 1.0f);
  EXPECT_FLOAT_EQ(prob[0], 0.5f);
  EXPECT_NEAR(prob[2] / prob[3], std::exp(2.0 - 0.5), 1e-5);
  moe_route(logits.data(), 2, 4, {.top_k = 2, .renormalize = false}, choice.data(), prob.data());
  const double z = std::exp(0.1) + std::exp(0.5) + std::exp(-2.0) + std::exp(2.0);
  EXPECT_NEAR(prob[2], std::exp(2.0) / z, 1e-6);  // the softmax over all four, not renormalised
}

// LFM2-MoE's router: each expert's sigmoid score, a bias that changes which experts are chosen but not their weight,
// the chosen scores renormalised (+1e-6, as transformers) and scaled.
TEST(KernelsMoe, SigmoidRoutingWithSelectionBias) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 1.5f};  // lifts expert 3 (sigmoid 0.27 + 1.5) to the top
  const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<int32_t> choice(2);
  std::vector<float> prob(2);
  moe_route(logits.data(), 1, 4, {.top_k = 2, .renormalize = false, .gating = MoeGating::kSigmoid}, choice.data(),
            prob.data());
  EXPECT_EQ(choice, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(prob[0], sig(2.0), 1e-6);
  EXPECT_NEAR(prob[1], sig(1.0), 1e-6);
  moe_route(
      logits.data(), 1, 4,
      {.top_k = 2, .renormalize = true, .gating = MoeGating::kSigmoid, .selection_bias = bias.data(), .scale = 2.5f},
      choice.data(), prob.data());
  EXPECT_EQ(choice, (std::vector<int32_t>{3, 0}));
  const double sum = sig(-1.0) + sig(2.0) + 1e-6;
  EXPECT_NEAR(prob[0], 2.5 * sig(-1.0) / sum, 1e-6);
  EXPECT_NEAR(prob[1], 2.5 * sig(2.0) / sum, 1e-6);
}

// A row's output is the same alone and inside a batch of other rows (its experts' GEMMs run over other row counts;
// the f32 GEMM kernels block rows differently for different counts, so the last bits may differ: what must not
// change is the routing, i.e. which experts a row uses).
TEST(KernelsMoe, RowsDoNotDependOnTheBatch) {
  std::mt19937 rng(22);
  const Model m = make_model(rng, 48, 64, 6, DType::F32);
  const std::vector<float> x = random_floats(rng, 48 * 20, -1.5f, 1.5f);
  ThreadPool pool(2);
  MoeScratch scratch;
  std::vector<float> batched(x.size());
  moe_ffn(x.data(), 20, 48, {&m.router, m.ptrs, 2, true}, batched.data(), pool, scratch);
  for (int64_t r : {0, 7, 19}) {
    std::vector<float> alone(48);
    moe_ffn(x.data() + r * 48, 1, 48, {&m.router, m.ptrs, 2, true}, alone.data(), pool, scratch);
    const std::vector<float> row(batched.begin() + r * 48, batched.begin() + (r + 1) * 48);
    expect_close(alone, row, 1e-5f, 1e-7f, "row " + std::to_string(r) + " alone vs in a batch of 20");
  }
}

}  // namespace
}  // namespace minfer::kernels
