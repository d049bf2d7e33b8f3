// AVX2 GEMM for many rows of X (prefill), and the choice between it and the dot-product form. The packed form
// of gemm_avx512.cpp with 8-wide vectors: panels of 16 weight rows x kKc columns widened to f32 and stored
// k-major, and a 6x16 register tile (12 accumulators of 16 registers) of broadcast-times-panel FMAs.
#include "kernels/x86/gemm_dot_impl.h"
#include "kernels/x86/vec_avx2.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;
constexpr int64_t kKc = 256;       // 16 KiB panel
constexpr int64_t kMc = kMr * 40;  // 240 rows of X per block
// From this many rows of X on, the packed form is used (measured as for AVX-512, with 256-bit code on Zen 5):
// with 16-bit weights the dot form stays at the FMA peak and the packed form (whose transpose is scalar)
// only ties from 128 rows; with f32 weights packed wins from 64 rows.
int64_t packed_min_rows(DType wtype) { return wtype == DType::F32 ? 64 : 256; }

// buf[p * 16 + r] = W[r, p] for r < rows (zero beyond), p < kc. Widening is vectorised, the transpose is not.
template <class W>
void pack_panel(const typename W::Elem* w, int64_t k, int64_t rows, int64_t kc, float* buf) {
  for (int64_t r = rows; r < kNr; ++r) {
    for (int64_t p = 0; p < kc; ++p) buf[p * kNr + r] = 0.0f;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const typename W::Elem* row = w + r * k;
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, W::load(row + p));
      for (int q = 0; q < 8; ++q) buf[(p + q) * kNr + r] = tmp[q];
    }
    for (; p < kc; ++p) buf[p * kNr + r] = W::scalar(row + p);
  }
}

template <int MR>
void micro_tile(const float* x, int64_t ldx, const float* panel, int64_t kc, float* y, int64_t ldy, int64_t nr,
                const float* bias, bool accumulate) {
  __m256 c0[MR];
  __m256 c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(panel + p * kNr);
    const __m256 b1 = _mm256_load_ps(panel + p * kNr + 8);
    for (int i = 0; i < MR; ++i) {
      // set1 of a plain load, not _mm256_broadcast_ss: with that builtin GCC 12 stores every accumulator to
      // the stack on each iteration.
      const __m256 a = _mm256_set1_ps(x[i * ldx + p]);
      c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
    }
  }
  const __m256i m0 = lane_mask(nr);
  const __m256i m1 = lane_mask(nr > 8 ? nr - 8 : 0);
  if (accumulate) {
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_add_ps(c0[i], _mm256_maskload_ps(y + i * ldy, m0));
      c1[i] = _mm256_add_ps(c1[i], _mm256_maskload_ps(y + i * ldy + 8, m1));
    }
  } else if (bias) {
    const __m256 bb0 = _mm256_maskload_ps(bias, m0);
    const __m256 bb1 = _mm256_maskload_ps(bias + 8, m1);
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_add_ps(c0[i], bb0);
      c1[i] = _mm256_add_ps(c1[i], bb1);
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm256_maskstore_ps(y + i * ldy, m0, c0[i]);
    _mm256_maskstore_ps(y + i * ldy + 8, m1, c1[i]);
  }
}

using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, const float*, bool);
constexpr MicroFn kMicro[kMr + 1] = {nullptr,       micro_tile<1>, micro_tile<2>, micro_tile<3>,
                                     micro_tile<4>, micro_tile<5>, micro_tile<6>};

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
        const float* bn = bias ? bias + nb : nullptr;
        for (int64_t i = 0; i < mc; i += kMr) {
          const int64_t mr = mc - i < kMr ? mc - i : kMr;
          kMicro[mr](x + (mb + i) * k + kb, k, panel, kc, y + (mb + i) * n + nb, n, nr, bn, kb > 0);
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

}  // namespace minfer::kernels::avx2
