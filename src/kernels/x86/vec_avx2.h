// avx2::Vec: the vector-traits type the shared x86 kernel templates (*_impl.h) are written over, for AVX2: 8 f32
// lanes, tails by lane masks. Include only from *_avx2.cpp files (internal linkage, as avx2_util.h).
#pragma once

#include <cmath>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/vec_common.h"

namespace minfer::kernels::avx2 {
namespace {

struct Vec : x86::VecOps<Vec> {
  using Reg = __m256;
  static constexpr int64_t kWidth = 8;
  using F32 = F32W;  // the loader of f32 "weights" (for data already widened)
  static constexpr int kRegisters = 16;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float f) { return _mm256_set1_ps(f); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load_aligned(const float* p) { return _mm256_load_ps(p); }
  // A lane mask made once for several masked loads and stores of the first n lanes.
  using Mask = __m256i;
  static Mask mask(int64_t n) { return lane_mask(n); }
  static Reg load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store_masked(float* p, Mask m, Reg v) { _mm256_maskstore_ps(p, m, v); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  // Lanes past n are -inf, so they do not win a max.
  static Reg load_tail_or_min(const float* p, int64_t n) {
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), load_partial(p, n), _mm256_castsi256_ps(lane_mask(n)));
  }
  // v with lanes past n zeroed.
  static Reg keep_first(Reg v, int64_t n) { return _mm256_and_ps(v, _mm256_castsi256_ps(lane_mask(n))); }

  // A tail made once for many loads of the same width: a count here (a mask register on AVX-512).
  struct Tail {
    int64_t n;
  };
  static Tail tail(int64_t n) { return Tail{n}; }
  template <class W>
  static Reg load_weights_tail(const typename W::Elem* p, Tail t) {
    return t.n >= kWidth ? W::load(p) : W::load(p, t.n);
  }
  // Stores the first t lanes of v where the buffer has room for a whole vector: a whole store here (cheaper than a
  // masked one on AVX2; the lanes past t hold what the caller's padding allows).
  static void store_padded(float* p, Tail, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  // Lanes below n (any n; <= 0: none) from v, the others from fallback.
  static Reg select_first(Reg fallback, Reg v, int64_t n) {
    return _mm256_blendv_ps(fallback, v, _mm256_castsi256_ps(lane_mask(n)));
  }

  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  static Reg round(Reg v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p 2^n for integral n in [-150, 129], the end of exp: two exact power-of-two factors, so that overflow gives inf
  // and underflow is gradual.
  static Reg scale_pow2(Reg p, Reg n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  }
  static Reg swap_pairs(Reg v) { return _mm256_permute_ps(v, 0xb1); }  // lanes (0 1)(2 3)... exchanged
  static float reduce_add(Reg v) { return hsum(v); }
  // The sums of 8 / 4 vectors as the lanes of one (x86::store_sums).
  static __m256 sums8(const Reg* a) { return hsum8(a); }
  static __m128 sums4(Reg a0, Reg a1, Reg a2, Reg a3) { return hsum4(a0, a1, a2, a3); }
  static float reduce_max(Reg v) { return hmax(v); }
};

}  // namespace
}  // namespace minfer::kernels::avx2
