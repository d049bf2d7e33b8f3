// The oracle checked by hand: the scalar reference kernels on tiny cases with known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::make_tensor;

TEST(KernelsReference, Gemm2x3) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> bias = {1, -1};
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {  // values exact in every type
    const Tensor w = make_tensor({1, 0, -1, 0.5f, 0.5f, 0.5f}, {2, 3}, dtype);
    std::vector<float> y(4);
    ref::gemm(x.data(), 2, 3, w, bias.data(), y.data());
    EXPECT_EQ(y, (std::vector<float>{-1.0f, 2.0f, -1.0f, 6.5f})) << dtype_name(dtype);
    ref::gemm(x.data(), 2, 3, w, nullptr, y.data());
    EXPECT_EQ(y, (std::vector<float>{-2.0f, 3.0f, -2.0f, 7.5f})) << dtype_name(dtype);
  }
}

TEST(KernelsReference, SoftmaxKnownValues) {
  std::vector<float> x = {1, 2, 3, 0, 0, 0, 1000, 1000, -1000};
  ref::softmax(x.data(), 3, 3);
  EXPECT_NEAR(x[0], 0.09003057f, 1e-7f);
  EXPECT_NEAR(x[1], 0.24472847f, 1e-7f);
  EXPECT_NEAR(x[2], 0.66524096f, 1e-7f);
  for (int i = 3; i < 6; ++i) EXPECT_NEAR(x[static_cast<size_t>(i)], 1.0f / 3.0f, 1e-7f);
  EXPECT_FLOAT_EQ(x[6], 0.5f);  // large values: no overflow
  EXPECT_FLOAT_EQ(x[7], 0.5f);
  EXPECT_EQ(x[8], 0.0f);
}

TEST(KernelsReference, RmsnormKnownValues) {
  const std::vector<float> x = {3, 4};
  const Tensor w = make_tensor({1.0f, 2.0f}, {2}, DType::F32);
  std::vector<float> y(2);
  ref::rmsnorm(x.data(), w, 0.0f, y.data(), 1, 2);  // rms = sqrt(12.5)
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y[1], 2 * 4.0 / std::sqrt(12.5), 1e-6);
}

// x rotated by the angles of one token at `pos` (the table rope_angles makes, then rope).
void rope_one(std::vector<float>& x, int32_t pos, const std::vector<float>& inv_freq, int64_t head_dim,
              int64_t half_rot, RopeStyle style) {
  std::vector<float> cos(static_cast<size_t>(half_rot)), sin(cos.size());
  ref::rope_angles(&pos, 1, inv_freq.data(), half_rot, cos.data(), sin.data());
  ref::rope(x.data(), cos.data(), sin.data(), 1, 1, head_dim, half_rot, style);
}

TEST(KernelsReference, RopeAtPositionOne) {
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const int32_t pos = 1;
  // Neox pairs (0, 2) and (1, 3): x = e0 + e3.
  std::vector<float> x = {1, 0, 0, 1};
  rope_one(x, pos, inv_freq, 4, 2, RopeStyle::kNeox);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-7);
  EXPECT_NEAR(x[1], -std::sin(0.01), 1e-7);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-7);
  // Interleaved pairs (0, 1) and (2, 3).
  x = {1, 0, 0, 1};
  rope_one(x, pos, inv_freq, 4, 2, RopeStyle::kInterleaved);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-7);
  EXPECT_NEAR(x[2], -std::sin(0.01), 1e-7);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-7);
  // Partial rotation: one pair of a 6-dim head, the rest untouched; position 0 is the identity.
  x = {1, 2, 3, 4, 5, 6};
  rope_one(x, pos, inv_freq, 6, 1, RopeStyle::kNeox);
  EXPECT_NEAR(x[0], std::cos(1.0) - 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(1.0) + std::sin(1.0), 1e-6);
  EXPECT_EQ((std::vector<float>(x.begin() + 2, x.end())), (std::vector<float>{3, 4, 5, 6}));
  const int32_t zero = 0;
  x = {1, 2, 3, 4};
  rope_one(x, zero, inv_freq, 4, 2, RopeStyle::kNeox);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
}

TEST(KernelsReference, SiluMulAndAdd) {
  const std::vector<float> g = {0.0f, 1.0f, -1.0f};
  const std::vector<float> u = {5.0f, 2.0f, 1.0f};
  std::vector<float> y(3);
  ref::silu_mul(g.data(), u.data(), y.data(), 3);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(y[2], -1.0 / (1.0 + std::exp(1.0)), 1e-6);
  ref::add(g.data(), u.data(), y.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{5.0f, 3.0f, 0.0f}));
}

TEST(KernelsReference, EmbeddingPicksRows) {
  const Tensor table = make_tensor({0, 1, 10, 11, 20, 21}, {3, 2}, DType::BF16);
  const std::vector<int32_t> ids = {2, 0, 2};
  std::vector<float> y(6);
  ref::embedding(ids.data(), 3, table, y.data());
  EXPECT_EQ(y, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

TEST(KernelsReference, AttentionByHand) {
  // One kv head of dim 2, pages of 2 tokens, pages stored out of order (table {1, 0}).
  // Keys: k0 = (0, 0), k1 = (ln 3, 0), k2 = (0, 0); values v_j = (j, 10 j).
  std::vector<float> kp(8, 0.0f), vp(8, 0.0f);
  // Page p, place t: key element d at p * 4 + d * 2 + t (transposed), value element d at p * 4 + t * 2 + d.
  auto put = [&](int pos, float k0, float v0, float v1) {
    const int page = pos / 2 == 0 ? 1 : 0, t = pos % 2;
    kp[static_cast<size_t>(page * 4 + t)] = k0;
    vp[static_cast<size_t>(page * 4 + t * 2)] = v0;
    vp[static_cast<size_t>(page * 4 + t * 2 + 1)] = v1;
  };
  put(0, 0.0f, 0.0f, 0.0f);
  put(1, std::log(3.0f), 1.0f, 10.0f);
  put(2, 0.0f, 2.0f, 20.0f);
  const KvLayerView cache{kp.data(), vp.data(), nullptr, nullptr, PageGeometry::of(2), 1, 2};
  const std::vector<int32_t> table = {1, 0};
  // Two query tokens at positions 1 and 2, q = (1, 0), scale 1.
  const std::vector<float> q = {1, 0, 1, 0};
  const std::vector<int32_t> q_start = {0}, q_len = {2}, ctx = {3};
  const AttentionBatch batch{1, q_start.data(), q_len.data(), ctx.data(), table.data(), 2};
  std::vector<float> out(4);
  ref::paged_attention(q.data(), out.data(), 1, cache, batch, {1.0f});
  // Position 1 sees scores (0, ln 3): weights 1/4, 3/4. Position 2 sees (0, ln 3, 0): weights 1/5, 3/5, 1/5.
  EXPECT_NEAR(out[0], 0.75f, 1e-6f);
  EXPECT_NEAR(out[1], 7.5f, 1e-5f);
  EXPECT_NEAR(out[2], 3.0f / 5 + 2.0f / 5, 1e-6f);
  EXPECT_NEAR(out[3], 30.0f / 5 + 20.0f / 5, 1e-5f);
}

}  // namespace
}  // namespace minfer::kernels
