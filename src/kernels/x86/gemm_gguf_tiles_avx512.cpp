// AVX-512 VNNI leaf of the 4-bit GGUF types in 16-row tiles (tensor/gguf_tiles.h, contract in kernels/quant_leaf.h).
// Per 32-column block of a tile, four 64-byte loads hold the 16 rows' nibbles; masked (and shifted) they are eight
// vpdpbusd operands of 16 rows x 4 columns, each multiplied by 4 broadcast int8 activations, so the unpacking happens
// in registers and serves every activation row of the pass. The accumulator starts at -z x sum(x) (the type's zero
// point), so per block and row the int32 sum is exactly sum((u - z) x) as in the reference; it is scaled by
// d_w x d_x in f32 and the offset m_w x d_x sum(x) taken off. IQ4 nibbles go through their code book with vpshufb.
#include <algorithm>
#include <cstring>

#include "kernels/gguf_blocks.h"
#include "kernels/x86/avx512_util.h"
#include "kernels/x86/x86_quant_kernels.h"
#include "tensor/gguf_tiles.h"

namespace minfer::kernels::avx512 {
namespace {

constexpr int kXRows = 4;  // activation rows per pass over a tile's weights

struct TileKind {
  bool super_blocks, has_min, iq4;
  int zero_point;
  float min_sign;  // Q4_1 stores +m (w = d u + m), Q4_K dmin (w = d sc u - dmin mn)
};

TileKind kind_of(DType type) {
  switch (type) {
    case DType::Q4_0: return {false, false, false, 8, 0.0f};
    case DType::Q4_1: return {false, true, false, 0, -1.0f};
    case DType::IQ4_NL: return {false, false, true, 128, 0.0f};
    case DType::Q4_K: return {true, true, false, 0, 1.0f};
    default: return {true, false, true, 128, 0.0f};  // IQ4_XS
  }
}

// The eight vpdpbusd operands of a block: w[2c] columns 8c..8c+3, w[2c+1] columns 8c+4..8c+7, 16 rows x 4 each.
inline void unpack_block(const uint8_t* payload, bool iq4, __m512i* w) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i book = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gguf::kIq4Unsigned)));
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(payload + 64 * c);
    w[2 * c] = _mm512_and_si512(v, low);
    w[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    if (iq4) {
      w[2 * c] = _mm512_shuffle_epi8(book, w[2 * c]);
      w[2 * c + 1] = _mm512_shuffle_epi8(book, w[2 * c + 1]);
    }
  }
}

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc[r] (16 rows of the tile) += activation row i0 + r times the tile, for r < XR.
template <int XR>
void tile_pass(const GgufTiles& t, const TileKind& kind, const uint8_t* tile, const Q8Blocks& x, int64_t i0,
               __m512* acc) {
  const int64_t k = t.k;
  for (int r = 0; r < XR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < t.groups(); ++g) {
    const uint8_t* group = tile + g * t.group_bytes();
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group)));
    const __m512 m = kind.has_min ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32)))
                                  : _mm512_setzero_ps();
    for (int64_t b = 0; b < t.blocks_per_group(); ++b) {
      __m512 dw = d, mw = _mm512_mul_ps(m, _mm512_set1_ps(kind.min_sign));
      if (kind.super_blocks) {
        const auto int8s = [&](int64_t at) {
          return _mm512_cvtepi32_ps(
              _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + at))));
        };
        dw = _mm512_mul_ps(d, int8s(t.sc_at(b, 0)));
        if (kind.has_min) mw = _mm512_mul_ps(m, int8s(t.mn_at(b, 0)));
      }
      __m512i w[8];
      unpack_block(group + t.payload_at(b), kind.iq4, w);
      const int64_t block = g * t.blocks_per_group() + b;
      for (int r = 0; r < XR; ++r) {
        const int8_t* xq = x.q + (i0 + r) * k + block * 32;
        const int32_t sum = x.sum32[(i0 + r) * (k / 32) + block];
        __m512i dot = _mm512_set1_epi32(-kind.zero_point * sum);
        for (int c = 0; c < 4; ++c) {
          dot = _mm512_dpbusd_epi32(dot, w[2 * c], broadcast4(xq + 8 * c));
          dot = _mm512_dpbusd_epi32(dot, w[2 * c + 1], broadcast4(xq + 8 * c + 4));
        }
        const float dx = x.d16[(i0 + r) * (k / 16) + 2 * block];
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[r]);
        if (kind.has_min)
          acc[r] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(dx * static_cast<float>(sum)), acc[r]);
      }
    }
  }
}

}  // namespace

void gguf_tiles_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* tiles, int64_t n,
                     const float* bias, float* y, int64_t n0, int64_t n1) {
  const GgufTiles t{type, n, k};
  const TileKind kind = kind_of(type);
  for (int64_t tile = n0 / GgufTiles::kRows; tile * GgufTiles::kRows < n1; ++tile) {
    const int64_t col = tile * GgufTiles::kRows;
    const __mmask16 mask = tail_mask(std::min<int64_t>(GgufTiles::kRows, n1 - col));
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    const uint8_t* tile_bytes = tiles + t.group_offset(tile, 0);
    for (int64_t i0 = 0; i0 < m; i0 += kXRows) {
      __m512 acc[kXRows];
      const int64_t rows = std::min<int64_t>(kXRows, m - i0);
      switch (rows) {
        case 4: tile_pass<4>(t, kind, tile_bytes, x, i0, acc); break;
        case 3: tile_pass<3>(t, kind, tile_bytes, x, i0, acc); break;
        case 2: tile_pass<2>(t, kind, tile_bytes, x, i0, acc); break;
        default: tile_pass<1>(t, kind, tile_bytes, x, i0, acc); break;
      }
      for (int64_t r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + (i0 + r) * n + col, mask, _mm512_add_ps(acc[r], b));
    }
  }
}

}  // namespace minfer::kernels::avx512
