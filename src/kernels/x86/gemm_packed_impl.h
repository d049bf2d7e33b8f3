// The packed GEMM of both x86 ISAs for many rows of X (prefill), written once over a vector-traits type V
// (vec_avx2.h, vec_avx512.h). A panel of NR = 2 vectors' worth of weight rows x kKc columns is widened to f32 and
// transposed once into an L1-sized buffer (k-major, NR floats per k) by the ISA's packer, then an MR x NR
// register tile of Y accumulates outer products: one broadcast of x[i, k] times the panel's two vectors per FMA
// pair. Weights are converted once per panel instead of once per row of X, and no horizontal sums are needed.
// Loops: row blocks of X (kept in L2) -> k blocks -> weight panels -> MR-row tiles; each weight element is read
// from memory once per row block. MR follows the register file (12 rows: 24 accumulators of AVX-512's 32
// registers; 6 rows: 12 of AVX2's 16). Instantiated in gemm_<isa>.cpp (internal linkage), whose packer
// (Packer::pack<W>(w, k, rows, kc, buf): buf[p * NR + r] = W[r, p], zero for r >= rows) is what differs: a
// 16x16 register transpose on AVX-512, a scalar one on AVX2.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/x86/vec_common.h"
#include "tensor/dtype.h"

namespace minfer::kernels::x86 {
namespace {

template <class V>
struct PackedShape {
  static constexpr int kMr = kWide<V> ? 12 : 6;                // rows of X per register tile
  static constexpr int kNr = 2 * static_cast<int>(V::kWidth);  // weight rows per panel (two vectors of Y)
  static constexpr int64_t kKc = 256;                          // k per panel
  static constexpr int64_t kMc = 240;  // rows of X per block: 240 x kKc x 4 B = 240 KiB, a quarter of L2
};

// Y[0:MR, 0:nr] += or = X[0:MR, 0:kc] * panel (+ bias on the first k block).
template <class V, int MR>
void micro_tile(const float* x, int64_t ldx, const float* panel, int64_t kc, float* y, int64_t ldy, int64_t nr,
                const float* bias, bool accumulate) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kWidth, NR = PackedShape<V>::kNr;
  Reg c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = V::zero();
  for (int64_t p = 0; p < kc; ++p) {
    const Reg b0 = V::load_aligned(panel + p * NR), b1 = V::load_aligned(panel + p * NR + L);
    for (int i = 0; i < MR; ++i) {
      // set1 of a plain load, not a broadcast builtin: with _mm256_broadcast_ss GCC 12 stores every accumulator
      // to the stack on each iteration.
      const Reg a = V::set1(x[i * ldx + p]);
      c0[i] = V::fmadd(a, b0, c0[i]);
      c1[i] = V::fmadd(a, b1, c1[i]);
    }
  }
  const typename V::Mask m0 = V::mask(nr), m1 = V::mask(nr > L ? nr - L : 0);
  if (accumulate) {
    for (int i = 0; i < MR; ++i) {
      c0[i] = V::add(c0[i], V::load_masked(y + i * ldy, m0));
      c1[i] = V::add(c1[i], V::load_masked(y + i * ldy + L, m1));
    }
  } else if (bias) {
    const Reg bb0 = V::load_masked(bias, m0), bb1 = V::load_masked(bias + L, m1);
    for (int i = 0; i < MR; ++i) {
      c0[i] = V::add(c0[i], bb0);
      c1[i] = V::add(c1[i], bb1);
    }
  }
  for (int i = 0; i < MR; ++i) {
    V::store_masked(y + i * ldy, m0, c0[i]);
    V::store_masked(y + i * ldy + L, m1, c1[i]);
  }
}

template <class V, std::size_t... I>
constexpr auto micro_table(std::index_sequence<I...>) {
  using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, const float*, bool);
  return std::array<MicroFn, sizeof...(I) + 1>{nullptr, &micro_tile<V, static_cast<int>(I) + 1>...};
}

template <class V, class Packer, class W>
void packed_cols(const float* x, int64_t m, int64_t k, const typename W::Elem* w, int64_t n, const float* bias,
                 float* y, int64_t n0, int64_t n1) {
  using S = PackedShape<V>;
  static constexpr auto kMicro = micro_table<V>(std::make_index_sequence<S::kMr>());
  alignas(64) float panel[S::kKc * S::kNr];
  for (int64_t mb = 0; mb < m; mb += S::kMc) {
    const int64_t mc = m - mb < S::kMc ? m - mb : S::kMc;
    for (int64_t kb = 0; kb < k; kb += S::kKc) {
      const int64_t kc = k - kb < S::kKc ? k - kb : S::kKc;
      for (int64_t nb = n0; nb < n1; nb += S::kNr) {
        const int64_t nr = n1 - nb < S::kNr ? n1 - nb : S::kNr;
        Packer::template pack<W>(w + nb * k + kb, k, nr, kc, panel);
        const float* bn = bias ? bias + nb : nullptr;
        for (int64_t i = 0; i < mc; i += S::kMr) {
          const int64_t mr = mc - i < S::kMr ? mc - i : S::kMr;
          kMicro[static_cast<size_t>(mr)](x + (mb + i) * k + kb, k, panel, kc, y + (mb + i) * n + nb, n, nr, bn,
                                          kb > 0);
        }
      }
    }
  }
}

template <class V, class Packer, class F32W, class F16W, class Bf16W>
void gemm_cols_packed(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                      float* y, int64_t n0, int64_t n1) {
  switch (wtype) {
    case DType::F16: return packed_cols<V, Packer, F16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    case DType::BF16:
      return packed_cols<V, Packer, Bf16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    default: return packed_cols<V, Packer, F32W>(x, m, k, static_cast<const float*>(w), n, bias, y, n0, n1);
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
