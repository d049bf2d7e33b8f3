// TensorLayout::kGgufTiles16: a GGUF matrix [n, k] of a 4-, 5- or 6-bit type (Q4_0, Q4_1, IQ4_NL, Q4_K, IQ4_XS, Q5_0,
// Q5_1, Q5_K, Q6_K, MXFP4) or Q8_0 re-laid for the quantized GEMM. Rows go in tiles of 16 (the last padded with zero
// rows); a tile is stored group by group, a group being one block of 32 columns for the 32-element types and one
// super-block of 256 for the K types and IQ4_XS:
//   header: d[16] f16, then m[16] / dmin[16] f16 (Q4_1, Q5_1, Q4_K, Q5_K), then for super-blocks the int8 sub-scales
//           sc[subs][16] (subs = 8 blocks of 32, or 16 blocks of 16 for Q6_K) and sub-mins mn[8][16] (Q4_K, Q5_K)
//   then per 32-column block: 256 bytes of nibbles and, for 5 / 6 bits, one / two planes of high bits (64 bytes each)
// Nibbles: 4 chunks of 64 bytes; byte 4 r + i of chunk c holds row r's column 8 c + i in its low half and column
// 8 c + 4 + i in its high half. So one 64-byte load, masked or shifted, is the 16 rows x 4 columns that vpdpbusd
// multiplies by 4 broadcast activation bytes ("operand" 2 c or 2 c + 1). A high-bit plane holds 8 bytes per operand,
// bit 4 r + i of operand o's word being bit 4 (plane 0) or 5 (plane 1) of that operand's byte 4 r + i: a mask
// register that adds 16 or 32 to those bytes.
// Q8_0 blocks hold whole bytes instead: 8 operands of 64 bytes, byte 4 r + i of operand o being row r's column
// 4 o + i, stored as q + 128 (so z = 128) to be vpdpbusd's unsigned operand as it is.
// The value u is GGUF's (for the IQ4 types the index into their code book); the weight is d (u - z) - m with the
// file's own f16 scales and integer sub-scales (as gguf_blocks.h), so the bytes per weight are about the file's.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace minfer {

struct GgufTiles {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kNibbleBytes = 256;  // 16 rows x 32 nibbles
  static constexpr int64_t kPlaneBytes = 64;    // 16 rows x 32 bits
  DType type = DType::Q4_0;
  int64_t n = 0, k = 0;

  // True for the types this layout holds.
  static constexpr bool holds(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::IQ4_NL || t == DType::Q4_K || t == DType::IQ4_XS ||
           t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K || t == DType::Q6_K || t == DType::Q8_0 ||
           t == DType::MXFP4;
  }
  // Whole bytes per value (Q8_0) instead of nibbles and high-bit planes.
  constexpr bool full_bytes() const { return type == DType::Q8_0; }
  constexpr bool super_blocks() const {
    return type == DType::Q4_K || type == DType::IQ4_XS || type == DType::Q5_K || type == DType::Q6_K;
  }
  constexpr bool has_min() const {
    return type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K;
  }
  // The nibble indexes a code book (kernels/gguf_blocks.h code_book): IQ4_NL, IQ4_XS, MXFP4.
  constexpr bool coded() const { return type == DType::IQ4_NL || type == DType::IQ4_XS || type == DType::MXFP4; }
  // Bits above the nibble: 0, 1 (Q5) or 2 (Q6_K).
  constexpr int high_bits() const {
    return type == DType::Q6_K ? 2 : (type == DType::Q5_0 || type == DType::Q5_1 || type == DType::Q5_K) ? 1 : 0;
  }
  // Columns sharing one scale: 16 for Q6_K, else 32.
  constexpr int64_t scale_columns() const { return type == DType::Q6_K ? 16 : 32; }
  constexpr int64_t group_columns() const { return super_blocks() ? 256 : 32; }
  constexpr int64_t blocks_per_group() const { return group_columns() / 32; }
  constexpr int64_t subs_per_group() const { return super_blocks() ? group_columns() / scale_columns() : 0; }
  constexpr int64_t block_bytes() const {
    return full_bytes() ? 2 * kNibbleBytes : kNibbleBytes + high_bits() * kPlaneBytes;
  }
  // Bytes before a group's blocks: d (and m / dmin) as 16 f16, then the int8 sub-scales (and sub-mins).
  constexpr int64_t header_bytes() const {
    return (has_min() ? 2 : 1) * kRows * 2 + subs_per_group() * kRows * (has_min() && super_blocks() ? 2 : 1);
  }
  constexpr int64_t group_bytes() const { return header_bytes() + blocks_per_group() * block_bytes(); }
  constexpr int64_t groups() const { return k / group_columns(); }
  int64_t tiles() const { return (n + kRows - 1) / kRows; }
  int64_t bytes() const { return tiles() * groups() * group_bytes(); }
  constexpr int64_t group_offset(int64_t tile, int64_t g) const { return (tile * groups() + g) * group_bytes(); }

  // Within a group: the f16 d and m / dmin of row j; the int8 sub-scale of row j for sub-block s (of scale_columns()
  // columns) and its sub-min; where block b starts.
  static constexpr int64_t d_at(int64_t j) { return 2 * j; }
  static constexpr int64_t m_at(int64_t j) { return 2 * kRows + 2 * j; }
  constexpr int64_t sc_at(int64_t s, int64_t j) const { return (has_min() ? 4 : 2) * kRows + s * kRows + j; }
  constexpr int64_t mn_at(int64_t s, int64_t j) const { return 4 * kRows + subs_per_group() * kRows + s * kRows + j; }
  constexpr int64_t block_at(int64_t b) const { return header_bytes() + b * block_bytes(); }
  // Within a block: the byte holding row j's column c (c < 32) and whether it is the high nibble; the plane word and
  // bit of that weight's high bits.
  static constexpr int64_t nibble_at(int64_t j, int64_t c) { return (c / 8) * 64 + 4 * j + c % 4; }
  static constexpr bool nibble_high(int64_t c) { return c % 8 >= 4; }
  static constexpr int64_t operand_of(int64_t c) { return 2 * (c / 8) + (c % 8 >= 4 ? 1 : 0); }
  static constexpr int64_t plane_at(int plane, int64_t c) {
    return kNibbleBytes + plane * kPlaneBytes + 8 * operand_of(c);
  }
  static constexpr int64_t plane_bit(int64_t j, int64_t c) { return 4 * j + c % 4; }
  // Q8_0: the byte of row j's column c within a block.
  static constexpr int64_t byte_at(int64_t j, int64_t c) { return 64 * (c / 4) + 4 * j + c % 4; }
};

}  // namespace minfer
