#include "kernels/fused/gemm_epilogues.h"

#include <cstring>

#include "kernels/dispatch.h"

namespace minfer::kernels::fused {
namespace {

void apply_residual(const void* ctx, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) {
  const auto& e = *static_cast<const ResidualEpilogue*>(ctx);
  // add(y, residual) = o + x: the same sum as the unfused add(x, o), since float addition commutes.
  for (int64_t r = 0; r < m; ++r) e.leaves->add(y + r * n + n0, e.residual + r * n + n0, y + r * n + n0, n1 - n0);
}

void apply_gated_act(const void* ctx, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) {
  const auto& e = *static_cast<const GatedActEpilogue*>(ctx);
  const int64_t width = n / 2;
  for (int64_t c = n0; c < n1; c += 2 * e.block) {
    const int64_t f0 = c / 2;
    const int64_t len = width - f0 < e.block ? width - f0 : e.block;
    for (int64_t r = 0; r < m; ++r) e.gated(y + r * n + c, y + r * n + c + len, e.out + r * width + f0, len);
  }
}

void apply_rope_kv_write(const void* ctx, float* y, int64_t m, int64_t n, int64_t n0, int64_t n1) {
  const auto& e = *static_cast<const RopeKvWriteEpilogue*>(ctx);
  const int64_t hd = e.head_dim;
  const int64_t kv_end = 2 * e.cache.kv_heads * hd;
  const int64_t q_width = e.heads * hd;
  const RopeFn rope = e.table->leaves->rope;
  const RmsnormFn norm = e.table->leaves->rmsnorm;  // in place, a head at a time
  const void* k_norm_w = e.k_norm ? e.k_norm->data : nullptr;
  // K/V pairs: tiles are 2 * head_dim aligned, so a pair is never split.
  for (int64_t c = n0; c < n1 && c < kv_end; c += 2 * hd) {
    const int64_t g = c / (2 * hd);
    for (int64_t r = 0; r < m; ++r) {
      float* k = y + r * n + c;
      if (e.k_norm) norm(k, k_norm_w, e.k_norm->dtype, e.head_norm_eps, k, 1, hd);
      rope(k, e.cos + r * e.half_rot, e.sin + r * e.half_rot, 1, 1, hd, e.half_rot, e.style);
      kv_write_head(e.cache, g, k, k + hd, e.slot_mapping[r]);
    }
  }
  // Query heads [h0, h1) of this tile.
  const int64_t q0 = n0 > kv_end ? n0 : kv_end;
  if (q0 >= n1) return;
  const int64_t h0 = (q0 - kv_end) / hd;
  const int64_t h1 = (n1 - kv_end) / hd;
  for (int64_t r = 0; r < m; ++r) {
    float* q = y + r * n + q0;
    if (e.q_norm) norm(q, e.q_norm->data, e.q_norm->dtype, e.head_norm_eps, q, h1 - h0, hd);
    rope(q, e.cos + r * e.half_rot, e.sin + r * e.half_rot, 1, h1 - h0, hd, e.half_rot, e.style);
    std::memcpy(e.q_out + r * q_width + h0 * hd, q, static_cast<size_t>((h1 - h0) * hd) * sizeof(float));
  }
}

}  // namespace

GemmEpilogue ResidualEpilogue::as_epilogue() const { return GemmEpilogue{apply_residual, this, 1}; }

GemmEpilogue GatedActEpilogue::as_epilogue() const { return GemmEpilogue{apply_gated_act, this, 2 * block}; }

GemmEpilogue RopeKvWriteEpilogue::as_epilogue() const { return GemmEpilogue{apply_rope_kv_write, this, 2 * head_dim}; }

}  // namespace minfer::kernels::fused
