// The fused operators of kernels/fused/ on every ISA this CPU runs, against the composition of the unfused
// ops on awkward sizes (odd widths, partial gate/up blocks, serial and threaded GEMMs): tightly against the
// same ISA's unfused ops (the same arithmetic), and against the scalar references (kernel_table(kScalar))
// within the vector-vs-scalar tolerance when the weights are f32. (With bf16 weights the GEMM driver may
// round activations to bf16 for the BF16 dot instructions, fused or not, which only the same-ISA check
// can hold to 1e-5.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/fused/fused_matmul.h"
#include "kernels/fused/fused_weights.h"
#include "kernels/fused/gemm_epilogues.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels::fused {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::make_tensor;
using testing::random_floats;

const KernelTable& scalar() { return *kernel_table(Isa::kScalar); }

std::vector<float> gemm_of(const KernelTable& u, const std::vector<float>& x, int64_t m, int64_t k, const Tensor& w,
                           const float* bias, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(m * w.dim(0)));
  u.gemm(x.data(), m, k, w, bias, y.data(), pool);
  return y;
}

std::vector<float> rmsnorm_of(const KernelTable& u, const std::vector<float>& x, int64_t rows, int64_t dim,
                              const Tensor& w, float eps) {
  std::vector<float> y(x.size());
  u.rmsnorm(x.data(), w, eps, y.data(), rows, dim);
  return y;
}

// The tables to compare a fused result of table t against: t itself (tight), and the scalar references
// (vector-vs-scalar tolerance) when the weights are f32.
std::vector<std::pair<const KernelTable*, float>> oracles(const KernelTable* t, DType wt) {
  std::vector<std::pair<const KernelTable*, float>> o = {{t, 1e-5f}};
  if (wt == DType::F32 && t != &scalar()) o.emplace_back(&scalar(), 3e-5f);
  return o;
}

// Widens a cache buffer of `dtype` to f32 for comparison.
std::vector<float> cache_f32(const std::vector<uint16_t>& bf16, const std::vector<float>& f32, DType dtype) {
  if (dtype == DType::F32) return f32;
  std::vector<float> out(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) out[i] = bf16_to_f32(bf16[i]);
  return out;
}

struct Shape {
  int64_t m, k, n;
};

TEST(FusedMatMul, ResidualEpilogueMatchesGemmThenAdd) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  for (DType wt : {DType::F32, DType::BF16}) {
    for (Shape s : {Shape{1, 37, 200}, Shape{5, 96, 130}, Shape{70, 37, 200}, Shape{3, 1, 48}}) {
      const auto x = random_floats(rng, static_cast<size_t>(s.m * s.k));
      const auto r = random_floats(rng, static_cast<size_t>(s.m * s.n));
      const Tensor w = make_tensor(random_floats(rng, static_cast<size_t>(s.n * s.k)), {s.n, s.k}, wt);
      for (const KernelTable* t : available_tables()) {
        std::vector<float> y(static_cast<size_t>(s.m * s.n));
        FusedMatMul op{.x = x.data(), .rows = s.m, .k = s.k, .weight = &w, .y = y.data()};
        op.epilogue = Epilogue::kResidual;
        op.residual = r.data();
        fused_matmul(*t, op, pool);
        for (auto [u, tol] : oracles(t, wt)) {
          auto want = gemm_of(*u, x, s.m, s.k, w, nullptr, pool);
          u->add(r.data(), want.data(), want.data(), s.m * s.n);
          expect_close(y, want, tol, tol, std::string(t->name) + " residual vs " + u->name);
        }
      }
    }
  }
}

TEST(FusedMatMul, SiluMulEpilogueMatchesTwoGemmsThenSiluMul) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  for (DType wt : {DType::F32, DType::BF16}) {
    for (Shape s : {Shape{1, 40, 75}, Shape{9, 33, 200}, Shape{66, 64, 97}}) {  // s.n = intermediate size
      const auto x = random_floats(rng, static_cast<size_t>(s.m * s.k));
      const Tensor gate = make_tensor(random_floats(rng, static_cast<size_t>(s.n * s.k)), {s.n, s.k}, wt);
      const Tensor up = make_tensor(random_floats(rng, static_cast<size_t>(s.n * s.k)), {s.n, s.k}, wt);
      for (int64_t block : {16, 32}) {
        const Tensor packed = interleave_gate_up(gate, up, block);
        for (const KernelTable* t : available_tables()) {
          std::vector<float> scratch(static_cast<size_t>(s.m * 2 * s.n)), out(static_cast<size_t>(s.m * s.n));
          FusedMatMul op{.x = x.data(), .rows = s.m, .k = s.k, .weight = &packed, .y = scratch.data()};
          op.epilogue = Epilogue::kSiluMul;
          op.out = out.data();
          op.block = block;
          fused_matmul(*t, op, pool);
          for (auto [u, tol] : oracles(t, wt)) {
            const auto g = gemm_of(*u, x, s.m, s.k, gate, nullptr, pool);
            const auto v = gemm_of(*u, x, s.m, s.k, up, nullptr, pool);
            std::vector<float> want(g.size());
            u->silu_mul(g.data(), v.data(), want.data(), s.m * s.n);
            expect_close(out, want, tol, tol, std::string(t->name) + " silu_mul vs " + u->name);
          }
        }
      }
    }
  }
}

// norm -> q/k/v GEMM + bias -> RoPE -> KV write, against rmsnorm, three GEMMs, rope of q and k, kv_write.
TEST(FusedMatMul, QkvEpilogueMatchesProjectionsRopeAndKvWrite) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  struct Case {
    int64_t m, hidden, heads, kv_heads, head_dim, half_rot;
    RopeStyle style;
    DType wt, kv;
  };
  const Case cases[] = {
      {1, 40, 6, 2, 8, 4, RopeStyle::kInterleaved, DType::F32, DType::F32},
      {13, 64, 4, 4, 16, 8, RopeStyle::kNeox, DType::BF16, DType::F32},
      {37, 72, 14, 2, 64, 32, RopeStyle::kNeox, DType::BF16, DType::BF16},
      {5, 48, 3, 1, 32, 12, RopeStyle::kNeox, DType::F32, DType::BF16},  // partial rotary
  };
  for (const Case& c : cases) {
    const int64_t qw = c.heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
    const auto x = random_floats(rng, static_cast<size_t>(c.m * c.hidden));
    const Tensor norm = make_tensor(random_floats(rng, static_cast<size_t>(c.hidden), 0.5f, 1.5f), {c.hidden}, c.wt);
    const Tensor wq = make_tensor(random_floats(rng, static_cast<size_t>(qw * c.hidden)), {qw, c.hidden}, c.wt);
    const Tensor wk = make_tensor(random_floats(rng, static_cast<size_t>(kvw * c.hidden)), {kvw, c.hidden}, c.wt);
    const Tensor wv = make_tensor(random_floats(rng, static_cast<size_t>(kvw * c.hidden)), {kvw, c.hidden}, c.wt);
    const Tensor bq = make_tensor(random_floats(rng, static_cast<size_t>(qw)), {qw}, DType::F32);
    const Tensor bk = make_tensor(random_floats(rng, static_cast<size_t>(kvw)), {kvw}, DType::F32);
    const Tensor bv = make_tensor(random_floats(rng, static_cast<size_t>(kvw)), {kvw}, DType::F32);
    std::vector<int32_t> positions(static_cast<size_t>(c.m));
    std::vector<int64_t> slots(static_cast<size_t>(c.m));
    for (int64_t t = 0; t < c.m; ++t) {
      positions[static_cast<size_t>(t)] = static_cast<int32_t>(3 * t + 5);
      slots[static_cast<size_t>(t)] = t == 1 ? -1 : 16 + 2 * t;  // one token not cached
    }
    std::vector<float> inv_freq(static_cast<size_t>(c.half_rot));
    for (int64_t i = 0; i < c.half_rot; ++i) inv_freq[static_cast<size_t>(i)] = std::pow(1e4f, -float(i) / c.half_rot);
    const float eps = 1e-5f;
    const int64_t pages = 8, page_size = 16, cache_elems = pages * page_size * kvw;

    const KvLayerView empty_view{.page = PageGeometry::of(page_size),
                                 .kv_heads = c.kv_heads,
                                 .head_dim = c.head_dim,
                                 .dtype = c.kv == DType::BF16 ? KvCacheDtype::kBf16 : KvCacheDtype::kF32};

    const Tensor packed = pack_qkv(wq, wk, wv, c.head_dim);
    const Tensor packed_bias = pack_qkv(bq, bk, bv, c.head_dim);
    for (const KernelTable* t : available_tables()) {
      SCOPED_TRACE(std::string(t->name) + " heads " + std::to_string(c.heads));
      std::vector<float> k32(static_cast<size_t>(cache_elems)), v32(k32.size());
      std::vector<uint16_t> k16(k32.size()), v16(k32.size());
      KvLayerView view = empty_view;
      view.k = c.kv == DType::F32 ? static_cast<void*>(k32.data()) : k16.data();
      view.v = c.kv == DType::F32 ? static_cast<void*>(v32.data()) : v16.data();
      std::vector<float> prologue(x.size()), scratch(static_cast<size_t>(c.m * packed.dim(0))),
          q_out(static_cast<size_t>(c.m * qw));
      FusedMatMul op{.x = x.data(),
                     .rows = c.m,
                     .k = c.hidden,
                     .norm_weight = &norm,
                     .eps = eps,
                     .prologue_scratch = prologue.data(),
                     .weight = &packed,
                     .bias = packed_bias.as<float>(),
                     .y = scratch.data()};
      op.epilogue = Epilogue::kRopeKvWrite;
      op.out = q_out.data();
      std::vector<float> cos(static_cast<size_t>(c.m * c.half_rot)), sin(cos.size());
      rope_angles(positions.data(), c.m, inv_freq.data(), c.half_rot, cos.data(), sin.data());
      op.rope_cos = cos.data();
      op.rope_sin = sin.data();
      op.slot_mapping = slots.data();
      op.cache = view;
      op.heads = c.heads;
      op.head_dim = c.head_dim;
      op.half_rot = c.half_rot;
      op.style = c.style;
      fused_matmul(*t, op, pool);
      for (auto [u, tol] : oracles(t, c.wt)) {
        SCOPED_TRACE(std::string("vs ") + u->name);
        // norm, three GEMMs with bias, rope q and k, kv_write: the unfused graph's ops.
        const auto h = rmsnorm_of(*u, x, c.m, c.hidden, norm, eps);
        auto q = gemm_of(*u, h, c.m, c.hidden, wq, bq.as<float>(), pool);
        auto k = gemm_of(*u, h, c.m, c.hidden, wk, bk.as<float>(), pool);
        const auto v = gemm_of(*u, h, c.m, c.hidden, wv, bv.as<float>(), pool);
        u->rope(q.data(), cos.data(), sin.data(), c.m, c.heads, c.head_dim, c.half_rot, c.style);
        u->rope(k.data(), cos.data(), sin.data(), c.m, c.kv_heads, c.head_dim, c.half_rot, c.style);
        std::vector<float> want_k32(k32.size()), want_v32(k32.size());
        std::vector<uint16_t> want_k16(k32.size()), want_v16(k32.size());
        KvLayerView want_view = empty_view;
        want_view.k = c.kv == DType::F32 ? static_cast<void*>(want_k32.data()) : want_k16.data();
        want_view.v = c.kv == DType::F32 ? static_cast<void*>(want_v32.data()) : want_v16.data();
        u->kv_write(want_view, k.data(), v.data(), slots.data(), c.m);
        expect_close(q_out, q, tol, tol, "q");
        // A bf16 cache may round a value that differs in the last f32 bit to the neighbouring bf16.
        const float kv_tol = c.kv == DType::BF16 ? 8e-3f : tol;
        expect_close(cache_f32(k16, k32, c.kv), cache_f32(want_k16, want_k32, c.kv), kv_tol, kv_tol, "k cache");
        expect_close(cache_f32(v16, v32, c.kv), cache_f32(want_v16, want_v32, c.kv), kv_tol, kv_tol, "v cache");
      }
    }
  }
}

TEST(FusedMatMul, GatherAndNormPrologueMatchesGatherNormGemm) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const int64_t rows = 11, k = 45, n = 300;
  const auto x = random_floats(rng, static_cast<size_t>(rows * k));
  const Tensor norm = make_tensor(random_floats(rng, static_cast<size_t>(k)), {k}, DType::BF16);
  const Tensor w = make_tensor(random_floats(rng, static_cast<size_t>(n * k)), {n, k}, DType::BF16);
  const std::vector<int32_t> pick = {10, 0, 4};
  std::vector<float> gathered;
  for (int32_t r : pick) gathered.insert(gathered.end(), x.begin() + r * k, x.begin() + (r + 1) * k);
  for (const KernelTable* t : available_tables()) {
    const auto want = gemm_of(*t, rmsnorm_of(*t, gathered, 3, k, norm, 1e-6f), 3, k, w, nullptr, pool);
    std::vector<float> prologue(gathered.size()), y(want.size());
    FusedMatMul op{.x = x.data(),
                   .rows = rows,
                   .k = k,
                   .gather_rows = pick.data(),
                   .gather_count = 3,
                   .norm_weight = &norm,
                   .eps = 1e-6f,
                   .prologue_scratch = prologue.data(),
                   .weight = &w,
                   .y = y.data()};
    fused_matmul(*t, op, pool);
    expect_close(y, want, 1e-5f, 1e-5f, std::string(t->name) + " gather+norm");
  }
}

TEST(FusedKernels, AddRmsNormMatchesAddThenRmsNorm) {
  std::mt19937 rng(5);
  for (int64_t dim : {1, 17, 64, 131}) {
    const int64_t rows = 3;
    const auto a = random_floats(rng, static_cast<size_t>(rows * dim));
    const auto b = random_floats(rng, static_cast<size_t>(rows * dim));
    const Tensor w = make_tensor(random_floats(rng, static_cast<size_t>(dim)), {dim}, DType::F32);
    std::vector<float> want_sum(a.size());
    ref::add(a.data(), b.data(), want_sum.data(), rows * dim);
    const auto want = rmsnorm_of(scalar(), want_sum, rows, dim, w, 1e-5f);
    for (const KernelTable* t : available_tables()) {
      std::vector<float> sum(a.size()), y(a.size());
      add_rmsnorm(*t, a.data(), b.data(), w, 1e-5f, sum.data(), y.data(), rows, dim);
      expect_close(sum, want_sum, 0.0f, 0.0f, std::string(t->name) + " sum");
      expect_close(y, want, 2e-6f, 2e-6f, std::string(t->name) + " norm");
    }
  }
}

TEST(FusedKernels, WriteKvHeadEqualsWholeRowWrite) {
  std::mt19937 rng(6);
  const int64_t kv_heads = 3, hd = 8, page_size = 4, slots = 12;
  const auto k = random_floats(rng, static_cast<size_t>(kv_heads * hd));
  const auto v = random_floats(rng, static_cast<size_t>(kv_heads * hd));
  for (const KernelTable* t : available_tables()) {
    std::vector<float> kw(static_cast<size_t>(slots * kv_heads * hd)), vw(kw.size()), kh(kw.size()), vh(kw.size());
    KvLayerView whole{
        .k = kw.data(), .v = vw.data(), .page = PageGeometry::of(page_size), .kv_heads = kv_heads, .head_dim = hd};
    KvLayerView heads = whole;
    heads.k = kh.data();
    heads.v = vh.data();
    const int64_t slot = 7;
    t->kv_write(whole, k.data(), v.data(), &slot, 1);
    for (int64_t g = 0; g < kv_heads; ++g) kv_write_head(heads, g, k.data() + g * hd, v.data() + g * hd, slot);
    kv_write_head(heads, 0, k.data(), v.data(), -1);  // negative slot: nothing written
    EXPECT_EQ(kh, kw);
    EXPECT_EQ(vh, vw);
  }
}

TEST(FusedWeights, PackedLayouts) {
  const std::vector<float> q = {1, 2, 3, 4}, kk = {5, 6}, vv = {7, 8};  // head_dim 1: 4 heads, 2 kv heads
  const Tensor p =
      pack_qkv(make_tensor(q, {4}, DType::F32), make_tensor(kk, {2}, DType::F32), make_tensor(vv, {2}, DType::F32), 1);
  EXPECT_EQ(std::vector<float>(p.as<float>(), p.as<float>() + 8), (std::vector<float>{5, 7, 6, 8, 1, 2, 3, 4}));
  const Tensor g = make_tensor({1, 2, 3}, {3, 1}, DType::F32), u = make_tensor({4, 5, 6}, {3, 1}, DType::F32);
  const Tensor i = interleave_gate_up(g, u, 2);
  EXPECT_EQ(std::vector<float>(i.as<float>(), i.as<float>() + 6), (std::vector<float>{1, 2, 4, 5, 3, 6}));
  EXPECT_FALSE(packable(g, make_tensor({1, 2, 3}, {3, 1}, DType::BF16)));
}

}  // namespace
}  // namespace minfer::kernels::fused
