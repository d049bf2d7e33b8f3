// TensorLayout::kGgufTiles16: a GGUF matrix [n, k] of a 4-bit type (Q4_0, Q4_1, IQ4_NL, Q4_K, IQ4_XS) re-laid for
// the quantized GEMM. Rows go in tiles of 16 (the last padded with zero rows); a tile is stored group by group, a
// group being one block of 32 columns for the 32-element types and one super-block of 256 for Q4_K / IQ4_XS:
//   32-element types, per group:  d[16] f16, m[16] f16 (Q4_1 only), payload of 256 bytes
//   Q4_K / IQ4_XS, per group:     d[16] f16, dmin[16] f16 (Q4_K only), sc[8][16] int8, mn[8][16] int8 (Q4_K only),
//                                 8 payloads of 256 bytes
// Payload of a 32-column block: 4 chunks of 64 bytes; byte 4 r + i of chunk j holds row r's nibble for column
// 8 j + i in its low half and for column 8 j + 4 + i in its high half. So one 64-byte load, masked or shifted, is the
// 16 rows x 4 columns that vpdpbusd multiplies by 4 broadcast activation bytes.
// The nibble u is GGUF's (for the IQ4 types, the index into their code book); the weight is
//   Q4_0: d (u - 8)   Q4_1: d u + m   IQ4_NL: d kvalues[u]   Q4_K: d sc u - dmin mn   IQ4_XS: d sc kvalues[u]
// with the same f16 scales and 6-bit sub-scales as the file: the same bytes per weight as GGUF, give or take.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace minfer {

struct GgufTiles {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kPayloadBytes = 256;  // 16 rows x 32 nibbles
  DType type = DType::Q4_0;
  int64_t n = 0, k = 0;

  // True for the types this layout holds.
  static constexpr bool holds(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::IQ4_NL || t == DType::Q4_K || t == DType::IQ4_XS;
  }
  bool super_blocks() const { return type == DType::Q4_K || type == DType::IQ4_XS; }
  bool has_min() const { return type == DType::Q4_1 || type == DType::Q4_K; }
  int64_t group_columns() const { return super_blocks() ? 256 : 32; }
  int64_t blocks_per_group() const { return group_columns() / 32; }
  // Bytes before a group's payloads: d (and m / dmin) as 16 f16, then (super-blocks) the per-block int8 scales.
  int64_t header_bytes() const {
    const int64_t scales = (has_min() ? 2 : 1) * kRows * 2;
    return scales + (super_blocks() ? (has_min() ? 2 : 1) * blocks_per_group() * kRows : 0);
  }
  int64_t group_bytes() const { return header_bytes() + blocks_per_group() * kPayloadBytes; }
  int64_t groups() const { return k / group_columns(); }
  int64_t tiles() const { return (n + kRows - 1) / kRows; }
  int64_t bytes() const { return tiles() * groups() * group_bytes(); }
  int64_t group_offset(int64_t tile, int64_t g) const { return (tile * groups() + g) * group_bytes(); }

  // Within a group: the f16 d and m (Q4_1) / dmin (Q4_K) of row j; the int8 sub-scale and sub-min of row j in block
  // b; the payload of block b.
  static constexpr int64_t d_at(int64_t j) { return 2 * j; }
  static constexpr int64_t m_at(int64_t j) { return 2 * kRows + 2 * j; }
  int64_t sc_at(int64_t b, int64_t j) const { return (has_min() ? 4 : 2) * kRows + b * kRows + j; }
  int64_t mn_at(int64_t b, int64_t j) const { return 4 * kRows + blocks_per_group() * kRows + b * kRows + j; }
  int64_t payload_at(int64_t b) const { return header_bytes() + b * kPayloadBytes; }
  // Byte of a payload holding row j's column c (c < 32), and whether it is the high nibble.
  static constexpr int64_t nibble_at(int64_t j, int64_t c) { return (c / 8) * 64 + 4 * j + c % 4; }
  static constexpr bool nibble_high(int64_t c) { return c % 8 >= 4; }
};

}  // namespace minfer
