// GGUF block types (ggml's layouts, as gguf-py's dequantizers read them) decoded into one common form that the
// quantized GEMM multiplies with int8 activations:
//   element e of the block = d[e / 16] * (u[e] - z) - m[e / 16]
// with u an unsigned byte, z a constant of the type (zero_point), d a per-16-elements scale and m a per-16-elements
// offset (0 for the symmetric types). Every d and m is exact in f32 (an f16 times a 6-bit or 8-bit integer), and
// d * (u - z) is exact too, so the one rounding of d * (u - z) - m gives the same f32 as gguf-py's numpy expression
// (asserted by the dequantization test against gguf-py).
//
// These are the scalar decoders, the reference; kernels/x86/gguf_decode_avx2.h has vector ones for the x86 leaves.
// Include only from .cpp files.
#pragma once

#include <cstdint>
#include <cstring>
#ifdef __F16C__
// As in kernels/x86/avx512_util.h: GCC 12 warns falsely inside its own AVX-512 intrinsics once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "base/half.h"
#include "tensor/dtype.h"

namespace minfer::kernels::gguf {
// Internal linkage: each instruction set's translation unit keeps its own vectorised copy (an inline function of one
// name would be merged by the linker into whichever copy it saw first, scalar or AVX-512).
namespace {

// Elements sharing one (d, m) pair in the decoded form.
inline constexpr int64_t kSubBlock = 16;

// z of the decoded form: u - z is the type's signed quantized value.
constexpr int zero_point(DType t) {
  switch (t) {
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::Q3_K: return 4;
    case DType::Q6_K: return 32;
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: return 128;
    default: return 0;
  }
}

// z of the 16-row tiles (tensor/gguf_tiles.h): the type's, and 128 for Q8_0, whose bytes the tiles store as q + 128.
constexpr int tile_zero_point(DType t) { return t == DType::Q8_0 ? 128 : zero_point(t); }

// IQ4_NL / IQ4_XS's non-linear 4-bit code book (ggml's kvalues_iq4nl: -127, -104, ..., 113) plus 128: the u of
// their decoded form.
inline constexpr uint8_t kIq4Unsigned[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};

// MXFP4's E2M1 values doubled (ggml's kvalues_mxfp4: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives) plus 128; the scale
// byte's power of two is halved to match (e8m0_half).
inline constexpr uint8_t kMxfp4Unsigned[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                               128, 127, 126, 125, 124, 122, 120, 116};

// The code book a type's nibbles index (u = book[nibble]), or null for the types whose nibble is u itself.
constexpr const uint8_t* code_book(DType t) {
  return t == DType::MXFP4 ? kMxfp4Unsigned : (t == DType::IQ4_NL || t == DType::IQ4_XS) ? kIq4Unsigned : nullptr;
}

// An E8M0 byte e as the f32 2^(e - 128) (ggml_e8m0_to_fp32_half: 2^(e - 127) halved, as the doubled values need),
// subnormal for e < 2, exactly.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// True for the types whose decoded form has offsets m (the others have m = 0 and skip the offset term).
constexpr bool has_offsets(DType t) {
  return t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K;
}

inline float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#ifdef __F16C__
  return _cvtsh_ss(h);  // the same exact conversion in one instruction where the build has F16C
#else
  return f16_to_f32(h);
#endif
}

// 32-element blocks whose 16 bytes of nibbles hold element j in the low and j + 16 in the high nibble.
inline void split_nibbles(const uint8_t* __restrict qs, uint8_t* __restrict q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + 16] = qs[j] >> 4;
  }
}

inline void decode_q4_0(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  split_nibbles(b + 2, q);
}

inline void decode_q4_1(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = -read_f16(b + 2);
  split_nibbles(b + 4, q);
}

inline void add_high_bits_32(const uint8_t* __restrict qh_bytes, uint8_t* __restrict q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(q[j] | ((qh >> j) & 1u) << 4);
}

inline void decode_q5_0(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  split_nibbles(b + 6, q);
  add_high_bits_32(b + 2, q);
}

inline void decode_q5_1(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = -read_f16(b + 2);
  split_nibbles(b + 8, q);
  add_high_bits_32(b + 4, q);
}

inline void decode_iq4_nl(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d,
                          float* __restrict m) {
  d[0] = d[1] = read_f16(b);
  m[0] = m[1] = 0.0f;
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4Unsigned[b[2 + j] & 0x0F];
    q[j + 16] = kIq4Unsigned[b[2 + j] >> 4];
  }
}

inline void decode_mxfp4(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  d[0] = d[1] = e8m0_half(b[0]);
  m[0] = m[1] = 0.0f;
  for (int j = 0; j < 16; ++j) {
    q[j] = kMxfp4Unsigned[b[1 + j] & 0x0F];
    q[j + 16] = kMxfp4Unsigned[b[1 + j] >> 4];
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits each), d, dmin.
inline void decode_q2_k_scales(const uint8_t* __restrict b, float* __restrict d, float* __restrict m) {
  const float dd = read_f16(b + 80), dmin = read_f16(b + 82);
  for (int s = 0; s < 16; ++s) {
    d[s] = dd * static_cast<float>(b[s] & 0x0F);
    m[s] = dmin * static_cast<float>(b[s] >> 4);
  }
}

inline void decode_q2_k(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  decode_q2_k_scales(b, d, m);
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 2; ++g) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l)
        q[g * 128 + shift * 32 + l] = static_cast<uint8_t>((qs[g * 32 + l] >> (2 * shift)) & 3);
    }
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d.
inline void decode_q3_k_scales(const uint8_t* __restrict b, float* __restrict d, float* __restrict m) {
  const uint8_t* sc = b + 96;
  const float dd = read_f16(b + 108);
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
    const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    d[s] = dd * static_cast<float>((low | (high << 4)) - 32);
    m[s] = 0.0f;
  }
}

inline void decode_q3_k(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  decode_q3_k_scales(b, d, m);
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  for (int g = 0; g < 2; ++g) {
    for (int shift = 0; shift < 4; ++shift) {
      for (int l = 0; l < 32; ++l) {
        const int e = g * 128 + shift * 32 + l;
        const int low = (qs[g * 32 + l] >> (2 * shift)) & 3;
        const int high = (hmask[l] >> (e / 32)) & 1;
        q[e] = static_cast<uint8_t>(low | (high << 2));  // low - 4 (1 - high) = u - 4
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

inline void k_scales(const uint8_t* __restrict b, float* __restrict d, float* __restrict m) {
  const float dd = read_f16(b), dmin = read_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    k_scale_min(b + 4, j, &scale, &min);
    d[2 * j] = d[2 * j + 1] = dd * static_cast<float>(scale);
    m[2 * j] = m[2 * j + 1] = dmin * static_cast<float>(min);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]: byte l of group g holds element 64g + l (low) and 64g + 32 + l (high).
inline void decode_q4_k(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  k_scales(b, d, m);
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      q[g * 64 + l] = qs[g * 32 + l] & 0x0F;
      q[g * 64 + 32 + l] = qs[g * 32 + l] >> 4;
    }
  }
}

// Q5_K: as Q4_K with qh[32] before qs: bit i of qh[l] is the fifth bit of element 32i + l.
inline void decode_q5_k(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  k_scales(b, d, m);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = g * 64 + l, hi = g * 64 + 32 + l;
      q[lo] = static_cast<uint8_t>((qs[g * 32 + l] & 0x0F) | (((qh[l] >> (2 * g)) & 1) << 4));
      q[hi] = static_cast<uint8_t>((qs[g * 32 + l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4));
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d; u = 4 low bits | 2 high bits << 4, z = 32.
inline void decode_q6_k(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
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
      uint8_t* o = q + g * 128;
      o[l] = static_cast<uint8_t>((a & 0x0F) | ((h & 3) << 4));
      o[l + 32] = static_cast<uint8_t>((c & 0x0F) | (((h >> 2) & 3) << 4));
      o[l + 64] = static_cast<uint8_t>((a >> 4) | (((h >> 4) & 3) << 4));
      o[l + 96] = static_cast<uint8_t>((c >> 4) | (((h >> 6) & 3) << 4));
    }
  }
}

// IQ4_XS: d, scales_h (u16: 2 high bits per 32), scales_l[4] (4 low bits per 32), qs[128] (16 bytes per 32).
inline void decode_iq4_xs(const uint8_t* __restrict b, uint8_t* __restrict q, float* __restrict d,
                          float* __restrict m) {
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
      q[j * 32 + l] = kIq4Unsigned[qs[j * 16 + l] & 0x0F];
      q[j * 32 + 16 + l] = kIq4Unsigned[qs[j * 16 + l] >> 4];
    }
  }
}

// Decodes `blocks` consecutive blocks of `type` from `src`: u gets blocks x elements bytes, d and m one float per 16.
template <typename Decode>
inline void decode_each(Decode decode, const uint8_t* __restrict src, int64_t blocks, int64_t elements, int64_t bytes,
                        uint8_t* __restrict q, float* __restrict d, float* __restrict m) {
  const int64_t subs = elements / kSubBlock;
  for (int64_t i = 0; i < blocks; ++i) decode(src + i * bytes, q + i * elements, d + i * subs, m + i * subs);
}

inline void decode_blocks(DType type, const uint8_t* src, int64_t blocks, uint8_t* q, float* d, float* m) {
  const BlockShape s = dtype_block(type);
  switch (type) {
    case DType::Q4_0: return decode_each(decode_q4_0, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q4_1: return decode_each(decode_q4_1, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_0: return decode_each(decode_q5_0, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_1: return decode_each(decode_q5_1, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q2_K: return decode_each(decode_q2_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q3_K: return decode_each(decode_q3_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q4_K: return decode_each(decode_q4_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q5_K: return decode_each(decode_q5_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::Q6_K: return decode_each(decode_q6_k, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::IQ4_NL: return decode_each(decode_iq4_nl, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::IQ4_XS: return decode_each(decode_iq4_xs, src, blocks, s.elements, s.bytes, q, d, m);
    case DType::MXFP4: return decode_each(decode_mxfp4, src, blocks, s.elements, s.bytes, q, d, m);
    default: return;
  }
}

// Decodes one row of k elements (k a multiple of the block's elements).
inline void decode_row(DType type, const uint8_t* row, int64_t k, uint8_t* q, float* d, float* m) {
  decode_blocks(type, row, k / dtype_block(type).elements, q, d, m);
}

}  // namespace
}  // namespace minfer::kernels::gguf
