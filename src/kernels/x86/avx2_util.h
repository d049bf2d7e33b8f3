// Helpers for the AVX2+FMA+F16C kernels; include only from *_avx2.cpp files. Everything here has internal
// linkage (anonymous namespace), so no out-of-line copy can be shared with code built for another ISA.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/x86/intrinsics.h"

namespace minfer::kernels::avx2 {
namespace {

// Lane masks for _mm256_maskload_ps / _mm256_maskstore_ps: the first n of 8 lanes (none for n <= 0, all from 8
// on), read from a table at an offset clamped without a branch.
alignas(32) constexpr int32_t kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
inline __m256i lane_mask(int64_t n) {
  const int64_t lanes = n < 0 ? 0 : (n > 8 ? 8 : n);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - lanes));
}
// The first n (< 8) floats, the rest zero, without touching memory past them.
inline __m256 load_partial(const float* p, int64_t n) { return _mm256_maskload_ps(p, lane_mask(n)); }
inline void store_partial(float* p, int64_t n, __m256 v) { _mm256_maskstore_ps(p, lane_mask(n), v); }

// The first n (< 8) elements at p widened by W, through a zeroed buffer, so no memory past them is read.
template <class W>
inline __m256 load_first(const typename W::Elem* p, int64_t n) {
  alignas(16) typename W::Elem tmp[16] = {};
  std::memcpy(tmp, p, static_cast<size_t>(n) * sizeof(typename W::Elem));
  return W::load(tmp);
}

// Weight element types, loaded 8 at a time as f32 (or the first n < 8, the rest zero).
struct F32W {
  using Elem = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load(const float* p, int64_t n) { return load_partial(p, n); }
  static float scalar(const float* p) { return *p; }
};
struct F16W {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 load(const uint16_t* p, int64_t n) { return load_first<F16W>(p, n); }
  static float scalar(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct Bf16W {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static __m256 load(const uint16_t* p, int64_t n) { return load_first<Bf16W>(p, n); }
  static float scalar(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

struct I8W {
  using Elem = int8_t;
  static __m256 load(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static __m256 load(const int8_t* p, int64_t n) { return load_first<I8W>(p, n); }
};
// KV codes (kernels/kv_format.h): OCP e4m3 bytes, loaded as f32 times 2^-8 (kUnit: the caller scales by 256). The
// byte's exponent and mantissa moved under an f16's (bias 15 against e4m3's 7) make an f16 of the value / 2^8,
// normals and subnormals alike, which the F16C conversion widens exactly.
struct Fp8W {
  using Elem = uint8_t;
  static constexpr float kUnit = 256.0f;
  static __m256 widen(__m128i b) {
    const __m128i x = _mm_cvtepu8_epi16(b);
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7f)), 7),
                                   _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x80)), 8));
    return _mm256_cvtph_ps(h);
  }
  static __m256 load(const uint8_t* p) { return widen(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static __m256 load(const uint8_t* p, int64_t n) { return load_first<Fp8W>(p, n); }
};
// q4_0 codes: 8 bytes, each holding two codes (low and high nibble), as two vectors of f32 code - 8.
struct Q4W {
  using Elem = uint8_t;
  static void load(const uint8_t* p, __m256& low, __m256& high) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i eight = _mm256_set1_epi32(8);
    low = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(15)), eight));
    high = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight));
  }
};

// Per-128-bit-lane sums of a0..a3 (lane-local partials still to be folded).
inline __m256 hsum4_lanes(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  return _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
}
// Sums of each of 4 vectors, as lanes 0..3.
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 t = hsum4_lanes(a0, a1, a2, a3);
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}
// Sums of each of 8 vectors, as lanes 0..7.
inline __m256 hsum8(const __m256* a) {
  const __m256 t0 = hsum4_lanes(a[0], a[1], a[2], a[3]);
  const __m256 t1 = hsum4_lanes(a[4], a[5], a[6], a[7]);
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}
inline float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hmax(__m256 a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace minfer::kernels::avx2
