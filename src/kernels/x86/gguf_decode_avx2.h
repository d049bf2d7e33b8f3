// Vector decoders of the GGUF block types into the form of kernels/gguf_blocks.h (bytes u, per-16 scales d and
// offsets m), 32 bytes at a time with AVX2: the same values as the scalar decoders there, which the unit test checks.
// The scales of a block are few and stay scalar. Included by the AVX2 and the AVX-512 leaves (both are built with
// AVX2); internal linkage, so each keeps its own copy.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/gguf_blocks.h"

namespace minfer::kernels::x86_gguf {
namespace {

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline __m256i high_nibbles(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }

// 16 bytes of nibbles -> 32 bytes: element j from the low nibble of byte j, element 16 + j from its high nibble.
inline __m256i split_nibbles_16(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), mask), _mm_and_si128(b, mask));
}

// 32 bits -> 32 bytes, byte j 0x10 where bit j is set (the fifth bit of Q5_0 / Q5_1 elements).
inline __m256i fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  // Byte j takes the byte of qh holding bit j, then tests that bit alone.
  const __m256i bytes = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(qh)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline __m256i book_lookup(const uint8_t* book, __m256i nibbles) {
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(book));
  return _mm256_shuffle_epi8(_mm256_set_m128i(lut, lut), nibbles);
}
inline __m256i iq4_lookup(__m256i nibbles) { return book_lookup(gguf::kIq4Unsigned, nibbles); }

inline void set_pair(float* d, float* m, float dv, float mv) {
  d[0] = d[1] = dv;
  m[0] = m[1] = mv;
}

void decode_q4(DType type, const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  const int64_t bytes = dtype_block(type).bytes, head = bytes - 16;
  for (int64_t i = 0; i < blocks; ++i, b += bytes, u += 32, d += 2, m += 2) {
    const float scale = gguf::read_f16(b);
    set_pair(d, m, scale, type == DType::Q4_1 ? -gguf::read_f16(b + 2) : 0.0f);
    const __m256i v = split_nibbles_16(b + head);
    store32(u, type == DType::IQ4_NL ? iq4_lookup(v) : v);
  }
}

void decode_mxfp4(const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  for (int64_t i = 0; i < blocks; ++i, b += 17, u += 32, d += 2, m += 2) {
    set_pair(d, m, gguf::e8m0_half(b[0]), 0.0f);
    store32(u, book_lookup(gguf::kMxfp4Unsigned, split_nibbles_16(b + 1)));
  }
}

void decode_q5(DType type, const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  const bool q5_1 = type == DType::Q5_1;
  const int64_t bytes = dtype_block(type).bytes, qh = q5_1 ? 4 : 2;
  for (int64_t i = 0; i < blocks; ++i, b += bytes, u += 32, d += 2, m += 2) {
    set_pair(d, m, gguf::read_f16(b), q5_1 ? -gguf::read_f16(b + 2) : 0.0f);
    store32(u, _mm256_or_si256(split_nibbles_16(b + qh + 4), fifth_bits(b + qh)));
  }
}

void decode_q4_k(const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m, bool fifth_bit) {
  const int64_t bytes = fifth_bit ? 176 : 144;
  const __m256i one = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < blocks; ++i, b += bytes, u += 256, d += 16, m += 16) {
    gguf::k_scales(b, d, m);
    const uint8_t* qs = b + (fifth_bit ? 48 : 16);
    __m256i qh = fifth_bit ? load32(b + 16) : _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i v = load32(qs + 32 * g);
      __m256i lo = low_nibbles(v), hi = high_nibbles(v);
      if (fifth_bit) {  // bits 2g and 2g + 1 of qh[l] are the fifth bits of elements 64g + l and 64g + 32 + l
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
        qh = _mm256_srli_epi16(qh, 2);
      }
      store32(u + 64 * g, lo);
      store32(u + 64 * g + 32, hi);
    }
  }
}

void decode_q6_k(const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  const __m256i three = _mm256_set1_epi8(3), bits45 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < blocks; ++i, b += 210, u += 256, d += 16, m += 16) {
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float dd = gguf::read_f16(b + 208);
    for (int s = 0; s < 16; ++s) {
      d[s] = dd * static_cast<float>(sc[s]);
      m[s] = 0.0f;
    }
    for (int g = 0; g < 2; ++g) {
      const __m256i a = load32(b + 64 * g), c = load32(b + 64 * g + 32), h = load32(b + 128 + 32 * g);
      uint8_t* o = u + 128 * g;
      store32(o, _mm256_or_si256(low_nibbles(a), _mm256_slli_epi16(_mm256_and_si256(h, three), 4)));
      store32(o + 32, _mm256_or_si256(low_nibbles(c), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)));
      store32(o + 64, _mm256_or_si256(high_nibbles(a), _mm256_and_si256(h, bits45)));
      store32(o + 96, _mm256_or_si256(high_nibbles(c), _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45)));
    }
  }
}

void decode_iq4_xs(const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  for (int64_t i = 0; i < blocks; ++i, b += 136, u += 256, d += 16, m += 16) {
    const float dd = gguf::read_f16(b);
    uint16_t scales_h;
    std::memcpy(&scales_h, b + 2, 2);
    for (int j = 0; j < 8; ++j) {
      const int low = (b[4 + j / 2] >> (4 * (j % 2))) & 0x0F, high = (scales_h >> (2 * j)) & 3;
      set_pair(d + 2 * j, m + 2 * j, dd * static_cast<float>((low | (high << 4)) - 32), 0.0f);
      store32(u + 32 * j, iq4_lookup(split_nibbles_16(b + 8 + 16 * j)));
    }
  }
}

// Q2_K and Q3_K: 2-bit fields of qs, four per byte; Q3_K adds a third bit from hmask (bit i of hmask[l] for element
// 32i + l).
void decode_q2_q3_k(DType type, const uint8_t* b, int64_t blocks, uint8_t* u, float* d, float* m) {
  const bool q3 = type == DType::Q3_K;
  const int64_t bytes = dtype_block(type).bytes;
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < blocks; ++i, b += bytes, u += 256, d += 16, m += 16) {
    if (q3) {
      gguf::decode_q3_k_scales(b, d, m);
    } else {
      gguf::decode_q2_k_scales(b, d, m);
    }
    const uint8_t* qs = b + (q3 ? 32 : 16);
    __m256i hm = q3 ? load32(b) : _mm256_setzero_si256();
    for (int g = 0; g < 2; ++g) {
      const __m256i v = load32(qs + 32 * g);
      for (int s = 0; s < 4; ++s) {
        __m256i x = _mm256_and_si256(s == 0 ? v : _mm256_srli_epi16(v, 2 * s), three);
        if (q3) {
          x = _mm256_or_si256(x, _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
          hm = _mm256_srli_epi16(hm, 1);
        }
        store32(u + 128 * g + 32 * s, x);
      }
    }
  }
}

// One row of k elements of `type` (any GGUF block type but Q8_0).
inline void decode_row(DType type, const uint8_t* row, int64_t k, uint8_t* u, float* d, float* m) {
  const int64_t blocks = k / dtype_block(type).elements;
  switch (type) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::IQ4_NL: return decode_q4(type, row, blocks, u, d, m);
    case DType::Q5_0:
    case DType::Q5_1: return decode_q5(type, row, blocks, u, d, m);
    case DType::Q4_K: return decode_q4_k(row, blocks, u, d, m, false);
    case DType::Q5_K: return decode_q4_k(row, blocks, u, d, m, true);
    case DType::Q6_K: return decode_q6_k(row, blocks, u, d, m);
    case DType::IQ4_XS: return decode_iq4_xs(row, blocks, u, d, m);
    case DType::MXFP4: return decode_mxfp4(row, blocks, u, d, m);
    case DType::Q2_K:
    case DType::Q3_K: return decode_q2_q3_k(type, row, blocks, u, d, m);
    default: return gguf::decode_row(type, row, k, u, d, m);
  }
}

}  // namespace
}  // namespace minfer::kernels::x86_gguf
