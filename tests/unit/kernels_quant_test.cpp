// Int8 quantization and the quantized GEMM: round-trip error bounds, W8A8 bit-exact against the reference on
// every variant (exact int32 group sums, same fused epilogue), W8A16 and GGUF Q8_0 against float GEMMs of the
// dequantized weights, layouts and embedding lookups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_leaf.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::expect_close;
using testing::make_tensor;
using testing::random_floats;

std::vector<const QuantLeaves*> available_quant_leaves() {
  std::vector<const QuantLeaves*> out;
  for (Isa isa : kAllIsas) {
    if (kernel_table(isa)) out.push_back(&quant_leaves(isa));
  }
  return out;
}

std::vector<float> dequantized(const Tensor& w) {
  std::vector<float> out(static_cast<size_t>(w.numel()));
  dequantize_rows(w, 0, w.dim(0), out.data());
  return out;
}

// A GGUF Q8_0 matrix from float values (round to nearest, scale max|x| / 127 per block of 32).
Tensor make_q8_0(const std::vector<float>& v, int64_t n, int64_t k) {
  Tensor t = Tensor::allocate(DType::Q8_0, {n, k});
  uint8_t* out = t.mutable_as<uint8_t>();
  for (int64_t b = 0; b < n * k / 32; ++b) {
    float amax = 0.0f;
    for (int c = 0; c < 32; ++c) amax = std::max(amax, std::fabs(v[static_cast<size_t>(b * 32 + c)]));
    const uint16_t d = f32_to_f16(amax / 127.0f);
    const float inv = amax > 0 ? 1.0f / f16_to_f32(d) : 0.0f;
    std::memcpy(out + b * 34, &d, 2);
    for (int c = 0; c < 32; ++c)
      out[b * 34 + 2 + c] =
          static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(v[static_cast<size_t>(b * 32 + c)] * inv)));
  }
  return t;
}

TEST(QuantizeMatrix, RoundTripWithinHalfAStep) {
  std::mt19937 rng(1);
  for (int64_t group : {0, 32, 64, 128}) {
    for (bool symmetric : {true, false}) {
      const int64_t n = 7, k = 200;  // 200 is not a multiple of 64 or 128: a short last group
      const auto v = random_floats(rng, static_cast<size_t>(n * k), -2.0f, 3.0f);
      const Tensor w = make_tensor(v, {n, k}, DType::F32);
      const Tensor q = quantize_matrix(w, QuantScheme{.group_size = group, .symmetric = symmetric});
      ASSERT_TRUE(is_quantized(q));
      const auto back = dequantized(q);
      const QuantParams& p = *q.quant;
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const float step = p.scales.as<float>()[r * p.groups + c / p.group_size];
          const size_t i = static_cast<size_t>(r * k + c);
          ASSERT_LE(std::fabs(back[i] - v[i]), 0.5f * step * 1.0001f + 1e-7f)
              << "group " << group << " symmetric " << symmetric << " at " << r << "," << c;
        }
      }
      // The panel layout holds the same values.
      const Tensor packed = relayout(q, true);
      EXPECT_EQ(dequantized(packed), back);
      EXPECT_EQ(dequantized(relayout(packed, false)), back);
    }
  }
}

TEST(QuantizeMatrix, ZeroRowsAndBadSchemes) {
  const Tensor w = make_tensor(std::vector<float>(64, 0.0f), {2, 32}, DType::BF16);
  const Tensor q = quantize_matrix(w, QuantScheme{});
  for (float x : dequantized(q)) EXPECT_EQ(x, 0.0f);
  EXPECT_THROW(quantize_matrix(w, QuantScheme{.group_size = 30}), Error);
  EXPECT_THROW(quantize_matrix(make_tensor({1, 2, 3}, {3}, DType::F32), QuantScheme{}), Error);
}

// W8A8: every variant's quantized activations and int32 sums are exact, and the epilogue is the same sequence of
// fused multiply-adds, so the outputs must be identical bits, for awkward sizes, groups and zero points.
TEST(GemmW8A8, EveryVariantMatchesTheReferenceExactly) {
  std::mt19937 rng(2);
  ThreadPool pool(3);
  for (int64_t group : {0, 32, 64}) {
    for (bool symmetric : {true, false}) {
      for (int64_t k : {1, 5, 31, 67, 130}) {
        for (int64_t n : {1, 15, 17, 70}) {
          const auto wv = random_floats(rng, static_cast<size_t>(n * k));
          const Tensor w =
              quantize_matrix(make_tensor(wv, {n, k}, DType::F32),
                              QuantScheme{.group_size = group, .symmetric = symmetric, .int8_activations = true});
          const auto bias = random_floats(rng, static_cast<size_t>(n));
          for (int64_t m : {1, 2, 3, 7, 13}) {
            const auto x = random_floats(rng, static_cast<size_t>(m * k), -4.0f, 4.0f);
            std::vector<float> want(static_cast<size_t>(m * n));
            run_gemm_quantized(kRefQuantLeaves, x.data(), m, k, w, bias.data(), want.data(), pool);
            for (const QuantLeaves* leaves : available_quant_leaves()) {
              std::vector<float> got(static_cast<size_t>(m * n), -1.0f);
              run_gemm_quantized(*leaves, x.data(), m, k, w, bias.data(), got.data(), pool);
              size_t bad = 0;
              while (bad < got.size() && std::memcmp(&got[bad], &want[bad], sizeof(float)) == 0) ++bad;
              ASSERT_EQ(bad, got.size()) << "got " << got[bad] << " want " << want[bad] << " " << leaves->name
                                         << " m=" << m << " n=" << n << " k=" << k << " group " << group
                                         << " symmetric " << symmetric;
            }
          }
        }
      }
    }
  }
}

// The reference W8A8 is the exact product of the quantized operands: int32 dot products in 64-bit arithmetic.
TEST(GemmW8A8, ReferenceIsTheExactIntegerProduct) {
  std::mt19937 rng(3);
  ThreadPool pool(1);
  const int64_t m = 3, n = 5, k = 257;
  const auto wv = random_floats(rng, static_cast<size_t>(n * k));
  const auto x = random_floats(rng, static_cast<size_t>(m * k));
  const Tensor w = quantize_matrix(make_tensor(wv, {n, k}, DType::F32), QuantScheme{.int8_activations = true});
  const Tensor wr = relayout(w, false);
  std::vector<float> y(static_cast<size_t>(m * n));
  run_gemm_quantized(kRefQuantLeaves, x.data(), m, k, w, nullptr, y.data(), pool);
  for (int64_t i = 0; i < m; ++i) {
    float amax = 0.0f;
    for (int64_t p = 0; p < k; ++p) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(i * k + p)]));
    for (int64_t j = 0; j < n; ++j) {
      int64_t dot = 0;
      for (int64_t p = 0; p < k; ++p) {
        const int64_t xq = static_cast<int64_t>(std::nearbyint(x[static_cast<size_t>(i * k + p)] * (127.0f / amax)));
        dot += xq * wr.as<int8_t>()[j * k + p];
      }
      const float want =
          std::fma(std::fma(static_cast<float>(dot), wr.quant->scales.as<float>()[j], 0.0f), amax / 127.0f, 0.0f);
      EXPECT_EQ(y[static_cast<size_t>(i * n + j)], want) << i << "," << j;
    }
  }
}

// W8A8 against the float GEMM: the error is the activation and weight rounding, a few percent at most.
TEST(GemmW8A8, CloseToTheFloatProduct) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const int64_t m = 9, n = 40, k = 300;
  const auto wv = random_floats(rng, static_cast<size_t>(n * k));
  const auto x = random_floats(rng, static_cast<size_t>(m * k));
  const Tensor wf = make_tensor(wv, {n, k}, DType::F32);
  std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
  ref::gemm(x.data(), m, k, wf, nullptr, want.data());
  gemm(x.data(), m, k, quantize_matrix(wf, QuantScheme{.group_size = 32, .int8_activations = true}), nullptr,
       got.data(), pool);
  // Scale of a dot product of k terms of size ~1/3: sqrt(k)/3.
  expect_close(got, want, 0.0f, 0.05f * std::sqrt(static_cast<float>(k)) / 3.0f, "w8a8 vs f32");
}

// W8A16: variants against the reference leaf, which is the float GEMM of the dequantized weights (up to the
// summation order). Covers the decode tiles (m < 32) and the dequantized-slab path (m >= 32).
TEST(GemmW8A16, VariantsMatchTheDequantizedFloatGemm) {
  std::mt19937 rng(5);
  ThreadPool pool(3);
  for (int64_t group : {0, 32, 128}) {
    for (bool symmetric : {true, false}) {
      for (int64_t k : {3, 33, 200}) {
        const int64_t n = 45;
        const auto wv = random_floats(rng, static_cast<size_t>(n * k));
        const Tensor w = quantize_matrix(make_tensor(wv, {n, k}, DType::BF16),
                                         QuantScheme{.group_size = group, .symmetric = symmetric});
        const Tensor deq = make_tensor(dequantized(w), {n, k}, DType::F32);
        const auto bias = random_floats(rng, static_cast<size_t>(n));
        for (int64_t m : {1, 2, 5, 40}) {
          const auto x = random_floats(rng, static_cast<size_t>(m * k));
          std::vector<float> want(static_cast<size_t>(m * n));
          ref::gemm(x.data(), m, k, deq, bias.data(), want.data());
          for (const QuantLeaves* leaves : available_quant_leaves()) {
            std::vector<float> got(want.size());
            run_gemm_quantized(*leaves, x.data(), m, k, w, bias.data(), got.data(), pool);
            expect_close(got, want, 1e-5f, 1e-5f * static_cast<float>(k),
                         std::string(leaves->name) + " m=" + std::to_string(m) + " k=" + std::to_string(k));
          }
        }
      }
    }
  }
}

// W8A16 prefill on CPUs with bf16 dot products: per-channel symmetric weights from 64 rows of x go through the
// packed bf16 GEMM (x rounded to bf16, int8 -> bf16 exact, the scale applied to the finished sum), so the oracle
// is the float GEMM of bf16-rounded x and the dequantized weights. Other schemes keep the f32 slab path.
TEST(GemmW8A16, PrefillOnThePackedBf16Form) {
  if (!kernel_table(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  const QuantLeaves& leaves = quant_leaves(Isa::kAvx512Bf16);
  ASSERT_NE(leaves.w8a16_bf16_cols, nullptr);
  std::mt19937 rng(9);
  ThreadPool pool(2);
  for (int64_t k : {3, 33, 600, 1031}) {
    for (int64_t n : {45, 83}) {
      const auto wv = random_floats(rng, static_cast<size_t>(n * k));
      const Tensor w = quantize_matrix(make_tensor(wv, {n, k}, DType::BF16), QuantScheme{});
      const Tensor deq = make_tensor(dequantized(w), {n, k}, DType::F32);
      const auto bias = random_floats(rng, static_cast<size_t>(n));
      for (int64_t m : {64, 70, 200}) {
        auto x = random_floats(rng, static_cast<size_t>(m * k));
        std::vector<float> xr(x.size());
        for (size_t i = 0; i < x.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
        std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), -7.0f);
        ref::gemm(xr.data(), m, k, deq, bias.data(), want.data());
        run_gemm_quantized(leaves, x.data(), m, k, w, bias.data(), got.data(), pool);
        expect_close(
            got, want, 1e-5f, 1e-5f * static_cast<float>(k),
            "w8a16 bf16 packed m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
      }
    }
  }
}

TEST(GemmQ8_0, ReadsBlocksDirectlyAndMatchesRows) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  ThreadPool one(1);  // one call over all rows: whole 16-row tiles with their two-ahead requests, then the tail
  const int64_t n = 157, k = 96;
  const Tensor q = make_q8_0(random_floats(rng, static_cast<size_t>(n * k)), n, k);
  const Tensor rows = q8_0_to_rows(q);
  const Tensor tiles = to_q8_0_tiles(q);  // 9 whole tiles of 16 rows and a last one of 13
  EXPECT_EQ(dequantized(q), dequantized(rows));
  EXPECT_EQ(dequantized(q), dequantized(tiles));
  EXPECT_EQ(dequantized(q), dequantized(q8_0_to_rows(tiles)));
  const Tensor deq = make_tensor(dequantized(q), {n, k}, DType::F32);
  for (int64_t m : {1, 2, 3, 4, 5, 33}) {
    const auto x = random_floats(rng, static_cast<size_t>(m * k));
    std::vector<float> want(static_cast<size_t>(m * n));
    ref::gemm(x.data(), m, k, deq, nullptr, want.data());
    for (const QuantLeaves* leaves : available_quant_leaves()) {
      for (const Tensor* w : {&q, &tiles}) {
        const bool tiled = w == &tiles;
        const std::string what = std::string(tiled ? "q8_0 tiles " : "q8_0 ") + leaves->name;
        // Tiles take X in int16 blocks: each x off by at most 1/65534 of its block's max (|x|, |w| <= 1 here).
        const float atol = tiled ? static_cast<float>(k) / 65534.0f : 1e-4f;
        std::vector<float> got(want.size());
        run_gemm_quantized(*leaves, x.data(), m, k, *w, nullptr, got.data(), pool);
        expect_close(got, want, 1e-5f, atol, what);
        std::fill(got.begin(), got.end(), 0.0f);
        run_gemm_quantized(*leaves, x.data(), m, k, *w, nullptr, got.data(), one);
        expect_close(got, want, 1e-5f, atol, what + " one thread");
      }
    }
    // The public entry point routes Q8_0 and W8A8-packed Q8_0 as well.
    std::vector<float> got(want.size());
    gemm(x.data(), m, k, q, nullptr, got.data(), pool);
    expect_close(got, want, 1e-5f, 1e-4f, "kernels::gemm q8_0");
    gemm(x.data(), m, k, relayout(q, true), nullptr, got.data(), pool);
    expect_close(got, want, 0.0f, 0.05f, "kernels::gemm q8_0 as w8a8");
  }
}

// kQ8_0Tiles16 puts every scale and weight where tensor/q8_0_tiles.h says: tile t's block g is 544 bytes at
// (t * blocks + g) * 544, its 16 rows' f16 scales first, then column pair p of row j at 32 + p * 32 + j * 2; the
// last tile is padded with zero rows.
TEST(GemmQ8_0, TilesPutEachWeightWhereTheLayoutSays) {
  std::mt19937 rng(8);
  for (const int64_t n : {1, 15, 16, 17, 40}) {
    const int64_t k = 64, blocks = 2;
    const Tensor q = make_q8_0(random_floats(rng, static_cast<size_t>(n * k)), n, k);
    const Tensor t = to_q8_0_tiles(q);
    ASSERT_EQ(t.layout, TensorLayout::kQ8_0Tiles16);
    ASSERT_EQ(t.nbytes(), static_cast<size_t>((n + 15) / 16 * blocks * 544));
    const uint8_t* out = t.as<uint8_t>();
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < blocks; ++g) {
        const uint8_t* block = q.as<uint8_t>() + (r * blocks + g) * 34;
        const uint8_t* tile_block = out + ((r / 16) * blocks + g) * 544;
        ASSERT_EQ(std::memcmp(tile_block + (r % 16) * 2, block, 2), 0) << "scale of row " << r;
        for (int64_t c = 0; c < 32; ++c)
          ASSERT_EQ(tile_block[32 + (c / 2) * 32 + (r % 16) * 2 + c % 2], block[2 + c]) << "row " << r << " col " << c;
      }
    }
    for (int64_t r = n; r < (n + 15) / 16 * 16; ++r) {  // padding rows: zero scales and weights
      for (int64_t g = 0; g < blocks; ++g) {
        const uint8_t* tile_block = out + ((r / 16) * blocks + g) * 544;
        EXPECT_EQ(tile_block[(r % 16) * 2] | tile_block[(r % 16) * 2 + 1], 0);
        for (int64_t p = 0; p < 16; ++p) EXPECT_EQ(tile_block[32 + p * 32 + (r % 16) * 2], 0);
      }
    }
  }
  EXPECT_THROW(to_q8_0_tiles(to_q8_0_tiles(make_q8_0(std::vector<float>(64), 2, 32))), Error);
  EXPECT_THROW(to_q8_0_tiles(make_tensor(std::vector<float>(64), {2, 32}, DType::F32)), Error);
}

// At load the tiles are split across the engine's pool: the same bytes as one thread, for a last partial tile and
// for a matrix past 2 MiB (its buffer comes from fresh zeroed pages: the padding rows must still read as zero).
TEST(GemmQ8_0, TilesOnAPoolAreTheSameBytes) {
  std::mt19937 rng(10);
  ThreadPool pool(3);
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{157, 96}, {4001, 608}}) {
    const Tensor q = make_q8_0(random_floats(rng, static_cast<size_t>(n * k)), n, k);
    const Tensor serial = to_q8_0_tiles(q);
    const Tensor split = to_q8_0_tiles(q, &pool);
    ASSERT_EQ(split.nbytes(), serial.nbytes());
    EXPECT_EQ(std::memcmp(split.data, serial.data, serial.nbytes()), 0) << n << " x " << k;
  }
}

// The int16 x int8 tile kernels: exact int32 block sums combined by the same fused multiply-adds, so every variant
// gives the reference's bits, on awkward sizes (a last tile of 13 rows, column ranges split mid-matrix).
TEST(GemmQ8_0, TileVariantsMatchTheReferenceExactly) {
  std::mt19937 rng(9);
  const int64_t n = 157, k = 160;
  const Tensor tiles = to_q8_0_tiles(make_q8_0(random_floats(rng, static_cast<size_t>(n * k)), n, k));
  const auto bias = random_floats(rng, static_cast<size_t>(n));
  for (int64_t m : {1, 2, 3, 5, 9, 17, 70}) {
    auto xf = random_floats(rng, static_cast<size_t>(m * k));
    for (int64_t c = 0; c < 32; ++c) xf[static_cast<size_t>(c)] = 0.0f;  // an all-zero block: scale 0
    std::vector<int16_t> q_ref(static_cast<size_t>(m * k));
    std::vector<float> s_ref(static_cast<size_t>(m * k / 32));
    kRefQuantLeaves.quantize_int16(xf.data(), m, k, q_ref.data(), s_ref.data());
    std::vector<float> want(static_cast<size_t>(m * n));
    kRefQuantLeaves.q8_0_tiles_cols({q_ref.data(), s_ref.data()}, m, k, tiles.as<uint8_t>(), n, bias.data(),
                                    want.data(), 0, n);
    for (const QuantLeaves* leaves : available_quant_leaves()) {
      std::vector<int16_t> q(q_ref.size());
      std::vector<float> s(s_ref.size());
      leaves->quantize_int16(xf.data(), m, k, q.data(), s.data());
      EXPECT_EQ(q, q_ref) << leaves->name;
      EXPECT_EQ(s, s_ref) << leaves->name;
      std::vector<float> got(want.size(), -1.0f);
      for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 48}, {48, 144}, {144, n}})
        leaves->q8_0_tiles_cols({q.data(), s.data()}, m, k, tiles.as<uint8_t>(), n, bias.data(), got.data(), n0, n1);
      EXPECT_EQ(got, want) << leaves->name << " m " << m;
    }
  }
}

TEST(EmbeddingQuantized, LooksUpDequantizedRows) {
  std::mt19937 rng(7);
  const int64_t vocab = 20, dim = 64;
  const Tensor table = quantize_matrix(make_tensor(random_floats(rng, vocab * dim), {vocab, dim}, DType::F32),
                                       QuantScheme{.group_size = 32, .int8_activations = true});
  const auto all = dequantized(table);
  const int32_t ids[] = {3, 0, 19, 3};
  std::vector<float> out(4 * dim);
  embedding(ids, 4, table, out.data());
  for (int t = 0; t < 4; ++t)
    for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(out[t * dim + c], all[ids[t] * dim + c]);
}

TEST(QuantizedGemm, RejectsMismatchedShapes) {
  ThreadPool pool(1);
  const Tensor w = quantize_matrix(make_tensor(std::vector<float>(64, 1.0f), {2, 32}, DType::F32), QuantScheme{});
  std::vector<float> x(31), y(2);
  EXPECT_THROW(gemm(x.data(), 1, 31, w, nullptr, y.data(), pool), Error);
}

}  // namespace
}  // namespace minfer::kernels
