// Every GEMM variant (each ISA's table, and each of its two strategies directly) against the scalar reference
// on random inputs of awkward sizes, weight types and column ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/half.h"
#include "kernels/onednn_gemm.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/x86/x86_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::make_tensor;
using testing::random_floats;

constexpr DType kWeightTypes[] = {DType::F32, DType::F16, DType::BF16};

struct Problem {
  int64_t m, k, n;
  std::vector<float> x, bias;
  Tensor w;
  std::vector<float> want;   // the reference result
  std::vector<float> scale;  // sum_k |x w| + |bias|: the size the rounding error is relative to
  // The reference of the bf16-activation GEMM (avx512_bf16 table, bf16 weights): X rounded to bf16 first.
  std::vector<float> want_bf16_x;
};

std::vector<float> rounded_to_bf16(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return r;
}

Problem make_problem(std::mt19937& rng, int64_t m, int64_t k, int64_t n, DType dtype, bool with_bias) {
  Problem p{m, k, n, random_floats(rng, static_cast<size_t>(m * k)), {}, {}, {}, {}, {}};
  p.w = make_tensor(random_floats(rng, static_cast<size_t>(n * k)), {n, k}, dtype);
  if (with_bias) p.bias = random_floats(rng, static_cast<size_t>(n));
  p.want.assign(static_cast<size_t>(m * n), 0.0f);
  ref::gemm(p.x.data(), m, k, p.w, with_bias ? p.bias.data() : nullptr, p.want.data());
  p.want_bf16_x.assign(p.want.size(), 0.0f);
  ref::gemm(rounded_to_bf16(p.x).data(), m, k, p.w, with_bias ? p.bias.data() : nullptr, p.want_bf16_x.data());
  const Tensor wf = to_f32(p.w);
  p.scale.assign(p.want.size(), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = with_bias ? std::fabs(p.bias[static_cast<size_t>(j)]) : 0.0;
      for (int64_t q = 0; q < k; ++q) s += std::fabs(p.x[static_cast<size_t>(i * k + q)] * wf.as<float>()[j * k + q]);
      p.scale[static_cast<size_t>(i * n + j)] = static_cast<float>(s);
    }
  }
  return p;
}

// f32 accumulation in another order: the error grows like sqrt(k) times the sum of |terms|.
float rtol_for(int64_t k) { return 1e-6f * std::sqrt(static_cast<float>(k)) + 1e-6f; }

// What table t must produce: bf16 weights on the bf16-activation table see X rounded to bf16.
const std::vector<float>& expected(const Problem& p, const KernelTable* t) {
  return t->isa == Isa::kAvx512Bf16 && p.w.dtype == DType::BF16 ? p.want_bf16_x : p.want;
}

std::string label(const char* variant, const Problem& p, DType dtype, bool bias) {
  return std::string(variant) + " m=" + std::to_string(p.m) + " k=" + std::to_string(p.k) +
         " n=" + std::to_string(p.n) + " " + std::string(dtype_name(dtype)) + (bias ? " +bias" : "");
}

TEST(KernelsGemm, EveryTableMatchesReference) {
  std::mt19937 rng(1234);
  ThreadPool pool(2);
  for (int64_t m : {1, 2, 3, 5, 17, 33}) {
    for (int64_t k : {1, 7, 31, 64, 100, 257, 896}) {
      for (int64_t n : {1, 3, 15, 17, 100, 129}) {
        for (DType dtype : kWeightTypes) {
          for (bool bias : {false, true}) {
            const Problem p = make_problem(rng, m, k, n, dtype, bias);
            for (const KernelTable* t : available_tables()) {
              std::vector<float> y(p.want.size(), NAN);
              t->gemm(p.x.data(), m, k, p.w, bias ? p.bias.data() : nullptr, y.data(), pool);
              expect_close(y, expected(p, t), rtol_for(k), 1e-30f, label(t->name, p, dtype, bias), &p.scale);
            }
          }
        }
      }
    }
  }
}

TEST(KernelsGemm, LargerShapesAcrossThreads) {
  // Row blocks of the packed form (more rows than one block), k blocks, and the thread split of columns.
  std::mt19937 rng(99);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{300, 600, 70},
                           {64, 896, 200},
                           {8, 1000, 257},
                           {4, 4864, 96},
                           {1, 896, 1152}}) {
      for (DType dtype : kWeightTypes) {
        const Problem p = make_problem(rng, m, k, n, dtype, true);
        for (const KernelTable* t : available_tables()) {
          std::vector<float> y(p.want.size(), NAN);
          t->gemm(p.x.data(), m, k, p.w, p.bias.data(), y.data(), pool);
          expect_close(y, expected(p, t), rtol_for(k), 1e-30f,
                       label(t->name, p, dtype, true) + " threads " + std::to_string(threads), &p.scale);
        }
      }
    }
  }
}

using ColsFn = void (*)(const float*, int64_t, int64_t, const void*, DType, int64_t, const float*, float*, int64_t,
                        int64_t);

// Both strategies of each ISA for every m (not just the m the dispatcher gives them), on a column range that
// starts and ends off the tile grid; columns outside the range must stay untouched.
TEST(KernelsGemm, BothStrategiesOnColumnRanges) {
  struct Variant {
    const char* name;
    bool supported;
    ColsFn fn;
  };
  const CpuFeatures& f = cpu_features();
  const bool has512 = kernel_table(Isa::kAvx512) != nullptr;
  const Variant variants[] = {
      {"avx2 dot", f.has_avx2_fma(), avx2::gemm_cols_dot},
      {"avx2 packed", f.has_avx2_fma(), avx2::gemm_cols_packed},
      {"avx512 dot", has512, avx512::gemm_cols_dot},
      {"avx512 packed", has512, avx512::gemm_cols_packed},
  };
  std::mt19937 rng(7);
  for (int64_t m : {1, 2, 3, 4, 5, 8, 13, 25}) {
    for (int64_t k : {1, 15, 17, 300}) {
      for (DType dtype : kWeightTypes) {
        const int64_t n = 83;
        const int64_t n0 = 5;
        const int64_t n1 = 78;
        const Problem p = make_problem(rng, m, k, n, dtype, true);
        for (const Variant& v : variants) {
          if (!v.supported) continue;
          std::vector<float> y(p.want.size(), -7.0f);
          v.fn(p.x.data(), m, k, p.w.data, dtype, n, p.bias.data(), y.data(), n0, n1);
          std::vector<float> want = p.want;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              if (j < n0 || j >= n1) want[static_cast<size_t>(i * n + j)] = -7.0f;
            }
          }
          expect_close(y, want, rtol_for(k), 1e-30f, label(v.name, p, dtype, true), &p.scale);
        }
      }
    }
  }
}

// The AVX-512-BF16 strategies directly, for every m (each strategy, not just the m the dispatcher gives it),
// against the reference on bf16-rounded X: awkward k (odd, past a 32-element block, past the packed form's k
// block of 512) and a column range off the tile grid, whose outside must stay untouched.
TEST(KernelsGemm, Bf16ActivationStrategiesOnColumnRanges) {
  if (!kernel_table(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  const std::pair<const char*, GemmBf16ColsFn> variants[] = {{"avx512_bf16 dot", avx512::gemm_bf16_cols_dot},
                                                             {"avx512_bf16 packed", avx512::gemm_bf16_cols_packed}};
  std::mt19937 rng(11);
  for (int64_t m : {1, 2, 3, 4, 5, 7, 13, 25, 40}) {
    for (int64_t k : {1, 2, 31, 33, 64, 95, 600, 1031}) {
      const int64_t n = 83, n0 = 5, n1 = 78;
      const Problem p = make_problem(rng, m, k, n, DType::BF16, true);
      const int64_t ldxb = (k + 31) / 32 * 32;
      std::vector<uint16_t> xb(static_cast<size_t>(m * ldxb), 0xffff);  // the rounding must write the padding
      avx512::bf16_round_rows(p.x.data(), m, k, xb.data(), ldxb);
      std::vector<float> want = p.want_bf16_x;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          if (j < n0 || j >= n1) want[static_cast<size_t>(i * n + j)] = -7.0f;
        }
      }
      for (const auto& [name, fn] : variants) {
        std::vector<float> y(p.want.size(), -7.0f);
        fn(xb.data(), ldxb, m, k, static_cast<const uint16_t*>(p.w.data), n, p.bias.data(), y.data(), n0, n1);
        expect_close(y, want, rtol_for(k), 1e-30f, label(name, p, DType::BF16, true), &p.scale);
      }
    }
  }
}

// Which rows of blocked bf16 weights go to oneDNN: with AMX every count from 8 on; without, 8-11 and past 64
// (the own block-major loop takes batched decode); never below 8 (the own GEMV streams the weights).
TEST(KernelsGemm, OneDnnRowsByAmx) {
  for (int64_t m : {1, 7}) EXPECT_FALSE(onednn_takes_rows(m, true) || onednn_takes_rows(m, false)) << m;
  for (int64_t m : {8, 11, 65, 512}) EXPECT_TRUE(onednn_takes_rows(m, true) && onednn_takes_rows(m, false)) << m;
  for (int64_t m : {12, 32, 64}) EXPECT_TRUE(onednn_takes_rows(m, true) && !onednn_takes_rows(m, false)) << m;
  EXPECT_EQ(onednn_takes_rows(32), onednn_takes_rows(32, cpu_features().amx_bf16));
  // oneDNN is capped to what minfer detected: no AMX kernel unless AMX is on (MINFER_ISA=avx512_bf16 turns it off).
  if (!cpu_features().amx_bf16) {
    EXPECT_EQ(std::string(onednn_gemm_impl(128, 1024, 1024)).find("amx"), std::string::npos);
  }
}

// The blocked layout (oneDNN's BA16a64b2a): to_bf16_blocked puts every element where that format says (and zero
// padding); the own GEMV (any m) and oneDNN's matmul (m from kOneDnnMinRows on, given whole row buckets), each
// directly on column ranges (n0 on the 64-row grid, n1 anywhere), and the dispatcher on the pool (GEMV or oneDNN
// by m) match the reference on bf16-rounded X. k covers odd sizes, a partial 16-column sub-block and a partial
// 32-column pad (and k segments of the block-major loop: 600 and 1100); m covers the one-pass row counts, the
// block-major loop's balanced row groups (9, 13, 32, 64, 70), oneDNN's row counts and a padded row bucket.
TEST(KernelsGemm, Bf16BlockedMatchesReference) {
  if (!kernel_table(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  std::mt19937 rng(12);
  ThreadPool pool(2);
  for (int64_t m : {1, 2, 3, 4, 5, 7, 9, 13, 32, 64, 70}) {
    for (int64_t k : {1, 17, 31, 33, 95, 600, 1100}) {
      for (int64_t n : {5, 64, 83, 200}) {
        const Problem p = make_problem(rng, m, k, n, DType::BF16, true);
        const Tensor blocked = to_bf16_blocked(p.w);
        ASSERT_EQ(blocked.layout, TensorLayout::kBf16Blocked64);
        const int64_t kp = (k + 31) / 32 * 32, np = (n + 63) / 64 * 64;
        ASSERT_EQ(blocked.nbytes(), static_cast<size_t>(np * kp * 2));
        if (m == 1) {
          for (int64_t r = 0; r < np; ++r) {
            for (int64_t c = 0; c < kp; ++c) {
              const size_t at =
                  static_cast<size_t>((r / 64) * 64 * kp + (c / 16) * 1024 + (c % 16) / 2 * 128 + (r % 64) * 2 + c % 2);
              const uint16_t want = r < n && c < k ? p.w.as<uint16_t>()[r * k + c] : 0;
              ASSERT_EQ(blocked.as<uint16_t>()[at], want) << "row " << r << " col " << c;
            }
          }
        }
        const int64_t ldxb = kp;
        std::vector<uint16_t> xb(static_cast<size_t>(onednn_rows(m) * ldxb), 0);
        avx512::bf16_round_rows(p.x.data(), m, k, xb.data(), ldxb);
        const int64_t n0 = n > 64 ? 64 : 0, n1 = n > 64 ? n - 2 : n;
        std::vector<float> want = p.want_bf16_x;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            if (j < n0 || j >= n1) want[static_cast<size_t>(i * n + j)] = -7.0f;
          }
        }
        std::vector<float> y(p.want.size(), -7.0f);
        avx512::gemm_bf16_blocked_cols(xb.data(), ldxb, m, k, blocked.as<uint16_t>(), n, p.bias.data(), y.data(), n0,
                                       n1);
        expect_close(y, want, rtol_for(k), 1e-30f, label("avx512_bf16 blocked GEMV", p, DType::BF16, true), &p.scale);
        if (m >= kOneDnnMinRows) {  // every m oneDNN may be given, not only those onednn_takes_rows picks
          std::vector<float> yd(p.want.size(), -7.0f);
          onednn_gemm_bf16_blocked_cols(xb.data(), ldxb, m, k, blocked.as<uint16_t>(), n, p.bias.data(), yd.data(), n0,
                                        n1);
          expect_close(yd, want, rtol_for(k), 1e-30f, label("oneDNN blocked", p, DType::BF16, true), &p.scale);
        }
        std::vector<float> whole(p.want.size(), -7.0f);
        kernel_table(Isa::kAvx512Bf16)->gemm(p.x.data(), m, k, blocked, p.bias.data(), whole.data(), pool);
        expect_close(whole, p.want_bf16_x, rtol_for(k), 1e-30f, label("blocked via table", p, DType::BF16, true),
                     &p.scale);
      }
    }
  }
  // Only the AVX-512-BF16 GEMM reads the layout; the others refuse it.
  const Problem p = make_problem(rng, 2, 40, 16, DType::BF16, false);
  const Tensor blocked = to_bf16_blocked(p.w);
  std::vector<float> y(32);
  EXPECT_THROW(kernel_table(Isa::kScalar)->gemm(p.x.data(), 2, 40, blocked, nullptr, y.data(), pool), Error);
  EXPECT_THROW(to_bf16_blocked(to_f32(p.w)), Error);
}

// At load the 64-row blocks are split across the engine's pool: the same bytes as one thread, for a partial last
// block and odd k, and for a matrix past 2 MiB (fresh zeroed pages: its padding must still read as zero).
TEST(KernelsGemm, Bf16BlockedOnAPoolIsTheSameBytes) {
  std::mt19937 rng(13);
  ThreadPool pool(3);
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{200, 95}, {1100, 1001}}) {
    const Problem p = make_problem(rng, 1, k, n, DType::BF16, false);
    const Tensor serial = to_bf16_blocked(p.w);
    const Tensor split = to_bf16_blocked(p.w, &pool);
    ASSERT_EQ(split.nbytes(), serial.nbytes());
    EXPECT_EQ(std::memcmp(split.data, serial.data, serial.nbytes()), 0) << n << " x " << k;
  }
}

// Row buckets for oneDNN: never fewer rows than asked, exact up to 64, and few distinct shapes up to the largest
// prefill chunk (each is a JIT-compiled primitive per thread).
TEST(KernelsGemm, OneDnnRowBuckets) {
  std::set<int64_t> shapes;
  for (int64_t m = 1; m <= 8192; ++m) {
    const int64_t rows = onednn_rows(m);
    ASSERT_GE(rows, m);
    if (m <= 64) {
      ASSERT_EQ(rows, m);
    }
    ASSERT_LE(rows - m, std::max<int64_t>(15, m / 8)) << m;  // at most 1/5 padding from 65 rows on
    shapes.insert(rows);
  }
  EXPECT_LE(shapes.size(), 64u + 28u + 120u);
}

// oneDNN's matmul from several threads at once (each keeps its own primitives and scratch), on shapes the other
// threads also use, against the reference.
TEST(KernelsGemm, OneDnnFromManyThreads) {
  if (!kernel_table(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  std::mt19937 rng(13);
  const int64_t k = 96, n = 192;
  std::vector<Problem> problems;
  for (int64_t m : {5, 16, 33, 100}) problems.push_back(make_problem(rng, m, k, n, DType::BF16, false));
  std::vector<Tensor> blocked;
  for (const Problem& p : problems) blocked.push_back(to_bf16_blocked(p.w));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const size_t i = static_cast<size_t>((t + round) % 4);
        const Problem& p = problems[i];
        const int64_t m = p.m;
        std::vector<uint16_t> xb(static_cast<size_t>(onednn_rows(m) * k), 0);
        avx512::bf16_round_rows(p.x.data(), m, k, xb.data(), k);
        std::vector<float> y(p.want.size());
        onednn_gemm_bf16_blocked_cols(xb.data(), k, m, k, blocked[i].as<uint16_t>(), n, nullptr, y.data(), 0, n);
        for (size_t e = 0; e < y.size(); ++e) {
          if (std::fabs(y[e] - p.want_bf16_x[e]) > 1e-4f * (1.0f + p.scale[e])) ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(KernelsGemm, Bf16RoundingMatchesScalar) {
  if (!kernel_table(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  // Ties to even, both directions, signs, large and small magnitudes, inf.
  std::vector<float> x = {1.0f, -2.5f, 1.00390625f, 1.01171875f, -1.00390625f, 3.0e38f, -1e-30f, 65504.0f, INFINITY};
  for (int i = 0; i < 40; ++i) x.push_back(static_cast<float>(i) * 0.3337f - 5.0f);
  const int64_t k = static_cast<int64_t>(x.size()), ldxb = (k + 31) / 32 * 32;
  std::vector<uint16_t> xb(static_cast<size_t>(ldxb), 0xffff);
  avx512::bf16_round_rows(x.data(), 1, k, xb.data(), ldxb);
  for (int64_t i = 0; i < ldxb; ++i) {
    const uint16_t want = i < k ? f32_to_bf16(x[static_cast<size_t>(i)]) : 0;
    EXPECT_EQ(xb[static_cast<size_t>(i)], want) << "element " << i;
  }
}

TEST(KernelsGemm, EmptyInnerDimensionGivesBias) {
  ThreadPool pool(2);
  const Tensor w = Tensor::allocate(DType::BF16, {3, 0});
  const std::vector<float> bias = {1.0f, -2.0f, 0.5f};
  for (const KernelTable* t : available_tables()) {
    std::vector<float> y(6, NAN);
    t->gemm(nullptr, 2, 0, w, bias.data(), y.data(), pool);
    EXPECT_EQ(y, (std::vector<float>{1.0f, -2.0f, 0.5f, 1.0f, -2.0f, 0.5f})) << t->name;
  }
}

TEST(KernelsGemm, RejectsMismatchedWeights) {
  ThreadPool pool(1);
  const Tensor w = Tensor::allocate(DType::F32, {4, 5});
  std::vector<float> x(6), y(8);
  EXPECT_THROW(gemm(x.data(), 2, 3, w, nullptr, y.data(), pool), Error);
  const Tensor q = Tensor::allocate(DType::I8, {4, 3});
  EXPECT_THROW(gemm(x.data(), 2, 3, q, nullptr, y.data(), pool), Error);
}

}  // namespace
}  // namespace minfer::kernels
