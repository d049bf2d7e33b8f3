// Attention without a mask or a cache (a vision encoder's patches), as GEMMs: per head, the scores of a block of
// queries against every key by kernels::gemm (the keys packed as its [keys, head_dim] weight), the rows soft-maxed,
// then the values by a second GEMM (packed as [head_dim, keys]). The paged leaves do this too, but their spans of 16
// queries re-read every key per span and their masks are built for causal rows; at 4096 patches per image the GEMMs
// run the same arithmetic at the GEMM's rate.
#include <algorithm>

#include "base/error.h"
#include "kernels/kernels.h"

namespace minfer::kernels {
namespace {

constexpr int64_t kQueryBlock = 512;  // scores of 512 queries x 4096 keys: 8 MB, reused while the block's values run

}  // namespace

void encoder_attention(const float* q, const float* k, const float* v, float* out, int64_t n, int64_t heads,
                       int64_t head_dim, float scale, ThreadPool& pool) {
  MINFER_CHECK(n > 0 && heads > 0 && head_dim > 0, "encoder_attention: {} rows of {} heads of {}", n, heads, head_dim);
  const int64_t width = heads * head_dim;
  Tensor keys = Tensor::allocate(DType::F32, {n, head_dim});
  Tensor values_t = Tensor::allocate(DType::F32, {head_dim, n});
  std::vector<float> qb(static_cast<size_t>(std::min(n, kQueryBlock) * head_dim));
  std::vector<float> scores(static_cast<size_t>(std::min(n, kQueryBlock) * n));
  std::vector<float> ob(qb.size());
  for (int64_t h = 0; h < heads; ++h) {
    float* kd = keys.mutable_as<float>();
    float* vt = values_t.mutable_as<float>();
    pool.parallel_for(static_cast<size_t>(n), 64, [&](size_t b, size_t e) {
      for (auto j = static_cast<int64_t>(b); j < static_cast<int64_t>(e); ++j) {
        const float* kr = k + j * width + h * head_dim;
        const float* vr = v + j * width + h * head_dim;
        std::copy(kr, kr + head_dim, kd + j * head_dim);
        for (int64_t d = 0; d < head_dim; ++d) vt[d * n + j] = vr[d];
      }
    });
    for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
      const int64_t m = std::min(kQueryBlock, n - q0);
      for (int64_t i = 0; i < m; ++i) {
        const float* qr = q + (q0 + i) * width + h * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) qb[static_cast<size_t>(i * head_dim + d)] = qr[d] * scale;
      }
      gemm(qb.data(), m, head_dim, keys, nullptr, scores.data(), pool);
      pool.parallel_for(static_cast<size_t>(m), 8, [&](size_t b, size_t e) {
        softmax(scores.data() + static_cast<int64_t>(b) * n, static_cast<int64_t>(e - b), n);
      });
      gemm(scores.data(), m, n, values_t, nullptr, ob.data(), pool);
      for (int64_t i = 0; i < m; ++i)
        std::copy(ob.data() + i * head_dim, ob.data() + (i + 1) * head_dim, out + (q0 + i) * width + h * head_dim);
    }
  }
}

}  // namespace minfer::kernels
