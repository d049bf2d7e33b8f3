// AVX-512 GEMM for many rows of X (prefill), and the choice between it and the dot-product form.
//
// Packed form: a panel of 32 weight rows x kKc columns is widened to f32 and transposed once into an L1-sized
// buffer (k-major, 32 floats per k), then a 12x32 register tile of Y accumulates outer products: one
// broadcast of x[i, k] times two vectors of the panel per FMA pair. Weights are converted once per panel
// instead of once per row of X, and no horizontal sums are needed. Loops: row blocks of X (kept in L2) ->
// k blocks -> weight panels -> 12-row tiles; each weight element is read from memory once per row block.
#include "kernels/x86/gemm_dot_impl.h"
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int kMr = 12;            // rows of X per register tile (24 accumulators of 32 registers)
constexpr int kNr = 32;            // weight rows per panel (two vectors of Y)
constexpr int64_t kKc = 256;       // k per panel: 32 KiB of f32
constexpr int64_t kMc = kMr * 20;  // rows of X per block: 240 x kKc x 4 B = 240 KiB, a quarter of L2

// From this many rows of X on, the packed form is used. Measured on Zen 5 (bench/micro/gemm_bench.cpp,
// strategy/*; single core, K = 896): the dot form reaches the FMA peak already (~175 GFLOP/s) for 16-bit
// weights and is ahead below 64 rows; the packed form ties from 64 rows on and re-reads W from memory 4x less
// often (240- vs 64-row blocks of X). With f32 weights the dot form is load-bound: packed wins from 32 rows
// (+15-25%).
int64_t packed_min_rows(DType wtype) { return wtype == DType::F32 ? 32 : 64; }

// buf[p * 32 + r] = W[r, p] for r < rows (zero beyond), p < kc.
template <class W>
void pack_panel(const typename W::Elem* w, int64_t k, int64_t rows, int64_t kc, float* buf) {
  for (int64_t r0 = 0; r0 < kNr; r0 += 16) {
    const int64_t nr = rows - r0 < 0 ? 0 : (rows - r0 > 16 ? 16 : rows - r0);
    for (int64_t p = 0; p < kc; p += 16) {
      const int64_t np = kc - p < 16 ? kc - p : 16;
      const __mmask16 mask = tail_mask(np);
      __m512 v[16];
      for (int64_t r = 0; r < 16; ++r) v[r] = r < nr ? W::load(w + (r0 + r) * k + p, mask) : _mm512_setzero_ps();
      transpose16(v);
      for (int64_t c = 0; c < np; ++c) _mm512_store_ps(buf + (p + c) * kNr + r0, v[c]);
    }
  }
}

// Y[0:MR, 0:32] (masked to the valid columns) += or = X[0:MR, 0:kc] * panel (+ bias on the first k block).
template <int MR>
void micro_tile(const float* x, int64_t ldx, const float* panel, int64_t kc, float* y, int64_t ldy, __mmask16 m0,
                __mmask16 m1, const float* bias, bool accumulate) {
  __m512 c0[MR];
  __m512 c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(panel + p * kNr);
    const __m512 b1 = _mm512_load_ps(panel + p * kNr + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + p]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
  }
  store_tile<MR>(c0, c1, y, ldy, m0, m1, bias, accumulate);
}

using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask16, __mmask16,
                         const float*, bool);
constexpr MicroFn kMicro[kMr + 1] = {nullptr,        micro_tile<1>,  micro_tile<2>, micro_tile<3>, micro_tile<4>,
                                     micro_tile<5>,  micro_tile<6>,  micro_tile<7>, micro_tile<8>, micro_tile<9>,
                                     micro_tile<10>, micro_tile<11>, micro_tile<12>};

template <class W>
void packed_cols(const float* x, int64_t m, int64_t k, const typename W::Elem* w, int64_t n, const float* bias,
                 float* y, int64_t n0, int64_t n1) {
  alignas(64) float panel[kKc * kNr];
  for (int64_t mb = 0; mb < m; mb += kMc) {
    const int64_t mc = m - mb < kMc ? m - mb : kMc;
    for (int64_t kb = 0; kb < k; kb += kKc) {
      const int64_t kc = k - kb < kKc ? k - kb : kKc;
      for (int64_t nb = n0; nb < n1; nb += kNr) {
        const int64_t nr = n1 - nb < kNr ? n1 - nb : kNr;
        pack_panel<W>(w + nb * k + kb, k, nr, kc, panel);
        const __mmask16 m0 = tail_mask(nr);
        const __mmask16 m1 = tail_mask(nr > 16 ? nr - 16 : 0);
        const float* bn = bias ? bias + nb : nullptr;
        for (int64_t i = 0; i < mc; i += kMr) {
          const int64_t mr = mc - i < kMr ? mc - i : kMr;
          kMicro[mr](x + (mb + i) * k + kb, k, panel, kc, y + (mb + i) * n + nb, n, m0, m1, bn, kb > 0);
        }
      }
    }
  }
}

}  // namespace

void gemm_cols_dot(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                   float* y, int64_t n0, int64_t n1) {
  x86::gemm_cols_dot<Vec, F32W, F16W, Bf16W>(x, m, k, w, wtype, n, bias, y, n0, n1);
}

void gemm_cols_packed(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                      float* y, int64_t n0, int64_t n1) {
  switch (wtype) {
    case DType::F16: return packed_cols<F16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    case DType::BF16: return packed_cols<Bf16W>(x, m, k, static_cast<const uint16_t*>(w), n, bias, y, n0, n1);
    default: return packed_cols<F32W>(x, m, k, static_cast<const float*>(w), n, bias, y, n0, n1);
  }
}

void gemm_cols(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias, float* y,
               int64_t n0, int64_t n1) {
  if (m < packed_min_rows(wtype)) {
    gemm_cols_dot(x, m, k, w, wtype, n, bias, y, n0, n1);
  } else {
    gemm_cols_packed(x, m, k, w, wtype, n, bias, y, n0, n1);
  }
}

}  // namespace minfer::kernels::avx512
