// Peak arithmetic rates of this machine, the ceilings the GEMM figures are compared against: AVX-512 f32 FMA
// (vfmadd231ps zmm, 32 flops each) and AVX-512-BF16 dot products (vdpbf16ps zmm, 64 flops each), on register
// operands only, with enough independent accumulators to cover the latency; one thread and every thread of
// a ThreadPool. Skipped where the CPU lacks the instructions.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"

namespace minfer {
namespace {

constexpr int kAcc = 16;             // independent chains: latency (4-6 cycles) x 2-3 pipes, with room to spare
constexpr int64_t kIters = 1 << 16;  // inner iterations per call

__attribute__((target("avx512f"))) float fma_loop(float seed) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < kIters; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f,avx512bf16"))) float dpbf16_loop(float seed) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed * static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // (1.0, 1.0)
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33003300);  // tiny, so the sums stay finite
  for (int64_t it = 0; it < kIters; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0] + lanes[15];
}

void run_peak(benchmark::State& state, float (*loop)(float), double flops_per_op) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  std::vector<float> sink(static_cast<size_t>(threads) * 16);
  for (auto _ : state) {
    pool.run([&](int t, int) { sink[static_cast<size_t>(t) * 16] = loop(static_cast<float>(t) + 1.0f); });
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = static_cast<double>(state.iterations()) * threads * kIters * kAcc * flops_per_op;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
}

void BM_PeakFma(benchmark::State& state) {
  if (!cpu_features().has_avx512()) return state.SkipWithError("needs AVX-512");
  run_peak(state, fma_loop, 32.0);
}

void BM_PeakDpbf16(benchmark::State& state) {
  if (!cpu_features().avx512_bf16) return state.SkipWithError("needs AVX-512-BF16");
  run_peak(state, dpbf16_loop, 64.0);
}

BENCHMARK(BM_PeakFma)->Name("peak/avx512_fma_f32")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_PeakDpbf16)->Name("peak/avx512_dpbf16")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace minfer
