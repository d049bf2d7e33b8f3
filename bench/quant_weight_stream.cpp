// Decode-shaped weight streaming, every weight form side by side: bf16 (row-major and blocked), W8A16, W8A8 and
// GGUF Q8_0 (as stored, row-major, and in the 16-row tiles the q8_0-tiles pass makes). Every Linear of the
// Qwen2.5-0.5B shape ([24 layers] q/o 896x896, k/v 128x896, gate/up 4864x896, down 896x4864, and at m = 1 the
// 151936x896 lm_head) runs through kernels::gemm with m rows of activations, the forms alternating, best of 7:
//   build/release/bench/minfer_quant_stream_bench THREADS M LAYERS
// (decode: M = 1, LAYERS = 24; prefill: M = 128, LAYERS = 4).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
using namespace minfer;
using namespace minfer::kernels;

namespace {

struct Shape {
  int64_t n, k, count;
};

struct Form {
  std::string name;
  std::vector<Tensor> weights;
  double best = 1e9;
};

// GGUF Q8_0 blocks (f16 scale, 32 int8) from a group-32 int8 quantization of the same matrix.
Tensor to_q8_0(const Tensor& f) {
  const Tensor q = quantize_matrix(f, {.group_size = 32});
  const int64_t n = f.dim(0), k = f.dim(1);
  Tensor t = Tensor::allocate(DType::Q8_0, {n, k});
  uint8_t* out = t.mutable_as<uint8_t>();
  for (int64_t b = 0; b < n * k / 32; ++b) {
    const uint16_t d = f32_to_f16(q.quant->scales.as<float>()[b]);
    std::memcpy(out + b * 34, &d, 2);
    std::memcpy(out + b * 34 + 2, q.as<int8_t>() + b * 32, 32);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t m = argc > 2 ? std::atol(argv[2]) : 1;
  const int layers = argc > 3 ? std::atoi(argv[3]) : 24;
  ThreadPool pool(threads);
  std::vector<Shape> shapes = {{896, 896, 2}, {128, 896, 2}, {4864, 896, 2}, {896, 4864, 1}};
  if (m == 1) shapes.push_back({151936, 896, 1});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<Form> forms = {{"bf16", {}}, {"bf16 blocked", {}}, {"w8a16", {}},
                             {"w8a8", {}}, {"q8_0 rows", {}},    {"q8_0 tiles", {}}};
  for (auto& s : shapes) {
    const int copies = s.n == 151936 ? 1 : layers * static_cast<int>(s.count);
    for (int c = 0; c < copies; ++c) {
      Tensor f = Tensor::allocate(DType::F32, {s.n, s.k});
      for (int64_t i = 0; i < s.n * s.k; ++i) f.mutable_as<float>()[i] = d(rng) * 0.05f;
      const Tensor bf = convert(f, DType::BF16);
      forms[0].weights.push_back(bf);
      if (gemm_prefers_bf16_blocked()) forms[1].weights.push_back(to_bf16_blocked(bf));
      forms[2].weights.push_back(quantize_matrix(f, {}));
      // The lm_head stays W8A16 in W8A8 mode (docs/DESIGN.md, Quantization).
      forms[3].weights.push_back(s.n == 151936 ? forms[2].weights.back()
                                               : quantize_matrix(f, {.int8_activations = true}));
      forms[4].weights.push_back(to_q8_0(f));
      forms[5].weights.push_back(to_q8_0_tiles(forms[4].weights.back()));
    }
  }
  std::vector<float> x(static_cast<size_t>(m) * 4864), y(static_cast<size_t>(m) * 151936);
  for (auto& v : x) v = d(rng);
  for (int r = 0; r < 7; ++r) {
    for (Form& form : forms) {
      if (form.weights.empty()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& w : form.weights) gemm(x.data(), m, w.dim(1), w, nullptr, y.data(), pool);
      form.best = std::min(form.best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::printf("threads %d, m %lld (best of 7; GB/s = resident weight bytes / time; x = speed over bf16)\n", threads,
              static_cast<long long>(m));
  for (const Form& form : forms) {
    if (form.weights.empty()) continue;
    double bytes = 0;
    for (const Tensor& w : form.weights) bytes += static_cast<double>(resident_bytes(w));
    std::printf("  %-13s %8.2f ms %6.1f GB/s %5.2fx\n", form.name.c_str(), form.best * 1e3, bytes / form.best / 1e9,
                forms[0].best / form.best);
  }
}
