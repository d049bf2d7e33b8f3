// AVX-512 GEMM with f32 activations (f32 / f16 / bf16 weights, and W8A16): what is the ISA's own, the packed form's
// panel packer (a 16x16 register transpose) and the row counts from which the packed form beats the dot form. The
// tiles are gemm_packed_impl.h, gemm_dot_impl.h and w8a16_impl.h over avx512::Vec; the entry points gemm_isa.inc.
#include "kernels/x86/gemm_dot_impl.h"
#include "kernels/x86/gemm_packed_impl.h"
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/w8a16_impl.h"
#include "kernels/x86/x86_kernels.h"
#include "kernels/x86/x86_quant_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// From this many rows of X on, the packed form is used. Measured on Zen 5 (bench/micro/gemm_bench.cpp,
// strategy/*; single core, K = 896): the dot form reaches the FMA peak already (~175 GFLOP/s) for 16-bit
// weights and is ahead below 64 rows; the packed form ties from 64 rows on and re-reads W from memory 4x less
// often (240- vs 64-row blocks of X). With f32 weights the dot form is load-bound: packed wins from 32 rows
// (+15-25%).
constexpr int64_t kPackedMinRowsF32 = 32, kPackedMinRows16Bit = 64;

// The packed GEMM's panel packer (gemm_packed_impl.h, through gemm_isa.inc's Packer): 16 rows at a time widened and
// transposed in registers. buf[p * 32 + r] = W[r, p] for r < rows (zero beyond), p < kc.
template <class W, int kNr>
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

}  // namespace

#include "kernels/x86/gemm_isa.inc"

}  // namespace minfer::kernels::avx512
