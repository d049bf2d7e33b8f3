// What avx2::Vec and avx512::Vec (vec_avx2.h, vec_avx512.h) build from their own primitives in the same way,
// written once over the vector-traits type V: which register file it has, the CRTP base VecOps (lane arithmetic,
// tail loads and stores, weight loads, exp), the range reduction and polynomial of exp, and the horizontal sums that
// end a dot-product tile. Internal linkage (anonymous namespace), like the Vec types: each
// ISA's files compile their own copy with their own flags.
#pragma once

#include <cstdint>

#include "kernels/x86/intrinsics.h"

namespace minfer::kernels::x86 {
namespace {

// AVX-512's 32 registers (AVX2 has 16): the shared templates size their register tiles by it.
template <class V>
inline constexpr bool kWide = V::kRegisters >= 32;

// exp(x) = 2^n e^r with n = round(x / ln2), |r| <= ln2/2, e^r by the Cephes expf polynomial (about 1 ulp). Returns
// e^r and sets n; the ISA applies 2^n (V::exp), so that overflow gives inf and underflow is gradual. The clamp
// keeps n finite and preserves NaN.
template <class V>
inline typename V::Reg exp_reduced(typename V::Reg x, typename V::Reg& n) {
  using Reg = typename V::Reg;
  x = V::max(V::set1(-104.0f), V::min(V::set1(89.0f), x));
  n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  Reg r = V::fnmadd(n, V::set1(0.693359375f), x);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  Reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  return V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
}

// The members of avx2::Vec and avx512::Vec that are the same composition of each ISA's primitives (a CRTP base:
// struct Vec : VecOps<Vec>; R is always V::Reg, deduced because V is incomplete here). The arithmetic is GCC's
// vector operators, which is what _mm256_add_ps and _mm512_add_ps expand to.
template <class V>
struct VecOps {
  template <class R>
  static R add(R a, R b) {
    return a + b;
  }
  template <class R>
  static R sub(R a, R b) {
    return a - b;
  }
  template <class R>
  static R mul(R a, R b) {
    return a * b;
  }
  template <class R>
  static R div(R a, R b) {
    return a / b;
  }
  // The first n lanes (all when n >= kWidth), the rest zero; no memory past them is touched.
  static auto load_tail(const float* p, int64_t n) { return V::load_masked(p, V::mask(n)); }
  template <class R>
  static void store_tail(float* p, int64_t n, R v) {
    V::store_masked(p, V::mask(n), v);
  }
  // Weights of element type W (F32W, F16W, Bf16W, I8W), widened to f32; V::load_weights_tail<W>(p, V::tail(n))
  // the first n of them.
  template <class W>
  static auto load_weights(const typename W::Elem* p) {
    return W::load(p);
  }
  template <class R>
  static R exp(R x) {
    R n;
    const R p = exp_reduced<V>(x, n);
    return V::scale_pow2(p, n);
  }
};

// y[j] = the sum of acc[j]'s lanes (+ bias[j]), j < NR: the end of a dot-product tile. V::sums8 / V::sums4 give
// the sums of 8 / 4 vectors as the lanes of one 256- / 128-bit vector.
template <class V, int NR>
inline void store_sums(const typename V::Reg* acc, float* y, const float* bias) {
  if constexpr (NR == 8) {
    __m256 s = V::sums8(acc);
    if (bias) s = _mm256_add_ps(s, _mm256_loadu_ps(bias));
    _mm256_storeu_ps(y, s);
  } else if constexpr (NR == 4) {
    __m128 s = V::sums4(acc[0], acc[1], acc[2], acc[3]);
    if (bias) s = _mm_add_ps(s, _mm_loadu_ps(bias));
    _mm_storeu_ps(y, s);
  } else {
    for (int j = 0; j < NR; ++j) y[j] = V::reduce_add(acc[j]) + (bias ? bias[j] : 0.0f);
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
