// AVX-512 VNNI leaf of the 4- to 6-bit GGUF types and Q8_0 in 16-row tiles (tensor/gguf_tiles.h, contract in
// kernels/quant_leaf.h). Per 32-column block of a tile, four 64-byte loads hold the 16 rows' nibbles; masked (and
// shifted), with the high bits added under mask registers, they are eight vpdpbusd operands of 16 rows x 4 columns,
// each multiplied by 4 broadcast int8 activations, so the unpacking happens in registers and serves every activation
// row of the pass. The accumulator starts at -z x sum(x) (the type's zero
// point), so per block and row the int32 sum is exactly sum((u - z) x) as in the reference; it is scaled by
// d_w x d_x in f32 and the offset m_w x d_x sum(x) taken off. IQ4 nibbles go through their code book with vpshufb;
// Q8_0's bytes (stored as q + 128) are the operands as loaded.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/gguf_blocks.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_quant_kernels.h"
#include "tensor/gguf_tiles.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int64_t kPrefetchBytes = 2048;  // how far ahead of the block being unpacked the stream is requested
constexpr int kXRows = 8;  // activation rows per pass over a tile's weights (each block unpacked once for them)

struct TileKind {
  bool super_blocks, has_min, coded, sub16, full_bytes;
  int high_bits, zero_point;
  float min_sign;       // Q4_1 / Q5_1 store +m (w = d u + m), the K types dmin (w = d sc u - dmin mn)
  const uint8_t* book;  // the code book of the coded types (IQ4, MXFP4)
};

constexpr TileKind kind_of(DType type) {
  const GgufTiles t{type, 0, 0};
  const bool legacy_min = t.type == DType::Q4_1 || t.type == DType::Q5_1;
  return {t.super_blocks(),
          t.has_min(),
          t.coded(),
          t.scale_columns() == 16,
          t.full_bytes(),
          t.high_bits(),
          gguf::tile_zero_point(t.type),
          legacy_min ? -1.0f : 1.0f,
          gguf::code_book(t.type)};
}

// The activation rows of the passes, re-laid block-major: for pass p (rows 8 p .. 8 p + 7) and block b, the 8 rows'
// 32 int8 values, then per row d_x, the starts -z sum(x) (of the halves and the block) and sum(x) as a float, at
// offsets that are constants in the unrolled pass. Read straight from Q8Blocks, each row's addresses were computed (and
// spilled) per block, about twenty scalar instructions beside every eight vpdpbusd.
struct PassBlock {
  int8_t q[kXRows][32];
  float dx[kXRows];
  int32_t start[kXRows][2];  // of each half of the block (Q6_K's two scales)
  int32_t start32[kXRows];   // of the whole block
  float sum[kXRows];
};

const PassBlock* pass_blocks(const Q8Blocks& x, int64_t m, int64_t k, int zero_point) {
  thread_local std::vector<PassBlock> buffer;
  const int64_t blocks = k / 32, passes = (m + kXRows - 1) / kXRows;
  buffer.resize(static_cast<size_t>(passes * blocks));
  for (int64_t p = 0; p < passes; ++p) {
    for (int64_t b = 0; b < blocks; ++b) {
      PassBlock& pb = buffer[static_cast<size_t>(p * blocks + b)];
      // Rows past m are left as they are: the last pass reads only its own rows (tile_pass<XR>).
      for (int r = 0; r < kXRows && p * kXRows + r < m; ++r) {
        const int64_t i = p * kXRows + r;
        std::memcpy(pb.q[r], x.q + i * k + b * 32, 32);
        const int32_t* sums = x.sum16 + i * (k / 16) + 2 * b;
        pb.dx[r] = x.d16[i * (k / 16) + 2 * b];
        pb.start[r][0] = -zero_point * sums[0];
        pb.start[r][1] = -zero_point * sums[1];
        pb.start32[r] = -zero_point * (sums[0] + sums[1]);
        pb.sum[r] = static_cast<float>(sums[0] + sums[1]);
      }
    }
  }
  return buffer.data();
}

// The eight vpdpbusd operands of a block: w[2c] columns 8c..8c+3, w[2c+1] columns 8c+4..8c+7, 16 rows x 4 each,
// nibbles plus the high-bit planes (one mask register per operand and plane).
inline void unpack_block(const uint8_t* block, const TileKind& kind, __m512i* w) {
  if (kind.full_bytes) {  // Q8_0: the operands as stored
    for (int o = 0; o < 8; ++o) {
      _mm_prefetch(reinterpret_cast<const char*>(block + 2 * kPrefetchBytes + 64 * o), _MM_HINT_T0);
      w[o] = _mm512_loadu_si512(block + 64 * o);
    }
    return;
  }
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBytes + 64 * c), _MM_HINT_T0);
    const __m512i v = _mm512_loadu_si512(block + 64 * c);
    w[2 * c] = _mm512_and_si512(v, low);
    w[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  }
  for (int plane = 0; plane < kind.high_bits; ++plane) {
    const __m512i bit = _mm512_set1_epi8(static_cast<char>(16 << plane));
    for (int o = 0; o < 8; ++o) {
      uint64_t bits;
      std::memcpy(&bits, block + GgufTiles::kNibbleBytes + plane * GgufTiles::kPlaneBytes + 8 * o, 8);
      w[o] = _mm512_mask_add_epi8(w[o], _cvtu64_mask64(bits), w[o], bit);
    }
  }
  if (kind.coded) {
    const __m512i book = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kind.book)));
    for (int o = 0; o < 8; ++o) w[o] = _mm512_shuffle_epi8(book, w[o]);
  }
}

// A memory-operand broadcast (vpbroadcastd zmm, m32: one load uop), not a load into a general register and a
// broadcast from it (two uops on the one port that moves general registers into vector ones).
inline __m512i broadcast4(const int8_t* p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }

inline __m512 int8s_as_floats(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The int32 sum of (u - z) x over operands [o0, o0 + count) (4 columns each), starting from -z sum(x).
inline __m512i dot_operands(const __m512i* w, int o0, int count, const int8_t* xq, int32_t start) {
  __m512i dot = _mm512_set1_epi32(start);
  for (int o = o0; o < o0 + count; ++o) dot = _mm512_dpbusd_epi32(dot, w[o], broadcast4(xq + 4 * o));
  return dot;
}

// out[r] (16 rows of the tile) = activation row i0 + r times the tile, for r < XR. The sums stay in registers (a local
// array, unrolled): accumulating through `out` kept them in memory, a store and reload on every block.
// The type is a template argument so that its layout's branches fold away and its offsets are constants.
template <int XR, DType T>
void tile_pass(int64_t k, const uint8_t* tile, const PassBlock* xb, __m512* out) {
  constexpr TileKind kind = kind_of(T);
  const GgufTiles t{T, 0, k};
  __m512 acc[XR];
#pragma GCC unroll 8
  for (int r = 0; r < XR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < t.groups(); ++g) {
    const uint8_t* group = tile + g * t.group_bytes();
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group)));
    const __m512 m = kind.has_min ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32)))
                                  : _mm512_setzero_ps();
    for (int64_t b = 0; b < t.blocks_per_group(); ++b) {
      // Scales of the 16 rows: of the block, or of its two halves (Q6_K); offsets of the block.
      __m512 da = d, db = d, mw = _mm512_mul_ps(m, _mm512_set1_ps(kind.min_sign));
      if constexpr (kind.super_blocks) {
        const int64_t s = kind.sub16 ? 2 * b : b;
        da = _mm512_mul_ps(d, int8s_as_floats(group + t.sc_at(s, 0)));
        if (kind.sub16) db = _mm512_mul_ps(d, int8s_as_floats(group + t.sc_at(s + 1, 0)));
        if (kind.has_min) mw = _mm512_mul_ps(m, int8s_as_floats(group + t.mn_at(b, 0)));
      }
      __m512i w[8];
      unpack_block(group + t.block_at(b), kind, w);
      const PassBlock& x = xb[g * t.blocks_per_group() + b];
#pragma GCC unroll 8
      for (int r = 0; r < XR; ++r) {
        const __m512 dx = _mm512_set1_ps(x.dx[r]);
        if constexpr (kind.sub16) {
          const __m512i lo = dot_operands(w, 0, 4, x.q[r], x.start[r][0]);
          const __m512i hi = dot_operands(w, 4, 4, x.q[r], x.start[r][1]);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(da, dx), acc[r]);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(db, dx), acc[r]);
        } else {  // two chains of four vpdpbusd, not one of eight: half the latency at one activation row
          const __m512i lo = dot_operands(w, 0, 4, x.q[r], x.start32[r]);
          const __m512i hi = dot_operands(w, 4, 4, x.q[r], 0);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), _mm512_mul_ps(da, dx), acc[r]);
        }
        if constexpr (kind.has_min) acc[r] = _mm512_fnmadd_ps(mw, _mm512_mul_ps(dx, _mm512_set1_ps(x.sum[r])), acc[r]);
      }
    }
  }
  for (int r = 0; r < XR; ++r) out[r] = acc[r];
}

}  // namespace

namespace {

template <DType T>
void type_cols(const Q8Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias, float* y,
               int64_t n0, int64_t n1) {
  const GgufTiles t{T, n, k};
  constexpr TileKind kind = kind_of(T);
  const PassBlock* passes = pass_blocks(x, m, k, kind.zero_point);
  for (int64_t tile = n0 / GgufTiles::kRows; tile * GgufTiles::kRows < n1; ++tile) {
    const int64_t col = tile * GgufTiles::kRows;
    const __mmask16 mask = tail_mask(std::min<int64_t>(GgufTiles::kRows, n1 - col));
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    const uint8_t* tile_bytes = tiles + t.group_offset(tile, 0);
    for (int64_t i0 = 0; i0 < m; i0 += kXRows) {
      __m512 acc[kXRows];
      const int64_t rows = std::min<int64_t>(kXRows, m - i0);
      const PassBlock* xb = passes + i0 / kXRows * (k / 32);
      switch (rows) {
        case 8: tile_pass<8, T>(k, tile_bytes, xb, acc); break;
        case 7: tile_pass<7, T>(k, tile_bytes, xb, acc); break;
        case 6: tile_pass<6, T>(k, tile_bytes, xb, acc); break;
        case 5: tile_pass<5, T>(k, tile_bytes, xb, acc); break;
        case 4: tile_pass<4, T>(k, tile_bytes, xb, acc); break;
        case 3: tile_pass<3, T>(k, tile_bytes, xb, acc); break;
        case 2: tile_pass<2, T>(k, tile_bytes, xb, acc); break;
        default: tile_pass<1, T>(k, tile_bytes, xb, acc); break;
      }
      for (int64_t r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + (i0 + r) * n + col, mask, _mm512_add_ps(acc[r], b));
    }
  }
}

}  // namespace

void gguf_tiles_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* tiles, int64_t n,
                     const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (type) {
    case DType::Q4_0: return type_cols<DType::Q4_0>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q4_1: return type_cols<DType::Q4_1>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::IQ4_NL: return type_cols<DType::IQ4_NL>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q4_K: return type_cols<DType::Q4_K>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::IQ4_XS: return type_cols<DType::IQ4_XS>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q5_0: return type_cols<DType::Q5_0>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q5_1: return type_cols<DType::Q5_1>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q5_K: return type_cols<DType::Q5_K>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q6_K: return type_cols<DType::Q6_K>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::Q8_0: return type_cols<DType::Q8_0>(x, m, k, tiles, n, bias, y, n0, n1);
    case DType::MXFP4: return type_cols<DType::MXFP4>(x, m, k, tiles, n, bias, y, n0, n1);
    default: fail("gguf_tiles_cols: {} is not held in GGUF tiles", dtype_name(type));
  }
}

}  // namespace minfer::kernels::avx512
