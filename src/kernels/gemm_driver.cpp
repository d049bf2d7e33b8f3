// GEMM driver: checks the operands and splits the output columns (weight rows) across the pool in chunks
// (multiples of 16), so each weight row is streamed exactly once, by whichever thread claims it.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/error.h"
#include "kernels/leaf.h"

namespace minfer::kernels {
namespace {

// Below this many multiply-adds the fork-join costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 16;

}  // namespace

void run_gemm(GemmColsFn leaf, const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
              ThreadPool& pool) {
  if (w.rank() != 2 || w.dim(1) != k) {
    fail("gemm: weight of shape {} does not fit inputs of width {}", w.shape_string(), k);
  }
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16) {
    fail("gemm: weights of type {} need a quantised kernel (have f32, f16, bf16)", dtype_name(w.dtype));
  }
  const int64_t n = w.dim(0);
  if (m <= 0 || n <= 0) return;
  if (k == 0) {  // empty sum: the bias alone
    for (int64_t i = 0; i < m; ++i) {
      if (bias) {
        std::memcpy(y + i * n, bias, static_cast<size_t>(n) * sizeof(float));
      } else {
        std::fill(y + i * n, y + (i + 1) * n, 0.0f);
      }
    }
    return;
  }
  if (pool.size() == 1 || n < 32 || m * n * k < kMinParallelMacs) {
    leaf(x, m, k, w.data, w.dtype, n, bias, y, 0, n);
    return;
  }
  // One captured reference keeps the std::function in its small buffer: no allocation per call.
  struct Call {
    GemmColsFn leaf;
    const float *x, *bias;
    int64_t m, k, n;
    const void* w;
    DType wtype;
    float* y;
    int64_t chunk;
    std::atomic<int64_t> next;
  } call{leaf, x, bias, m, k, n, w.data, w.dtype, y,
         static_cast<int64_t>(dynamic_chunk(static_cast<size_t>(n), 16, pool.size())), 0};
  // Column chunks are claimed from a counter: a thread the OS deschedules does not hold up the others.
  pool.run([&call](int, int) {
    for (int64_t begin = call.next.fetch_add(call.chunk); begin < call.n; begin = call.next.fetch_add(call.chunk)) {
      call.leaf(call.x, call.m, call.k, call.w, call.wtype, call.n, call.bias, call.y, begin,
                std::min(call.n, begin + call.chunk));
    }
  });
}

}  // namespace minfer::kernels
