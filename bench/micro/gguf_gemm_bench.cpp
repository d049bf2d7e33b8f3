// The GGUF quantized GEMM (kernels::gemm_quantized on 16-row tiles where the CPU takes them, else the row kernel)
// on the Qwen2.5-0.5B gate/up shape (N 4864, K 896; the K-quants, whose rows must be whole 256-blocks, on its down
// shape N 896, K 4864: the same multiply-adds), at 1, 8 and 32 activation rows:
// integer multiply-adds per second (2 per weight and row, reported as GFLOPS) against peak/avx512_vnni_dpbusd.
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/gguf_tiles.h"
#include "kernels/quant.h"
#include "model/quant/gguf_block_quantizer.h"

namespace minfer {
namespace {

Tensor random_gguf(DType type, int64_t n, int64_t k) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> row(static_cast<size_t>(k));
  Tensor w = Tensor::allocate(type, {n, k});
  const size_t row_bytes = dtype_bytes(type, static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (float& v : row) v = normal(rng);
    quantize_gguf_row(type, row.data(), k, w.mutable_as<uint8_t>() + static_cast<size_t>(r) * row_bytes);
  }
  if (kernels::gguf_tiles_preferred()) return kernels::to_gguf_tiles(w);  // as the layout passes choose
  return type == DType::Q8_0 ? kernels::to_q8_0_tiles(w) : w;
}

void run(benchmark::State& state, DType type) {
  const bool super_blocks = dtype_block(type).elements == 256;
  const int64_t m = state.range(0), n = super_blocks ? 896 : 4864, k = super_blocks ? 4864 : 896;
  static std::map<DType, Tensor> weights;
  if (!weights.count(type)) weights[type] = random_gguf(type, n, k);
  const Tensor& w = weights[type];
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : x) v = normal(rng);
  ThreadPool pool(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    kernels::gemm_quantized(x.data(), m, k, w, nullptr, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
}

void BM_GgufQ4_0(benchmark::State& s) { run(s, DType::Q4_0); }
void BM_GgufQ4_K(benchmark::State& s) { run(s, DType::Q4_K); }
void BM_GgufQ6_K(benchmark::State& s) { run(s, DType::Q6_K); }
void BM_GgufQ8_0(benchmark::State& s) { run(s, DType::Q8_0); }

#define GGUF_ARGS ArgsProduct({{1, 8, 32}, {1, 2}})->UseRealTime()->MinTime(0.3)
BENCHMARK(BM_GgufQ4_0)->Name("gguf_gemm/q4_0")->GGUF_ARGS;
BENCHMARK(BM_GgufQ4_K)->Name("gguf_gemm/q4_k")->GGUF_ARGS;
BENCHMARK(BM_GgufQ6_K)->Name("gguf_gemm/q6_k")->GGUF_ARGS;
BENCHMARK(BM_GgufQ8_0)->Name("gguf_gemm/q8_0")->GGUF_ARGS;

}  // namespace
}  // namespace minfer
