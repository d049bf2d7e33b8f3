// RMSNorm, RoPE, SiLU*mul, add, softmax and embedding: every ISA's table against the scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::make_tensor;
using testing::random_floats;

constexpr DType kWeightTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr int64_t kLengths[] = {1, 3, 7, 8, 15, 16, 17, 31, 64, 100, 257, 896, 1000};

TEST(KernelsElementwise, RmsnormMatchesReference) {
  std::mt19937 rng(1);
  for (int64_t rows : {1, 3}) {
    for (int64_t dim : kLengths) {
      for (DType dtype : kWeightTypes) {
        const auto x = random_floats(rng, static_cast<size_t>(rows * dim), -3.0f, 3.0f);
        const Tensor w = make_tensor(random_floats(rng, static_cast<size_t>(dim), 0.5f, 1.5f), {dim}, dtype);
        std::vector<float> want(x.size());
        ref::rmsnorm(x.data(), w, 1e-6f, want.data(), rows, dim);
        for (const KernelTable* t : available_tables()) {
          std::vector<float> y(x.size(), NAN);
          t->rmsnorm(x.data(), w, 1e-6f, y.data(), rows, dim);
          expect_close(
              y, want, 2e-6f, 0.0f,
              std::string(t->name) + " rmsnorm dim " + std::to_string(dim) + " " + std::string(dtype_name(dtype)));
        }
      }
    }
  }
}

TEST(KernelsElementwise, RopeMatchesReferenceBothStyles) {
  std::mt19937 rng(2);
  for (int64_t head_dim : {8, 16, 24, 32, 64, 80, 96, 128}) {
    // Full rotation, half, a quarter, and odd pair counts (partial rotary as in Phi / GLM / some Qwen variants).
    for (int64_t half_rot : {head_dim / 2, head_dim / 4, int64_t{1}, head_dim / 2 - 1, int64_t{3}}) {
      if (half_rot < 1) continue;
      for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
        const int64_t tokens = 5;
        const int64_t heads = 3;
        const auto x = random_floats(rng, static_cast<size_t>(tokens * heads * head_dim));
        std::vector<float> inv_freq(static_cast<size_t>(half_rot));
        for (int64_t i = 0; i < half_rot; ++i) {
          inv_freq[static_cast<size_t>(i)] =
              std::pow(1e6f, -2.0f * static_cast<float>(i) / static_cast<float>(head_dim));
        }
        const std::vector<int32_t> pos = {0, 1, 17, 4095, 131071};
        std::vector<float> cos(static_cast<size_t>(tokens * half_rot)), sin(cos.size());
        ref::rope_angles(pos.data(), tokens, inv_freq.data(), half_rot, cos.data(), sin.data());
        std::vector<float> want = x;
        ref::rope(want.data(), cos.data(), sin.data(), tokens, heads, head_dim, half_rot, style);
        for (const KernelTable* t : available_tables()) {
          std::vector<float> y = x;
          t->rope(y.data(), cos.data(), sin.data(), tokens, heads, head_dim, half_rot, style);
          expect_close(y, want, 1e-6f, 1e-7f,
                       std::string(t->name) + " rope head_dim " + std::to_string(head_dim) + " half_rot " +
                           std::to_string(half_rot) + (style == RopeStyle::kNeox ? " neox" : " interleaved"));
          // Dimensions past the rotated ones are untouched.
          for (int64_t r = 0; r < tokens * heads; ++r) {
            for (int64_t d = 2 * half_rot; d < head_dim; ++d) {
              ASSERT_EQ(y[static_cast<size_t>(r * head_dim + d)], x[static_cast<size_t>(r * head_dim + d)]);
            }
          }
        }
      }
    }
  }
}

TEST(KernelsElementwise, GatedActivationsAndAddMatchReference) {
  std::mt19937 rng(3);
  for (int64_t n : kLengths) {
    auto gate = random_floats(rng, static_cast<size_t>(n), -12.0f, 12.0f);
    if (n > 2) {
      gate[0] = -100.0f;  // exp(-x) overflows: silu -> -0
      gate[1] = 90.0f;
    }
    const auto up = random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
    std::vector<float> want_silu(gate.size()), want_gelu(gate.size()), want_add(gate.size());
    ref::silu_mul(gate.data(), up.data(), want_silu.data(), n);
    ref::gelu_tanh_mul(gate.data(), up.data(), want_gelu.data(), n);
    // The reference against PyTorch's formula 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), in double. Errors
    // are measured against |g * up|: far left, where the product vanishes, both forms are a rounding of zero.
    std::vector<float> gated_scale(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      const double want = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      gated_scale[i] = std::fabs(gate[i] * up[i]);
      EXPECT_NEAR(want_gelu[i], want, 1e-6 * gated_scale[i] + 1e-30) << "gelu_tanh g " << g;
    }
    ref::add(gate.data(), up.data(), want_add.data(), n);
    for (const KernelTable* t : available_tables()) {
      std::vector<float> y(gate.size(), NAN);
      t->silu_mul(gate.data(), up.data(), y.data(), n);
      expect_close(y, want_silu, 2e-6f, 1e-37f, std::string(t->name) + " silu_mul n " + std::to_string(n));
      t->gelu_tanh_mul(gate.data(), up.data(), y.data(), n);
      expect_close(y, want_gelu, 2e-6f, 1e-37f, std::string(t->name) + " gelu_tanh_mul n " + std::to_string(n),
                   &gated_scale);
      t->add(gate.data(), up.data(), y.data(), n);
      EXPECT_EQ(y, want_add) << t->name << " add n " << n;
    }
  }
}

// GELU(tanh) alone (vision encoders): the reference against PyTorch's formula in double, every leaf set against it.
TEST(KernelsElementwise, GeluTanhMatchesReference) {
  std::mt19937 rng(4);
  for (int64_t n : kLengths) {
    auto x = random_floats(rng, static_cast<size_t>(n), -12.0f, 12.0f);
    if (n > 2) x[0] = -100.0f, x[1] = 90.0f;
    std::vector<float> want(x.size()), scale(x.size());
    ref::gelu_tanh(x.data(), want.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      const double g = x[i];
      scale[i] = std::fabs(x[i]);
      EXPECT_NEAR(want[i], 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))),
                  1e-6 * scale[i] + 1e-30)
          << "gelu_tanh " << g;
    }
    for (const KernelTable* t : available_tables()) {
      std::vector<float> y(x.size(), NAN);
      t->leaves->gelu_tanh(x.data(), y.data(), n);
      expect_close(y, want, 2e-6f, 1e-37f, std::string(t->name) + " gelu_tanh n " + std::to_string(n), &scale);
    }
  }
}

// LayerNorm against a double-precision reference: rows of awkward widths, with an offset that a one-pass variance
// would lose to cancellation.
TEST(KernelsElementwise, LayerNormMatchesDouble) {
  std::mt19937 rng(6);
  for (int64_t dim : {1, 7, 64, 100, 1152}) {
    const int64_t rows = 5;
    auto x = random_floats(rng, static_cast<size_t>(rows * dim), -3.0f, 3.0f);
    for (float& v : x) v += 40.0f;
    const auto w = random_floats(rng, static_cast<size_t>(dim), -2.0f, 2.0f);
    const auto b = random_floats(rng, static_cast<size_t>(dim), -1.0f, 1.0f);
    std::vector<float> y(x.size(), NAN);
    layernorm(x.data(), w.data(), b.data(), 1e-6f, y.data(), rows, dim);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mean += x[static_cast<size_t>(r * dim + i)];
      mean /= static_cast<double>(dim);
      for (int64_t i = 0; i < dim; ++i) var += std::pow(x[static_cast<size_t>(r * dim + i)] - mean, 2);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(dim) + 1e-6);
      for (int64_t i = 0; i < dim; ++i) {
        const auto k = static_cast<size_t>(r * dim + i);
        const double want = (x[k] - mean) * inv * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
        EXPECT_NEAR(y[k], want, 2e-4) << "dim " << dim << " row " << r << " i " << i;
      }
    }
  }
}

// gpt-oss's clamped SwiGLU: the reference against transformers' GptOssExperts formula in double (gate clamped above
// at 7, up to [-7, 7]), then every table against the reference; gates and ups reach past the clamps.
TEST(KernelsElementwise, SwigluOaiMatchesReference) {
  std::mt19937 rng(5);
  for (int64_t n : kLengths) {
    const auto gate = random_floats(rng, static_cast<size_t>(n), -12.0f, 12.0f);
    const auto up = random_floats(rng, static_cast<size_t>(n), -10.0f, 10.0f);
    std::vector<float> want(gate.size());
    ref::swiglu_oai(gate.data(), up.data(), want.data(), n);
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = std::min(static_cast<double>(gate[i]), 7.0);
      const double u = std::clamp(static_cast<double>(up[i]), -7.0, 7.0);
      const double exact = g / (1 + std::exp(-1.702 * g)) * (u + 1);
      EXPECT_NEAR(want[i], exact, 1e-6 * (std::fabs(g * (u + 1)) + 1e-30)) << "g " << gate[i] << " up " << up[i];
    }
    for (const KernelTable* t : available_tables()) {
      std::vector<float> y(gate.size(), NAN);
      t->swiglu_oai(gate.data(), up.data(), y.data(), n);
      expect_close(y, want, 2e-6f, 1e-37f, std::string(t->name) + " swiglu_oai n " + std::to_string(n));
    }
  }
}

TEST(KernelsElementwise, SoftmaxMatchesReference) {
  std::mt19937 rng(4);
  for (int64_t cols : {1, 2, 7, 16, 17, 100, 1000, 151936}) {
    for (float spread : {1.0f, 40.0f}) {
      const int64_t rows = cols > 1000 ? 1 : 3;
      const auto x = random_floats(rng, static_cast<size_t>(rows * cols), -spread, spread);
      std::vector<float> want = x;
      ref::softmax(want.data(), rows, cols);
      for (const KernelTable* t : available_tables()) {
        std::vector<float> y = x;
        t->softmax(y.data(), rows, cols);
        // Each probability is exp (~1 ulp) over a sum whose rounding depends on the order; the reference's
        // sequential sum drifts like sqrt(cols) ulps (2.6e-5 relative at the 151936-token vocab).
        const float rtol = 2e-6f + 2e-7f * std::sqrt(static_cast<float>(cols));
        expect_close(y, want, rtol, 1e-38f, std::string(t->name) + " softmax cols " + std::to_string(cols));
      }
    }
  }
}

TEST(KernelsElementwise, EmbeddingMatchesReference) {
  std::mt19937 rng(5);
  for (int64_t dim : {1, 7, 16, 33, 896}) {
    for (DType dtype : kWeightTypes) {
      const int64_t vocab = 50;
      const Tensor table = make_tensor(random_floats(rng, static_cast<size_t>(vocab * dim)), {vocab, dim}, dtype);
      const std::vector<int32_t> ids = {0, 49, 3, 3, 17};
      std::vector<float> want(ids.size() * static_cast<size_t>(dim));
      ref::embedding(ids.data(), 5, table, want.data());
      for (const KernelTable* t : available_tables()) {
        std::vector<float> y(want.size(), NAN);
        t->embedding(ids.data(), 5, table, y.data());
        EXPECT_EQ(y, want) << t->name << " dim " << dim << " " << dtype_name(dtype);
      }
      const std::vector<int32_t> bad = {50};
      std::vector<float> y(static_cast<size_t>(dim));
      EXPECT_THROW(embedding(bad.data(), 1, table, y.data()), Error);
    }
  }
}

}  // namespace
}  // namespace minfer::kernels
