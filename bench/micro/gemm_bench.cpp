// GEMV / GEMM micro-benchmarks at the Qwen2.5-0.5B shapes, bf16 weights, per ISA and thread count
// (avx512_bf16 rounds the activations to bf16 and uses vdpbf16ps; avx512 and avx2 widen the weights to f32).
//
// Decode (M = 1) streams every weight once per token, so its figure of merit is weight bytes per second,
// compared against bandwidth_bench.cpp's read bandwidth. Weights are rotated through enough copies to exceed
// the last-level cache (~256 MiB in all), as in a real forward pass where each layer's weights come from DRAM;
// the "_hot" variant reuses one copy (cache-resident when it fits) to show the compute side.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/leaf.h"
#include "kernels/onednn_gemm.h"
#include "kernels/x86/x86_kernels.h"
#include "tensor/tensor.h"

namespace minfer::kernels {
namespace {

constexpr size_t kColdBytes = size_t{256} << 20;

std::vector<Tensor> make_weights(int64_t n, int64_t k, DType dtype, bool cold, bool blocked = false) {
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(n * k));
  const size_t copies = cold ? std::max<size_t>(1, kColdBytes / bytes) : 1;
  std::vector<Tensor> ws;
  for (size_t c = 0; c < copies; ++c) {
    Tensor w = Tensor::allocate(dtype, {n, k});
    auto* p = w.mutable_as<uint16_t>();
    for (size_t i = 0; i < static_cast<size_t>(n * k); ++i) p[i] = static_cast<uint16_t>(0x3c00u + (i * 7 + c) % 97);
    ws.push_back(blocked ? to_bf16_blocked(w) : std::move(w));
  }
  return ws;
}

void BM_Gemm(benchmark::State& state, Isa isa, int64_t m, int64_t n, int64_t k, bool cold, bool blocked) {
  const KernelTable* table = kernel_table(isa);
  if (!table) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const std::vector<Tensor> ws = make_weights(n, k, DType::BF16, cold, blocked);
  std::vector<float> x(static_cast<size_t>(m * k), 0.01f), bias(static_cast<size_t>(n), 0.5f);
  std::vector<float> y(static_cast<size_t>(m * n));
  size_t c = 0;
  for (auto _ : state) {
    table->gemm(x.data(), m, k, ws[c], bias.data(), y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == ws.size() ? 0 : c + 1;
  }
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * static_cast<double>(ws[0].nbytes())));
  state.counters["GFLOPS"] =
      benchmark::Counter(iters * 2.0 * static_cast<double>(m * n * k) * 1e-9, benchmark::Counter::kIsRate);
}

// Decode GEMV shapes (K = hidden 896): gate/up, q/o, fused qkv, lm_head; and down (K = 4864).
struct Shape {
  const char* name;
  int64_t n, k;
};
constexpr Shape kShapes[] = {
    {"gate_up", 4864, 896}, {"q_o", 896, 896}, {"qkv", 1152, 896}, {"lm_head", 151936, 896}, {"down", 896, 4864}};

// The two AVX-512 GEMM strategies single-threaded across M (bf16, N = 1024, K = 896): where the packed form
// starts to pay (kPackedMinRows16Bit in src/kernels/x86/gemm_avx512.cpp).
void BM_Strategy(benchmark::State& state, bool packed) {
  if (!kernel_table(Isa::kAvx512)) {
    state.SkipWithError("needs AVX-512");
    return;
  }
  const int64_t m = state.range(0), n = 1024, k = 896;
  const std::vector<Tensor> ws = make_weights(n, k, DType::BF16, false);
  std::vector<float> x(static_cast<size_t>(m * k), 0.01f), y(static_cast<size_t>(m * n));
  const auto fn = packed ? avx512::gemm_cols_packed : avx512::gemm_cols_dot;
  for (auto _ : state) {
    fn(x.data(), m, k, ws[0].data, DType::BF16, n, nullptr, y.data(), 0, n);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(m * n * k) * 1e-9,
                         benchmark::Counter::kIsRate);
}

// The two AVX-512-BF16 strategies single-threaded across M (bf16 activations, N = 1024, K = 896): where the
// packed form starts to pay (kPackedMinRows in src/kernels/x86/gemm_bf16_avx512.cpp).
// range(1): weight rows. 1024 x 896 bf16 (1.8 MB) stays in cache; 9728 (the Qwen2.5-0.5B gate/up, 17 MB)
// streams from memory as in a real decode step.
void BM_StrategyBf16(benchmark::State& state, bool packed) {
  if (!kernel_table(Isa::kAvx512Bf16)) return state.SkipWithError("needs AVX-512-BF16");
  const int64_t m = state.range(0), n = state.range(1), k = 896;
  const std::vector<Tensor> ws = make_weights(n, k, DType::BF16, false);
  std::vector<float> x(static_cast<size_t>(m * k), 0.01f), y(static_cast<size_t>(m * n));
  std::vector<uint16_t> xb(static_cast<size_t>(m * k));
  avx512::bf16_round_rows(x.data(), m, k, xb.data(), k);
  const auto fn = packed ? avx512::gemm_bf16_cols_packed : avx512::gemm_bf16_cols_dot;
  for (auto _ : state) {
    fn(xb.data(), k, m, k, static_cast<const uint16_t*>(ws[0].data), n, nullptr, y.data(), 0, n);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(m * n * k) * 1e-9,
                         benchmark::Counter::kIsRate);
}

// The two leaves over the blocked layout on one thread, all columns: the own block-major kernel against oneDNN's
// matmul at batched-decode and prefill row counts (which one the driver picks: onednn_takes_rows). `cold`: the weights
// come from DRAM (rotated copies, as in a decode step); otherwise one copy that stays in cache (the inner loop alone).
void BM_BlockedLeaf(benchmark::State& state, bool onednn, int64_t n, int64_t k, bool cold = true) {
  if (!kernel_table(Isa::kAvx512Bf16)) return state.SkipWithError("needs AVX-512-BF16");
  const int64_t m = state.range(0), ldxb = bf16_row_stride(k), rows = onednn ? onednn_rows(m) : m;
  const std::vector<Tensor> ws = make_weights(n, k, DType::BF16, cold, true);
  std::vector<float> x(static_cast<size_t>(m * k), 0.01f), y(static_cast<size_t>(m * n));
  std::vector<uint16_t> xb(static_cast<size_t>(rows * ldxb));
  avx512::bf16_round_rows(x.data(), m, k, xb.data(), ldxb);
  const auto fn = onednn ? onednn_gemm_bf16_blocked_cols : avx512::gemm_bf16_blocked_cols;
  size_t c = 0;
  for (auto _ : state) {
    fn(xb.data(), ldxb, m, k, static_cast<const uint16_t*>(ws[c].data), n, nullptr, y.data(), 0, n);
    benchmark::DoNotOptimize(y.data());
    c = c + 1 == ws.size() ? 0 : c + 1;
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(m * n * k) * 1e-9,
                         benchmark::Counter::kIsRate);
}

int register_all() {
  for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
    const std::string isa_s = isa_name(isa);
    for (const Shape& s : kShapes) {
      benchmark::RegisterBenchmark(("gemv_bf16/" + isa_s + "/" + s.name).c_str(), BM_Gemm, isa, 1, s.n, s.k, true,
                                   false)
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->MinTime(0.2);
    }
    benchmark::RegisterBenchmark(("gemv_bf16_hot/" + isa_s + "/q_o").c_str(), BM_Gemm, isa, 1, 896, 896, false, false)
        ->Arg(1)
        ->UseRealTime()
        ->MinTime(0.2);
    benchmark::RegisterBenchmark(("gemm_bf16_m512/" + isa_s + "/gate_up").c_str(), BM_Gemm, isa, 512, 4864, 896, false,
                                 false)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->MinTime(0.5);
    // Batched decode: 8 and 32 rows of X against weights from DRAM (each weight byte should be read once).
    for (int64_t m : {8, 32}) {
      benchmark::RegisterBenchmark(("gemm_bf16_m" + std::to_string(m) + "/" + isa_s + "/gate_up").c_str(), BM_Gemm, isa,
                                   m, 4864, 896, true, false)
          ->Arg(2)
          ->UseRealTime()
          ->MinTime(0.2);
    }
  }
  // The engine's bf16 path: weights in the blocked layout (the bf16-blocked pass), own GEMV below 8 rows and
  // oneDNN's matmul from 8, through the driver's column split (weights from DRAM except at 512 rows).
  if (kernel_table(Isa::kAvx512Bf16)) {
    for (int64_t m : {1, 4, 8, 16, 32, 64, 512}) {
      for (const Shape& s : {kShapes[0], kShapes[3], kShapes[4]}) {
        if (m == 512 && s.n > 10000) continue;  // the lm_head only runs on sampled rows
        benchmark::RegisterBenchmark(("gemm_bf16_blocked/m" + std::to_string(m) + "/" + s.name).c_str(), BM_Gemm,
                                     Isa::kAvx512Bf16, m, s.n, s.k, m != 512, true)
            ->Arg(1)
            ->Arg(2)
            ->UseRealTime()
            ->MinTime(0.2);
      }
    }
  }
  for (bool onednn : {false, true}) {
    for (const Shape& s : {kShapes[0], kShapes[4]}) {
      benchmark::RegisterBenchmark((std::string("blocked_leaf/") + (onednn ? "onednn/" : "own/") + s.name).c_str(),
                                   BM_BlockedLeaf, onednn, s.n, s.k, true)
          ->Arg(8)
          ->Arg(16)
          ->Arg(32)
          ->Arg(64)
          ->Arg(128)
          ->Arg(512)
          ->UseRealTime()
          ->MinTime(0.2);
    }
    benchmark::RegisterBenchmark((std::string("blocked_leaf_hot/") + (onednn ? "onednn" : "own")).c_str(),
                                 BM_BlockedLeaf, onednn, 512, 896, false)
        ->Arg(32)
        ->UseRealTime()
        ->MinTime(0.2);
  }
  for (bool packed : {false, true}) {
    benchmark::RegisterBenchmark(packed ? "strategy_bf16/packed" : "strategy_bf16/dot", BM_StrategyBf16, packed)
        ->ArgsProduct({{1, 4, 8, 16, 24, 32, 48, 64, 96, 128, 512}, {1024, 9728}})
        ->MinTime(0.1);
  }
  for (bool packed : {false, true}) {
    benchmark::RegisterBenchmark(packed ? "strategy/avx512_packed" : "strategy/avx512_dot", BM_Strategy, packed)
        ->Arg(2)
        ->Arg(4)
        ->Arg(6)
        ->Arg(8)
        ->Arg(12)
        ->Arg(16)
        ->Arg(32)
        ->Arg(128)
        ->Arg(512)
        ->MinTime(0.1);
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace minfer::kernels
