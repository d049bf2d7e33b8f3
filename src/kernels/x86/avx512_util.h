// Helpers for the AVX-512 kernels; include only from *_avx512.cpp files. Everything here has internal
// linkage (anonymous namespace), so no out-of-line copy can be shared with code built for another ISA.
#pragma once

#include <cstdint>

#include "kernels/x86/intrinsics.h"

namespace minfer::kernels::avx512 {
namespace {

// Weight element types, loaded 16 at a time (or the first n < 16, the rest zero) as f32.
struct F32W {
  using Elem = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16W {
  using Elem = uint16_t;
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct Bf16W {
  using Elem = uint16_t;
  // bf16 is the top half of an f32: widen and shift.
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

struct I8W {
  using Elem = int8_t;
  static __m512 widen(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }
  static __m512 load(const int8_t* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // A plain load when the mask covers every lane (the common case: lanes inside a group).
  static __m512 load(const int8_t* p, __mmask16 m) { return m == 0xffff ? load(p) : widen(_mm_maskz_loadu_epi8(m, p)); }
};

// KV codes (kernels/kv_format.h): OCP e4m3 bytes, loaded as f32 times 2^-8 (kUnit: the caller scales by 256). The
// byte's exponent and mantissa moved under an f16's (bias 15 against e4m3's 7) make an f16 of the value / 2^8,
// normals and subnormals alike, which the F16C conversion widens exactly.
struct Fp8W {
  using Elem = uint8_t;
  static constexpr float kUnit = 256.0f;
  static __m512 widen(__m128i b) {
    const __m256i x = _mm256_cvtepu8_epi16(b);
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x7f)), 7),
                                      _mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8));
    return _mm512_cvtph_ps(h);
  }
  static __m512 load(const uint8_t* p) { return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static __m512 load(const uint8_t* p, __mmask16 m) { return widen(_mm_maskz_loadu_epi8(m, p)); }
};
// q4_0 codes: 16 bytes, each holding two codes (low and high nibble), as two vectors of f32 code - 8.
struct Q4W {
  using Elem = uint8_t;
  static void load(const uint8_t* p, __m512& low, __m512& high) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i eight = _mm512_set1_epi32(8);
    low = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(15)), eight));
    high = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(b, 4), eight));
  }
};

// The first n of 16 lanes (none for n <= 0, all from 16 on): 2^clamp(n, 0, 16) - 1. Branch-free, because in the
// attention leaves n varies from row to row and a branch on it mispredicts.
inline __mmask16 tail_mask(int64_t n) {
  const unsigned lanes = static_cast<unsigned>(n < 0 ? 0 : (n > 16 ? 16 : n));
  return static_cast<__mmask16>((1u << lanes) - 1u);
}

// Sums of each of 4 vectors, as lanes 0..3. Pairwise shuffles instead of four separate reductions.
inline __m128 hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  // Each 128-bit lane now holds [a0, a1, a2, a3] partial sums of that lane.
  const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xee));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Sums of each of 8 vectors, as lanes 0..7.
inline __m256 hsum8(const __m512* a) {
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
  const __m512 s45 = _mm512_add_ps(_mm512_unpacklo_ps(a[4], a[5]), _mm512_unpackhi_ps(a[4], a[5]));
  const __m512 s67 = _mm512_add_ps(_mm512_unpacklo_ps(a[6], a[7]), _mm512_unpackhi_ps(a[6], a[7]));
  const __m512 t0 = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xee));
  const __m512 t1 = _mm512_add_ps(_mm512_shuffle_ps(s45, s67, 0x44), _mm512_shuffle_ps(s45, s67, 0xee));
  // Lanes of u: [t0.L0+t0.L2, t0.L1+t0.L3, t1.L0+t1.L2, t1.L1+t1.L3].
  const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(t0, t1, 0x44), _mm512_shuffle_f32x4(t0, t1, 0xee));
  const __m512 v = _mm512_shuffle_f32x4(u, u, 0xd8);  // [u.L0, u.L2, u.L1, u.L3]
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

inline float hsum(__m512 a) { return _mm512_reduce_add_ps(a); }

// In-register transpose of a 16x16 block of 32-bit elements: on return v[c] holds column c of the input rows.
inline void transpose16(__m512* v) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  __m512 u[16];  // u[4b + c]: column 4L + c of rows 4b..4b+3, in each 128-bit lane L
  for (int b = 0; b < 4; ++b) {
    const __m512* tb = t + 4 * b;
    u[4 * b + 0] = _mm512_shuffle_ps(tb[0], tb[2], 0x44);
    u[4 * b + 1] = _mm512_shuffle_ps(tb[0], tb[2], 0xee);
    u[4 * b + 2] = _mm512_shuffle_ps(tb[1], tb[3], 0x44);
    u[4 * b + 3] = _mm512_shuffle_ps(tb[1], tb[3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 a0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 a1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 b0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 b1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    v[c] = _mm512_shuffle_f32x4(a0, b0, 0x88);
    v[8 + c] = _mm512_shuffle_f32x4(a0, b0, 0xdd);
    v[4 + c] = _mm512_shuffle_f32x4(a1, b1, 0x88);
    v[12 + c] = _mm512_shuffle_f32x4(a1, b1, 0xdd);
  }
}

// Stores an MR x 32 register tile of a packed GEMM (columns masked by m0/m1): added to what y holds when
// accumulating over k blocks, else with the bias (if any) added.
template <int MR>
inline void store_tile(__m512* c0, __m512* c1, float* y, int64_t ldy, __mmask16 m0, __mmask16 m1, const float* bias,
                       bool accumulate) {
  if (accumulate) {
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, y + i * ldy));
      c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, y + i * ldy + 16));
    }
  } else if (bias) {
    const __m512 bb0 = _mm512_maskz_loadu_ps(m0, bias);
    const __m512 bb1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_add_ps(c0[i], bb0);
      c1[i] = _mm512_add_ps(c1[i], bb1);
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, m0, c0[i]);
    _mm512_mask_storeu_ps(y + i * ldy + 16, m1, c1[i]);
  }
}

}  // namespace
}  // namespace minfer::kernels::avx512
