// AVX2 GEMM: what is the ISA's own (the packed form's panel packer, widening 8 at a time and transposing element
// by element, and the row count from which the packed form beats the dot form); the tiles are gemm_packed_impl.h
// (6x16 register tiles) and gemm_dot_impl.h over avx2::Vec.
#include "kernels/x86/gemm_dot_impl.h"
#include "kernels/x86/gemm_packed_impl.h"
#include "kernels/x86/vec_avx2.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

constexpr int kNr = x86::PackedShape<Vec>::kNr;  // 16 weight rows per panel
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

// The packed GEMM's panels (gemm_packed_impl.h): widened 8 at a time, transposed element by element.
struct Packer {
  template <class W>
  static void pack(const typename W::Elem* w, int64_t k, int64_t rows, int64_t kc, float* buf) {
    pack_panel<W>(w, k, rows, kc, buf);
  }
};

}  // namespace

void gemm_cols_dot(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                   float* y, int64_t n0, int64_t n1) {
  x86::gemm_cols_dot<Vec, F32W, F16W, Bf16W>(x, m, k, w, wtype, n, bias, y, n0, n1);
}

void gemm_cols_packed(const float* x, int64_t m, int64_t k, const void* w, DType wtype, int64_t n, const float* bias,
                      float* y, int64_t n0, int64_t n1) {
  x86::gemm_cols_packed<Vec, Packer, F32W, F16W, Bf16W>(x, m, k, w, wtype, n, bias, y, n0, n1);
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
