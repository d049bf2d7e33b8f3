// Peak arithmetic rates of this machine, the ceilings the GEMM figures are compared against: AVX-512 f32 FMA
// (vfmadd231ps zmm, 32 flops each), AVX-512-BF16 dot products (vdpbf16ps zmm, 64 flops each), AVX-512-VNNI byte
// dot products (vpdpbusd zmm, 128 integer ops each) and AMX-BF16 tile
// products (tdpbf16ps: 16 x 32 by 32 x 16 bf16 into 16 x 16 f32, 16384 flops each), on register (tile) operands
// only, with enough independent accumulators to cover the latency; one thread and every thread of a ThreadPool.
// Skipped where the CPU lacks the instructions (AMX: or the kernel did not grant its state).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
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

// vpdpbusd zmm: 64 unsigned x signed byte products summed into 16 int32 lanes, 128 integer ops each (the GGUF
// kernels' inner instruction).
__attribute__((target("avx512f,avx512vnni"))) float dpbusd_loop(float seed) {
  __m512i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_epi32(static_cast<int>(seed) * i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < kIters; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  return static_cast<float>(lanes[0] + lanes[15]);
}

// The AMX tile configuration (palette 1): tiles 0-7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Four accumulator tiles (0-3) over two A tiles (4, 5) and two B tiles (6, 7): four independent products per
// iteration, as a GEMM's 2 x 2 register block of tiles does.
__attribute__((target("amx-tile,amx-bf16"))) float amx_loop(float seed) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t ab[16 * 32];
  std::fill(ab, ab + 16 * 32, uint16_t{0x3300});  // tiny, so the sums stay finite
  alignas(64) float c[16 * 16];
  std::fill(c, c + 16 * 16, seed);
  _tile_loadd(0, c, 64);
  _tile_loadd(1, c, 64);
  _tile_loadd(2, c, 64);
  _tile_loadd(3, c, 64);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int64_t it = 0; it < kIters / kAcc; ++it) {  // each product ~16x a vdpbf16ps: a similar time per call
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0] + c[255];
}

void run_peak(benchmark::State& state, float (*loop)(float), double flops_per_call) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  std::vector<float> sink(static_cast<size_t>(threads) * 16);
  for (auto _ : state) {
    pool.run([&](int t, int) { sink[static_cast<size_t>(t) * 16] = loop(static_cast<float>(t) + 1.0f); });
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = static_cast<double>(state.iterations()) * threads * flops_per_call;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
}

void BM_PeakFma(benchmark::State& state) {
  if (!cpu_features().has_avx512()) return state.SkipWithError("needs AVX-512");
  run_peak(state, fma_loop, 32.0 * kIters * kAcc);
}

void BM_PeakDpbf16(benchmark::State& state) {
  if (!cpu_features().avx512_bf16) return state.SkipWithError("needs AVX-512-BF16");
  run_peak(state, dpbf16_loop, 64.0 * kIters * kAcc);
}

void BM_PeakDpbusd(benchmark::State& state) {
  if (!cpu_features().avx512_vnni) return state.SkipWithError("needs AVX-512-VNNI");
  run_peak(state, dpbusd_loop, 128.0 * kIters * kAcc);  // integer ops, reported under GFLOPS
}

void BM_PeakAmx(benchmark::State& state) {
  if (!cpu_features().amx_bf16) return state.SkipWithError("needs AMX-BF16 (granted by the kernel)");
  run_peak(state, amx_loop, 16384.0 * 4 * (kIters / kAcc));
}

BENCHMARK(BM_PeakFma)->Name("peak/avx512_fma_f32")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_PeakDpbf16)->Name("peak/avx512_dpbf16")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_PeakDpbusd)->Name("peak/avx512_vnni_dpbusd")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_PeakAmx)->Name("peak/amx_bf16")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace minfer
