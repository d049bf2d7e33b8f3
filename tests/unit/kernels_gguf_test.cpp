// The GGUF block-type GEMM (Q4_0 ... Q6_K, IQ4_NL, IQ4_XS, MXFP4): every variant against the scalar reference on random
// blocks of awkward sizes, the reference against an f32 GEMM of the dequantized weights within the error the int8
// activations allow, activation quantization identical across variants, and embedding lookups of a quantized table.
// Dequantization itself is checked against gguf-py's numpy dequantizers (tests/e2e/test_gguf_quants.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/gguf_blocks.h"
#include "kernels/gguf_tiles.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_leaf.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::random_floats;

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q2_K,   DType::Q3_K,
                            DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

// Byte offsets of the f16 scales in a block of each type (the rest of a random block is any bytes).
std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {0};
  }
}

// n rows of k elements of random blocks with f16 scales in [-0.05, 0.05] (Q2_K / K-quant mins in [0, 0.05]).
Tensor random_blocks(std::mt19937& rng, DType type, int64_t n, int64_t k) {
  Tensor t = Tensor::allocate(type, {n, k});
  uint8_t* bytes = t.mutable_as<uint8_t>();
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(byte(rng));
  const BlockShape block = dtype_block(type);
  for (int64_t b = 0; b < n * k / block.elements; ++b) {
    if (type == DType::MXFP4) {  // an E8M0 scale byte: 2^-12 ... 2^0 (and the halving of the doubled values)
      bytes[b * block.bytes] = static_cast<uint8_t>(116 + byte(rng) % 13);
      continue;
    }
    for (int at : f16_fields(type)) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(bytes + b * block.bytes + at, &h, 2);
    }
  }
  return t;
}

std::vector<const QuantLeaves*> available_quant_leaves() {
  std::vector<const QuantLeaves*> out;
  for (Isa isa : kAllIsas)
    if (kernel_table(isa)) out.push_back(&quant_leaves(isa));
  return out;
}

struct QuantizedX {
  std::vector<int8_t> q;
  std::vector<float> d16, s16;
  std::vector<int32_t> sum16;
  Q8Blocks view() const { return {q.data(), d16.data(), s16.data(), sum16.data()}; }
};

QuantizedX quantize(const QuantLeaves& leaves, const std::vector<float>& x, int64_t m, int64_t k) {
  QuantizedX out{std::vector<int8_t>(static_cast<size_t>(m * k)), std::vector<float>(static_cast<size_t>(m * k / 16)),
                 std::vector<float>(static_cast<size_t>(m * k / 16)),
                 std::vector<int32_t>(static_cast<size_t>(m * k / 16))};
  leaves.quantize_q8(x.data(), m, k, out.q.data(), out.d16.data(), out.s16.data(), out.sum16.data());
  return out;
}

int64_t width_for(DType t, int i) {
  // Awkward widths: SmolLM2's 576 (not a multiple of 256) for 32-element blocks, 1 and 3 super-blocks for 256.
  if (dtype_block(t).elements == 32) return i == 0 ? 576 : 96;
  return i == 0 ? 768 : 256;
}

// Every variant's activation quantization gives the reference's bits, and its GEMM the reference's sums up to the
// order of the f32 combination, on column ranges split mid-matrix and a last group of fewer than four rows.
TEST(GemmGguf, VariantsMatchTheReference) {
  std::mt19937 rng(11);
  const int64_t n = 39;
  for (DType type : kTypes) {
    for (int wi = 0; wi < 2; ++wi) {
      const int64_t k = width_for(type, wi);
      const Tensor w = random_blocks(rng, type, n, k);
      const auto bias = random_floats(rng, static_cast<size_t>(n));
      for (int64_t m : {1, 2, 5, 17}) {
        auto xf = random_floats(rng, static_cast<size_t>(m * k));
        for (int64_t c = 0; c < 32; ++c) xf[static_cast<size_t>(c)] = 0.0f;  // an all-zero block: scale 0
        const QuantizedX ref_x = quantize(kRefQuantLeaves, xf, m, k);
        std::vector<float> want(static_cast<size_t>(m * n));
        kRefQuantLeaves.gguf_cols(ref_x.view(), m, k, type, w.as<uint8_t>(), n, bias.data(), want.data(), 0, n);
        for (const QuantLeaves* leaves : available_quant_leaves()) {
          const QuantizedX x = quantize(*leaves, xf, m, k);
          ASSERT_EQ(x.q, ref_x.q) << leaves->name;
          ASSERT_EQ(x.d16, ref_x.d16) << leaves->name;
          ASSERT_EQ(x.s16, ref_x.s16) << leaves->name;
          ASSERT_EQ(x.sum16, ref_x.sum16) << leaves->name;
          std::vector<float> got(want.size(), -1.0f);
          for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 12}, {12, 30}, {30, n}})
            leaves->gguf_cols(x.view(), m, k, type, w.as<uint8_t>(), n, bias.data(), got.data(), n0, n1);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i])))
                << leaves->name << " " << dtype_name(type) << " k " << k << " m " << m << " at " << i;
        }
      }
    }
  }
}

// The reference against an f32 GEMM of the dequantized weights: the only difference is the rounding of x to int8
// per block of 32 (at most half a step, d_x / 2, per element), so |error| <= sum |w| d_x / 2 (+ f32 rounding).
TEST(GemmGguf, ReferenceMatchesDequantizedGemmWithinTheActivationRounding) {
  std::mt19937 rng(5);
  const int64_t n = 21;
  for (DType type : kTypes) {
    const int64_t k = width_for(type, 0), m = 3;
    const Tensor w = random_blocks(rng, type, n, k);
    std::vector<float> wf(static_cast<size_t>(n * k));
    dequantize_rows(w, 0, n, wf.data());
    const auto xf = random_floats(rng, static_cast<size_t>(m * k));
    const QuantizedX x = quantize(kRefQuantLeaves, xf, m, k);
    std::vector<float> got(static_cast<size_t>(m * n));
    kRefQuantLeaves.gguf_cols(x.view(), m, k, type, w.as<uint8_t>(), n, nullptr, got.data(), 0, n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0.0, bound = 0.0;
        for (int64_t e = 0; e < k; ++e) {
          const double wv = wf[static_cast<size_t>(j * k + e)];
          exact += wv * xf[static_cast<size_t>(i * k + e)];
          bound += std::fabs(wv) * x.d16[static_cast<size_t>(i * (k / 16) + e / 16)] / 2;
        }
        EXPECT_NEAR(got[static_cast<size_t>(i * n + j)], exact, bound * 1.01 + 1e-4) << dtype_name(type);
      }
    }
  }
}

// The engine entry point: run_gemm on a block-type weight (threads, column chunks) equals the reference leaf.
TEST(GemmGguf, DriverOnThePoolMatchesTheReference) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const int64_t n = 203, k = 512, m = 9;
  for (DType type : {DType::Q4_K, DType::Q6_K, DType::Q4_1}) {
    const Tensor w = random_blocks(rng, type, n, k);
    const auto xf = random_floats(rng, static_cast<size_t>(m * k));
    const QuantizedX x = quantize(kRefQuantLeaves, xf, m, k);
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
    kRefQuantLeaves.gguf_cols(x.view(), m, k, type, w.as<uint8_t>(), n, nullptr, want.data(), 0, n);
    gemm_quantized(xf.data(), m, k, w, nullptr, got.data(), pool);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i])));
  }
}

constexpr DType kTileTypes[] = {DType::Q4_0, DType::Q4_1, DType::IQ4_NL, DType::Q4_K, DType::IQ4_XS, DType::Q5_0,
                                DType::Q5_1, DType::Q5_K, DType::Q6_K,   DType::Q8_0, DType::MXFP4};

// Y = X W^T computed the slow way: the weights dequantized by dequantize_rows (the file's values exactly), times the
// activations as quantized (q d per block), summed in double.
std::vector<float> dequantized_gemm(const Tensor& w, const QuantizedX& x, int64_t m, const std::vector<float>& bias) {
  const int64_t n = w.dim(0), k = w.dim(1);
  std::vector<float> wf(static_cast<size_t>(n * k)), y(static_cast<size_t>(m * n));
  dequantize_rows(w, 0, n, wf.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[static_cast<size_t>(j)];
      for (int64_t c = 0; c < k; ++c)
        sum += static_cast<double>(wf[static_cast<size_t>(j * k + c)]) * x.q[static_cast<size_t>(i * k + c)] *
               x.d16[static_cast<size_t>(i * k / 16 + c / 16)];
      y[static_cast<size_t>(i * n + j)] = static_cast<float>(sum);
    }
  }
  return y;
}

// The 16-row tiles hold the same weights: every row dequantizes to the original's bits (last tile padded).
TEST(GgufTiles, DequantizeToTheOriginalsBits) {
  std::mt19937 rng(8);
  for (DType type : kTileTypes) {
    const int64_t n = 37, k = width_for(type, 0);
    const Tensor w = random_blocks(rng, type, n, k);
    ThreadPool pool(2);
    const Tensor tiles = to_gguf_tiles(w, &pool);
    EXPECT_EQ(tiles.layout, TensorLayout::kGgufTiles16);
    std::vector<float> want(static_cast<size_t>(n * k)), got(want.size());
    dequantize_rows(w, 0, n, want.data());
    dequantize_rows(tiles, 0, n, got.data());
    EXPECT_EQ(got, want) << dtype_name(type);
  }
  EXPECT_THROW(to_gguf_tiles(random_blocks(rng, DType::Q3_K, 2, 256)), Error);
}

// Every variant that reads the tiles against the reference on the tiles, and the reference on the tiles against the
// row reference (the same int32 sums per block, f32 combined in another order): column ranges split mid-matrix, a
// last tile of 5 rows, m from 1 past the 8 activation rows of one AVX-512 pass; Q8_0 (no row kernel) against the
// dequantized product.
TEST(GgufTiles, VariantsMatchTheReference) {
  std::mt19937 rng(12);
  const int64_t n = 53;
  for (DType type : kTileTypes) {
    for (int wi = 0; wi < 2; ++wi) {
      const int64_t k = width_for(type, wi);
      const Tensor w = random_blocks(rng, type, n, k);
      const Tensor tiles = to_gguf_tiles(w);
      const auto bias = random_floats(rng, static_cast<size_t>(n));
      for (int64_t m : {1, 3, 4, 7, 9}) {  // the AVX-512 leaf passes over 8 activation rows at a time
        const auto xf = random_floats(rng, static_cast<size_t>(m * k));
        const QuantizedX x = quantize(kRefQuantLeaves, xf, m, k);
        std::vector<float> rows(static_cast<size_t>(m * n)), want(rows.size());
        if (type == DType::Q8_0) {  // no row kernel: Q8_0 rows run as int8 weights outside the tiles
          rows = dequantized_gemm(w, x, m, bias);
        } else {
          kRefQuantLeaves.gguf_cols(x.view(), m, k, type, w.as<uint8_t>(), n, bias.data(), rows.data(), 0, n);
        }
        kRefQuantLeaves.gguf_tiles_cols(x.view(), m, k, type, tiles.as<uint8_t>(), n, bias.data(), want.data(), 0, n);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(want[i], rows[i], 1e-4f * (1.0f + std::fabs(rows[i]))) << dtype_name(type) << " at " << i;
        for (const QuantLeaves* leaves : available_quant_leaves()) {
          if (!leaves->gguf_tiles_cols) continue;
          std::vector<float> got(want.size(), -1.0f);
          for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 16}, {16, 48}, {48, n}})
            leaves->gguf_tiles_cols(x.view(), m, k, type, tiles.as<uint8_t>(), n, bias.data(), got.data(), n0, n1);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i])))
                << leaves->name << " " << dtype_name(type) << " k " << k << " m " << m << " at " << i;
        }
      }
    }
  }
}

TEST(GemmGguf, EmbeddingLooksUpDequantizedRows) {
  std::mt19937 rng(2);
  const int64_t vocab = 10, dim = 256;
  const Tensor table = random_blocks(rng, DType::Q6_K, vocab, dim);
  std::vector<float> all(static_cast<size_t>(vocab * dim));
  dequantize_rows(table, 0, vocab, all.data());
  const int32_t ids[] = {9, 0, 4};
  std::vector<float> out(3 * dim);
  embedding(ids, 3, table, out.data());
  for (int t = 0; t < 3; ++t)
    for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(out[t * dim + c], all[ids[t] * dim + c]);
}

// Q4_0 by hand: d = 0.5, nibbles 0..15 -> 0.5 x (q - 8).
TEST(GgufBlocks, DecodesAQ4_0BlockByHand) {
  uint8_t block[18];
  const uint16_t d = f32_to_f16(0.5f);
  std::memcpy(block, &d, 2);
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  Tensor t;
  t.dtype = DType::Q4_0;
  t.shape = {1, 32};
  t.data = block;
  float out[32];
  dequantize_rows(t, 0, 1, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(out[16 + j], 0.5f * static_cast<float>(7 - j));
  }
}

TEST(GemmGguf, RejectsRowsThatAreNotWholeBlocks) {
  ThreadPool pool(1);
  Tensor w = Tensor::allocate(DType::Q4_0, {2, 64});
  w.shape = {2, 48};
  std::vector<float> x(48), y(2);
  EXPECT_THROW(gemm_quantized(x.data(), 1, 48, w, nullptr, y.data(), pool), Error);
}

}  // namespace
}  // namespace minfer::kernels
