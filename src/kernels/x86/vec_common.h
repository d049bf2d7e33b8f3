// What avx2::Vec and avx512::Vec (vec_avx2.h, vec_avx512.h) build from their own primitives in the same way,
// written once over the vector-traits type V: which register file it has, the range reduction and polynomial of exp,
// and the horizontal sums that end a dot-product tile. Internal linkage (anonymous namespace), like the Vec types: each
// ISA's files compile their own copy with their own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

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
