// The executor against a direct computation of a small graph, and its buffer plan.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/graph.h"

namespace minfer::graph {
namespace {

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937& rng) {
  Tensor t = Tensor::allocate(DType::F32, std::move(shape));
  std::normal_distribution<float> dist(0.0f, 0.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<float>()[i] = dist(rng);
  return t;
}

// embed -> rmsnorm -> matmul(+bias) -> silu_mul(with itself) -> add residual -> gather rows -> matmul
TEST(Executor, MatchesDirectComputation) {
  std::mt19937 rng(7);
  const int64_t vocab = 11, hidden = 6, out = 5;
  Tensor embed = random_tensor({vocab, hidden}, rng);
  Tensor norm = random_tensor({hidden}, rng);
  Tensor w = random_tensor({hidden, hidden}, rng);
  Tensor bias = random_tensor({hidden}, rng);
  Tensor head = random_tensor({out, hidden}, rng);

  Graph g;
  Node e{.kind = OpKind::kEmbedding, .output = g.add_value("x", hidden)};
  e.weight = &embed;
  const ValueId x = g.add_node(e);
  Node n{.kind = OpKind::kRmsNorm, .inputs = {x}, .output = g.add_value("h", hidden)};
  n.weight = &norm;
  n.eps = 1e-5f;
  const ValueId h = g.add_node(n);
  Node m{.kind = OpKind::kMatMul, .inputs = {h}, .output = g.add_value("y", hidden)};
  m.weight = &w;
  m.bias = &bias;
  const ValueId y = g.add_node(m);
  const ValueId a = g.add_node(Node{.kind = OpKind::kSiluMul, .inputs = {y, y}, .output = g.add_value("a", hidden)});
  const ValueId r = g.add_node(Node{.kind = OpKind::kAdd, .inputs = {x, a}, .output = g.add_value("r", hidden)});
  const ValueId last = g.add_node(
      Node{.kind = OpKind::kGatherRows, .inputs = {r}, .output = g.add_value("last", hidden, RowSpace::kSampled)});
  Node lm{.kind = OpKind::kMatMul, .inputs = {last}, .output = g.add_value("logits", out, RowSpace::kSampled)};
  lm.weight = &head;
  g.set_output(g.add_node(lm));

  ThreadPool pool(2);
  Executor ex(g, pool, RopeTables{RopeTable{}});
  const std::vector<int32_t> tokens = {3, 0, 10, 7};
  const std::vector<int32_t> positions = {0, 1, 2, 3};
  const std::vector<int64_t> slots = {-1, -1, -1, -1};
  const std::vector<int32_t> sample = {1, 3};
  StepInputs step{tokens, positions, slots, {}, sample};
  const float* logits = ex.run(step, {});
  EXPECT_EQ(ex.dispatches_last_step(), 7);

  const float* E = embed.as<float>();
  for (size_t s = 0; s < sample.size(); ++s) {
    const float* xe = E + tokens[static_cast<size_t>(sample[s])] * hidden;
    double ss = 0;
    for (int64_t i = 0; i < hidden; ++i) ss += xe[i] * xe[i];
    const double inv = 1.0 / std::sqrt(ss / hidden + 1e-5);
    std::vector<double> hn(hidden), res(hidden);
    for (int64_t i = 0; i < hidden; ++i) hn[i] = xe[i] * inv * norm.as<float>()[i];
    for (int64_t o = 0; o < hidden; ++o) {
      double acc = bias.as<float>()[o];
      for (int64_t i = 0; i < hidden; ++i) acc += hn[i] * w.as<float>()[o * hidden + i];
      res[o] = xe[o] + acc / (1 + std::exp(-acc)) * acc;
    }
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < hidden; ++i) acc += res[i] * head.as<float>()[o * hidden + i];
      EXPECT_NEAR(logits[s * out + o], acc, 1e-4 * (1 + std::abs(acc))) << "row " << s << " col " << o;
    }
  }
}

TEST(Graph, VerifyRejectsUseBeforeDefinition) {
  Graph g;
  const ValueId a = g.add_value("a", 4);
  const ValueId b = g.add_value("b", 4);
  g.add_node(Node{.kind = OpKind::kAdd, .inputs = {a, a}, .output = b});
  g.set_output(b);
  EXPECT_THROW(g.verify(), Error);
}

}  // namespace
}  // namespace minfer::graph
