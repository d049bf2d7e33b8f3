// GGUF block types (ggml's layouts, as gguf-py's dequantizers read them) decoded into one common form that the
// quantized GEMM multiplies with int8 activations:
//   element e of the block = d[e / 16] * q[e] - m[e / 16]
// with q an int8, d a per-16-elements scale and m a per-16-elements offset (0 for the symmetric types). Every d and
// m is exact in f32 (an f16 times a 6-bit or 8-bit integer), and d * q is exact too, so the one rounding of
// d * q - m gives the same f32 as gguf-py's numpy expression (asserted by the dequantization test).
//
// The decoders are plain loops over bytes, inline here, and compiled into each instruction set's translation unit
// (kernels/x86/gemm_gguf_*.cpp), where the compiler vectorises them; the scalar build is the reference.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/half.h"
#include "tensor/dtype.h"

namespace minfer::kernels::gguf {

// Elements sharing one (d, m) pair in the decoded form.
inline constexpr int64_t kSubBlock = 16;

// IQ4_NL / IQ4_XS's non-linear 4-bit code book (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// True for the types whose decoded form has offsets m (the others have m = 0 and skip the offset term).
constexpr bool has_offsets(DType t) {
  return t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K;
}

inline float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// 32-element blocks whose 16 bytes of nibbles hold element j in the low and j + 16 in the high nibble.
inline void split_nibbles(const uint8_t* qs, int8_t* q, int offset) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0x0F) - offset);
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}

inline void decode_q4_0(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  split_nibbles(b + 2, q, 8);
}

inline void decode_q4_1(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = -read_f16(b + 2);
  split_nibbles(b + 4, q, 0);
}

inline void add_high_bits_32(const uint8_t* qh_bytes, int8_t* q, int offset) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(q[j] + static_cast<int>((qh >> j) & 1u) * 16 - offset);
}

inline void decode_q5_0(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  split_nibbles(b + 6, q, 0);
  add_high_bits_32(b + 2, q, 16);
}

inline void decode_q5_1(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = -read_f16(b + 2);
  split_nibbles(b + 8, q, 0);
  add_high_bits_32(b + 4, q, 0);
}

inline void decode_q8_0(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  std::memcpy(q, b + 2, 32);
}

inline void decode_iq4_nl(const uint8_t* b, int8_t* q, float* d, float* m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4Values[b[2 + j] & 0x0F];
    q[j + 16] = kIq4Values[b[2 + j] >> 4];
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits each), d, dmin.
inline void decode_q2_k(const uint8_t* b, int8_t* q, float* d, float* m) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float dd = read_f16(b + 80), dmin = read_f16(b + 82);
  for (int s = 0; s < 16; ++s) {
    d[s] = dd * static_cast<float>(scales[s] & 0x0F);
    m[s] = dmin * static_cast<float>(scales[s] >> 4);
  }
  for (int g = 0; g < 2; ++g) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l) q[g * 128 + shift * 32 + l] = static_cast<int8_t>((qs[g * 32 + l] >> (2 * shift)) & 3);
    }
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d.
inline void decode_q3_k(const uint8_t* b, int8_t* q, float* d, float* m) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float dd = read_f16(b + 108);
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    d[s] = dd * static_cast<float>((low | (high << 4)) - 32);
    m[s] = 0.0f;
  }
  for (int g = 0; g < 2; ++g) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l) {
        const int e = g * 128 + shift * 32 + l;
        const int low = (qs[g * 32 + l] >> (2 * shift)) & 3;
        const int high = (hmask[l] >> (e / 32)) & 1;
        q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
}

// The eight 6-bit (scale, min) pairs of Q4_K / Q5_K in their 12 bytes.
inline void k_scale_min(const uint8_t* sc, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = sc[j] & 63;
    *min = sc[j + 4] & 63;
  } else {
    *scale = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
    *min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

inline void k_scales(const uint8_t* b, float* d, float* m) {
  const float dd = read_f16(b), dmin = read_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    k_scale_min(b + 4, j, &scale, &min);
    d[2 * j] = d[2 * j + 1] = dd * static_cast<float>(scale);
    m[2 * j] = m[2 * j + 1] = dmin * static_cast<float>(min);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]: byte l of group g holds element 64g + l (low) and 64g + 32 + l (high).
inline void decode_q4_k(const uint8_t* b, int8_t* q, float* d, float* m) {
  k_scales(b, d, m);
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      q[g * 64 + l] = static_cast<int8_t>(qs[g * 32 + l] & 0x0F);
      q[g * 64 + 32 + l] = static_cast<int8_t>(qs[g * 32 + l] >> 4);
    }
  }
}

// Q5_K: as Q4_K with qh[32] before qs: bit i of qh[l] is the fifth bit of element 32i + l.
inline void decode_q5_k(const uint8_t* b, int8_t* q, float* d, float* m) {
  k_scales(b, d, m);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = g * 64 + l, hi = g * 64 + 32 + l;
      q[lo] = static_cast<int8_t>((qs[g * 32 + l] & 0x0F) | (((qh[l] >> (2 * g)) & 1) << 4));
      q[hi] = static_cast<int8_t>((qs[g * 32 + l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4));
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d; q = (4 low bits | 2 high bits << 4) - 32.
inline void decode_q6_k(const uint8_t* b, int8_t* q, float* d, float* m) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float dd = read_f16(b + 208);
  for (int s = 0; s < 16; ++s) {
    d[s] = dd * static_cast<float>(sc[s]);
    m[s] = 0.0f;
  }
  for (int g = 0; g < 2; ++g) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t h = qh[g * 32 + l];
      const uint8_t a = ql[g * 64 + l], c = ql[g * 64 + 32 + l];
      int8_t* o = q + g * 128;
      o[l] = static_cast<int8_t>(((a & 0x0F) | ((h & 3) << 4)) - 32);
      o[l + 32] = static_cast<int8_t>(((c & 0x0F) | (((h >> 2) & 3) << 4)) - 32);
      o[l + 64] = static_cast<int8_t>(((a >> 4) | (((h >> 4) & 3) << 4)) - 32);
      o[l + 96] = static_cast<int8_t>(((c >> 4) | (((h >> 6) & 3) << 4)) - 32);
    }
  }
}

// IQ4_XS: d, scales_h (u16: 2 high bits per 32), scales_l[4] (4 low bits per 32), qs[128] (16 bytes per 32).
inline void decode_iq4_xs(const uint8_t* b, int8_t* q, float* d, float* m) {
  const float dd = read_f16(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    const int low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
    const int high = (scales_h >> (2 * j)) & 3;
    d[2 * j] = d[2 * j + 1] = dd * static_cast<float>((low | (high << 4)) - 32);
    m[2 * j] = m[2 * j + 1] = 0.0f;
    for (int l = 0; l < 16; ++l) {
      q[j * 32 + l] = kIq4Values[qs[j * 16 + l] & 0x0F];
      q[j * 32 + 16 + l] = kIq4Values[qs[j * 16 + l] >> 4];
    }
  }
}

// Decodes `blocks` consecutive blocks of `type` from `src`: q gets blocks x elements int8, d and m one float per 16.
template <typename Decode>
inline void decode_each(Decode decode, const uint8_t* src, int64_t blocks, int64_t elements, int64_t bytes, int8_t* q,
                        float* d, float* m) {
  const int64_t subs = elements / kSubBlock;
  for (int64_t i = 0; i < blocks; ++i) decode(src + i * bytes, q + i * elements, d + i * subs, m + i * subs);
}

inline void decode_blocks(DType type, const uint8_t* src, int64_t blocks, int8_t* q, float* d, float* m) {
  const BlockShape s = dtype_block(type);
  switch (type) {
    case DType::Q4_0: return decode_each(decode_q4_0, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q4_1: return decode_each(decode_q4_1, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_0: return decode_each(decode_q5_0, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_1: return decode_each(decode_q5_1, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q8_0: return decode_each(decode_q8_0, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q2_K: return decode_each(decode_q2_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q3_K: return decode_each(decode_q3_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q4_K: return decode_each(decode_q4_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_K: return decode_each(decode_q5_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q6_K: return decode_each(decode_q6_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::IQ4_NL: return decode_each(decode_iq4_nl, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::IQ4_XS: return decode_each(decode_iq4_xs, src, blocks, s.elements, s.bytes, q, d, m);
    default: return;
  }
}

// Decodes one row of k elements (k a multiple of the block's elements).
inline void decode_row(DType type, const uint8_t* row, int64_t k, int8_t* q, float* d, float* m) {
  decode_blocks(type, row, k / dtype_block(type).elements, q, d, m);
}

}  // namespace minfer::kernels::gguf
