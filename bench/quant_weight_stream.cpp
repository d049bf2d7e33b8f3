// Decode-shaped weight streaming, bf16 (row-major and blocked) vs W8A16 vs W8A8: every Linear of the Qwen2.5-0.5B
// shape ([24 layers] q/o 896x896, k/v 128x896, gate/up 4864x896, down 896x4864, and at m = 1 the 151936x896 lm_head)
// run through kernels::gemm with m rows of activations, alternating the three weight forms, best of 7 rounds:
//   build/release/bench/minfer_quant_stream_bench THREADS M LAYERS
// (decode: M = 1, LAYERS = 24; prefill: M = 128, LAYERS = 4).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant.h"
using namespace minfer;
using namespace minfer::kernels;
struct Shape {
  int64_t n, k, count;
};
int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t m = argc > 2 ? std::atol(argv[2]) : 1;
  const int layers = argc > 3 ? std::atoi(argv[3]) : 24;
  ThreadPool pool(threads);
  std::vector<Shape> shapes = {{896, 896, 2}, {128, 896, 2}, {4864, 896, 2}, {896, 4864, 1}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<Tensor> bf, blocked, w16, w8;
  for (auto& s : shapes)
    for (int l = 0; l < layers; ++l)
      for (int c = 0; c < s.count; ++c) {
        Tensor f = Tensor::allocate(DType::F32, {s.n, s.k});
        for (int64_t i = 0; i < s.n * s.k; ++i) f.mutable_as<float>()[i] = d(rng) * 0.05f;
        bf.push_back(convert(f, DType::BF16));
        if (gemm_prefers_bf16_blocked()) blocked.push_back(to_bf16_blocked(bf.back()));
        w16.push_back(quantize_matrix(f, {}));
        w8.push_back(quantize_matrix(f, {.int8_activations = true}));
      }
  if (m == 1) {
    Tensor f = Tensor::allocate(DType::F32, {151936, 896});
    for (int64_t i = 0; i < 151936LL * 896; ++i) f.mutable_as<float>()[i] = d(rng) * 0.05f;
    bf.push_back(convert(f, DType::BF16));
    if (gemm_prefers_bf16_blocked()) blocked.push_back(to_bf16_blocked(bf.back()));
    w16.push_back(quantize_matrix(f, {}));
    w8.push_back(w16.back());
  }
  std::vector<float> x(static_cast<size_t>(m) * 4864), y(static_cast<size_t>(m) * 151936);
  for (auto& v : x) v = d(rng);
  auto run = [&](std::vector<Tensor>& ws) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto& w : ws) gemm(x.data(), m, w.dim(1), w, nullptr, y.data(), pool);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  for (int r = 0; r < 7; ++r) {
    best[0] = std::min(best[0], run(bf));
    if (!blocked.empty()) best[3] = std::min(best[3], run(blocked));
    best[1] = std::min(best[1], run(w16));
    best[2] = std::min(best[2], run(w8));
  }
  double bytes_bf = 0, bytes_q = 0;
  for (auto& w : bf) bytes_bf += static_cast<double>(w.nbytes());
  for (auto& w : w16) bytes_q += static_cast<double>(resident_bytes(w));
  std::printf(
      "threads %d m %lld: bf16 %.2f ms (%.1f GB/s), bf16 blocked %.2f ms (%.1f GB/s), w8a16 %.2f ms (%.1f GB/s) = "
      "%.2fx, w8a8 %.2f ms = %.2fx (vs blocked: w8a16 %.2fx, w8a8 %.2fx)\n",
      threads, static_cast<long long>(m), best[0] * 1e3, bytes_bf / best[0] / 1e9, best[3] * 1e3,
      bytes_bf / best[3] / 1e9, best[1] * 1e3, bytes_q / best[1] / 1e9, best[0] / best[1], best[2] * 1e3,
      best[0] / best[2], best[3] / best[1], best[3] / best[2]);
}
