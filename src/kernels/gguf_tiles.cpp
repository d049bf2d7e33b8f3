// The 4- to 8-bit GGUF types in TensorLayout::kGgufTiles16 (tensor/gguf_tiles.h): the copy made at load, reading a tile
// back (dequantization, the reference kernel) and the per-block scales both need.
#include "kernels/gguf_tiles.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/gguf_blocks.h"

namespace minfer::kernels {
namespace {

// One row's group as stored in GGUF: f16 d and m / dmin, the integer sub-scales and sub-mins (super-block types) and
// the values u of its columns in order (nibble plus high bits; for IQ4 the code book index).
struct RowGroup {
  uint16_t d = 0, m = 0;
  int8_t sc[16] = {}, mn[8] = {};
  uint8_t u[256] = {};
};

void split_nibbles(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = qs[j] & 0x0F;
    u[j + 16] = qs[j] >> 4;
  }
}

void read_k_scales(const uint8_t* b, RowGroup& g) {
  std::memcpy(&g.m, b + 2, 2);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    gguf::k_scale_min(b + 4, j, &scale, &min);
    g.sc[j] = static_cast<int8_t>(scale);
    g.mn[j] = static_cast<int8_t>(min);
  }
}

// MXFP4's scale 2^(e - 128) as the tiles' f16 d: exact for 2^-24 ... 2^15; smaller scales (blocks whose largest
// magnitude is below 12 x 2^-25) read as zero, larger ones are refused (no trained weight comes near either).
uint16_t mxfp4_scale_as_f16(uint8_t e) {
  const int p = e - 128;
  if (p < -24) return 0;
  if (p > 15) fail("to_gguf_tiles: an MXFP4 block scale of 2^{} is beyond the tiles' f16 scales", p);
  return static_cast<uint16_t>(p >= -14 ? (p + 15) << 10 : 1 << (p + 24));
}

void read_group(DType type, const uint8_t* b, RowGroup& g) {
  g = RowGroup{};
  float d[16], m[16];  // the scalar decoders' float scales, not used: the tiles keep the file's
  std::memcpy(&g.d, b, 2);
  switch (type) {
    case DType::Q4_0:
    case DType::IQ4_NL: split_nibbles(b + 2, g.u); break;
    case DType::MXFP4:
      g.d = mxfp4_scale_as_f16(b[0]);
      split_nibbles(b + 1, g.u);
      break;
    case DType::Q4_1:
      std::memcpy(&g.m, b + 2, 2);
      split_nibbles(b + 4, g.u);
      break;
    case DType::Q5_0: gguf::decode_q5_0(b, g.u, d, m); break;
    case DType::Q5_1:
      std::memcpy(&g.m, b + 2, 2);
      gguf::decode_q5_1(b, g.u, d, m);
      break;
    case DType::Q4_K:
      read_k_scales(b, g);
      gguf::decode_q4_k(b, g.u, d, m);
      break;
    case DType::Q5_K:
      read_k_scales(b, g);
      gguf::decode_q5_k(b, g.u, d, m);
      break;
    case DType::Q6_K:
      std::memcpy(&g.d, b + 208, 2);
      std::memcpy(g.sc, b + 192, 16);
      gguf::decode_q6_k(b, g.u, d, m);
      break;
    case DType::Q8_0:
      for (int c = 0; c < 32; ++c) g.u[c] = static_cast<uint8_t>(static_cast<int8_t>(b[2 + c]) + 128);
      break;
    case DType::IQ4_XS: {
      uint16_t scales_h;
      std::memcpy(&scales_h, b + 2, 2);
      for (int j = 0; j < 8; ++j) {
        const int low = (b[4 + j / 2] >> (4 * (j % 2))) & 0x0F, high = (scales_h >> (2 * j)) & 3;
        g.sc[j] = static_cast<int8_t>((low | (high << 4)) - 32);
        split_nibbles(b + 8 + 16 * j, g.u + 32 * j);
      }
      break;
    }
    default: fail("to_gguf_tiles: {} is not a type the tiles hold", dtype_name(type));
  }
}

// Writes one group of a tile from its rows' GGUF groups (rows past the matrix stay zero).
void write_group(const GgufTiles& t, const RowGroup* rows, int64_t count, uint8_t* out) {
  for (int64_t j = 0; j < count; ++j) {
    const RowGroup& g = rows[j];
    std::memcpy(out + GgufTiles::d_at(j), &g.d, 2);
    if (t.has_min()) std::memcpy(out + GgufTiles::m_at(j), &g.m, 2);
    for (int64_t s = 0; s < t.subs_per_group(); ++s) {
      out[t.sc_at(s, j)] = static_cast<uint8_t>(g.sc[s]);
      if (t.has_min()) out[t.mn_at(s, j)] = static_cast<uint8_t>(g.mn[s]);
    }
  }
  for (int64_t b = 0; b < t.blocks_per_group(); ++b) {
    uint8_t* block = out + t.block_at(b);
    uint64_t planes[2][8] = {};
    for (int64_t j = 0; j < count; ++j) {
      const uint8_t* u = rows[j].u + b * 32;
      if (t.full_bytes()) {
        for (int64_t c = 0; c < 32; ++c) block[GgufTiles::byte_at(j, c)] = u[c];
        continue;
      }
      for (int64_t c = 0; c < 32; ++c) {
        const auto nibble = static_cast<uint8_t>(u[c] & 0x0F);
        block[GgufTiles::nibble_at(j, c)] |= GgufTiles::nibble_high(c) ? static_cast<uint8_t>(nibble << 4) : nibble;
        for (int plane = 0; plane < t.high_bits(); ++plane)
          planes[plane][GgufTiles::operand_of(c)] |= uint64_t{(u[c] >> (4 + plane)) & 1u} << GgufTiles::plane_bit(j, c);
      }
    }
    for (int plane = 0; plane < t.high_bits(); ++plane)
      std::memcpy(block + GgufTiles::kNibbleBytes + plane * GgufTiles::kPlaneBytes, planes[plane], 64);
  }
}

}  // namespace

bool gguf_tiles_hold(const Tensor& w) {
  return GgufTiles::holds(w.dtype) && w.rank() == 2 && w.layout == TensorLayout::kRowMajor &&
         w.dim(1) % dtype_block(w.dtype).elements == 0;
}

Tensor to_gguf_tiles(const Tensor& w, ThreadPool* pool) {
  if (!gguf_tiles_hold(w))
    fail("to_gguf_tiles: needs a row-major matrix of a 4- to 6-bit GGUF type or Q8_0 in whole blocks, got {} {}",
         dtype_name(w.dtype), w.shape_string());
  const GgufTiles t{w.dtype, w.dim(0), w.dim(1)};
  Tensor out = Tensor::allocate(DType::I8, {t.bytes()});  // zeroed: padding rows are zero weights
  out.dtype = w.dtype;
  out.shape = {t.n, t.k};
  out.layout = TensorLayout::kGgufTiles16;
  uint8_t* dst = out.mutable_as<uint8_t>();
  const uint8_t* src = w.as<uint8_t>();
  const BlockShape block = dtype_block(w.dtype);
  const int64_t row_bytes = t.k / block.elements * block.bytes,
                group_src_bytes = t.group_columns() / block.elements * block.bytes;
  parallel_for(pool, static_cast<size_t>(t.tiles()), 1, [&](size_t t0, size_t t1) {
    std::vector<RowGroup> rows(GgufTiles::kRows);
    for (auto tile = static_cast<int64_t>(t0); tile < static_cast<int64_t>(t1); ++tile) {
      const int64_t count = std::min(GgufTiles::kRows, t.n - tile * GgufTiles::kRows);
      for (int64_t g = 0; g < t.groups(); ++g) {
        for (int64_t j = 0; j < count; ++j)
          read_group(w.dtype, src + (tile * GgufTiles::kRows + j) * row_bytes + g * group_src_bytes,
                     rows[static_cast<size_t>(j)]);
        write_group(t, rows.data(), count, dst + t.group_offset(tile, g));
      }
    }
  });
  return out;
}

TileBlockScales tile_block_scales(const GgufTiles& t, const uint8_t* group, int64_t b, int64_t j, int64_t half) {
  uint16_t dh, mh = 0;
  std::memcpy(&dh, group + GgufTiles::d_at(j), 2);
  if (t.has_min()) std::memcpy(&mh, group + GgufTiles::m_at(j), 2);
  const float d = f16_to_f32(dh), m = f16_to_f32(mh);
  const int64_t s = t.scale_columns() == 16 ? 2 * b + half : b;  // the sub-block of a super-block
  const auto sc = [&] { return static_cast<float>(static_cast<int8_t>(group[t.sc_at(s, j)])); };
  const auto mn = [&] { return static_cast<float>(static_cast<int8_t>(group[t.mn_at(s, j)])); };
  const int z = gguf::tile_zero_point(t.type);
  switch (t.type) {
    case DType::Q4_1:
    case DType::Q5_1: return {d, -m, z};
    case DType::Q4_K:
    case DType::Q5_K: return {d * sc(), m * mn(), z};
    case DType::IQ4_XS:
    case DType::Q6_K: return {d * sc(), 0.0f, z};
    default: return {d, 0.0f, z};  // Q4_0, Q5_0, IQ4_NL, MXFP4
  }
}

uint8_t tile_value(const GgufTiles& t, const uint8_t* group, int64_t b, int64_t j, int64_t c) {
  const uint8_t* block = group + t.block_at(b);
  if (t.full_bytes()) return block[GgufTiles::byte_at(j, c)];
  const uint8_t byte = block[GgufTiles::nibble_at(j, c)];
  int u = GgufTiles::nibble_high(c) ? byte >> 4 : byte & 0x0F;
  for (int plane = 0; plane < t.high_bits(); ++plane) {
    uint64_t word;
    std::memcpy(&word, block + GgufTiles::plane_at(plane, c), 8);
    u |= static_cast<int>((word >> GgufTiles::plane_bit(j, c)) & 1) << (4 + plane);
  }
  return t.coded() ? gguf::code_book(t.type)[u] : static_cast<uint8_t>(u);
}

void gguf_tiles_row(const Tensor& w, int64_t r, float* out) {
  const GgufTiles t{w.dtype, w.dim(0), w.dim(1)};
  const int64_t tile = r / GgufTiles::kRows, j = r % GgufTiles::kRows;
  for (int64_t g = 0; g < t.groups(); ++g) {
    const uint8_t* group = w.as<uint8_t>() + t.group_offset(tile, g);
    for (int64_t b = 0; b < t.blocks_per_group(); ++b) {
      for (int64_t c = 0; c < 32; ++c) {
        const TileBlockScales s = tile_block_scales(t, group, b, j, c / 16);
        const int v = tile_value(t, group, b, j, c) - s.zero_point;
        out[g * t.group_columns() + b * 32 + c] = s.d * static_cast<float>(v) - s.m;
      }
    }
  }
}

}  // namespace minfer::kernels
