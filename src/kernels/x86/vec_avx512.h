// avx512::Vec: the vector-traits type the shared x86 kernel templates (*_impl.h) are written over, for AVX-512:
// 16 f32 lanes, tails by mask registers. Include only from *_avx512.cpp files (internal linkage, as
// avx512_util.h).
#pragma once

#include <cmath>

#include "kernels/x86/avx512_util.h"
#include "kernels/x86/vec_common.h"

namespace minfer::kernels::avx512 {
namespace {

struct Vec : x86::VecOps<Vec> {
  using Reg = __m512;
  static constexpr int64_t kWidth = 16;
  using F32 = F32W;  // the loader of f32 "weights" (for data already widened)
  static constexpr int kRegisters = 32;

  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float f) { return _mm512_set1_ps(f); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load_aligned(const float* p) { return _mm512_load_ps(p); }
  // A lane mask made once for several masked loads and stores of the first n lanes.
  using Mask = __mmask16;
  static Mask mask(int64_t n) { return tail_mask(n); }
  static Reg load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  // Lanes past n are -inf, so they do not win a max.
  static Reg load_tail_or_min(const float* p, int64_t n) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n), p);
  }
  // v with lanes past n zeroed.
  static Reg keep_first(Reg v, int64_t n) { return _mm512_maskz_mov_ps(tail_mask(n), v); }

  // A tail made once for many loads of the same width: a mask register here (a count on AVX2).
  using Tail = __mmask16;
  static Tail tail(int64_t n) { return tail_mask(n); }
  template <class W>
  static Reg load_weights_tail(const typename W::Elem* p, Tail t) {
    return W::load(p, t);
  }
  // Stores the first t lanes of v (the buffer has room for a whole vector; a masked store here: GCC keeps
  // accumulators in registers only when no masked store indexes them, so callers store whole vectors elsewhere).
  static void store_padded(float* p, Tail t, Reg v) { _mm512_mask_storeu_ps(p, t, v); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  // Lanes below n (any n; <= 0: none) from v, the others from fallback.
  static Reg select_first(Reg fallback, Reg v, int64_t n) { return _mm512_mask_mov_ps(fallback, tail_mask(n), v); }

  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static Reg round(Reg v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p 2^n, the end of exp: scalef overflows to inf and underflows gradually.
  static Reg scale_pow2(Reg p, Reg n) { return _mm512_scalef_ps(p, n); }
  static Reg swap_pairs(Reg v) { return _mm512_permute_ps(v, 0xb1); }  // lanes (0 1)(2 3)... exchanged
  static float reduce_add(Reg v) { return hsum(v); }
  // The sums of 8 / 4 vectors as the lanes of one (x86::store_sums).
  static __m256 sums8(const Reg* a) { return hsum8(a); }
  static __m128 sums4(Reg a0, Reg a1, Reg a2, Reg a3) { return hsum4(a0, a1, a2, a3); }
  static float reduce_max(Reg v) { return _mm512_reduce_max_ps(v); }
};

}  // namespace
}  // namespace minfer::kernels::avx512
