// AVX2 GEMM with f32 activations (f32 / f16 / bf16 weights, and W8A16): what is the ISA's own, the packed form's
// panel packer (widening 8 at a time, transposing element by element) and the row counts from which the packed form
// beats the dot form. The tiles are gemm_packed_impl.h (6x16 register tiles), gemm_dot_impl.h and w8a16_impl.h over
// avx2::Vec; the entry points gemm_isa.inc.
#include "kernels/x86/gemm_dot_impl.h"
#include "kernels/x86/gemm_packed_impl.h"
#include "kernels/x86/vec_avx2.h"
#include "kernels/x86/w8a16_impl.h"
#include "kernels/x86/x86_kernels.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx2 {
namespace {

// From this many rows of X on, the packed form is used (measured as for AVX-512, with 256-bit code on Zen 5):
// with 16-bit weights the dot form stays at the FMA peak and the packed form (whose transpose is scalar)
// only ties from 128 rows; with f32 weights packed wins from 64 rows.
constexpr int64_t kPackedMinRowsF32 = 64, kPackedMinRows16Bit = 256;

// The packed GEMM's panel packer (gemm_packed_impl.h, through gemm_isa.inc's Packer): widened 8 at a time, transposed
// element by element. buf[p * 16 + r] = W[r, p] for r < rows (zero beyond), p < kc. Widening is vectorised, the
// transpose is not.
template <class W, int kNr>
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

}  // namespace

#include "kernels/x86/gemm_isa.inc"

}  // namespace minfer::kernels::avx2
