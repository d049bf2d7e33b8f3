// The W8A16 GEMM of both x86 ISAs (int8 weight rows with f32 scales per group and optional zero points, or GGUF
// Q8_0 blocks; f32 activations), written once over a vector-traits type V (vec_avx2.h, vec_avx512.h) and
// instantiated in gemm_<isa>.cpp through gemm_isa.inc (internal linkage).
//  - Few rows of X (decode): dot-product tiles as in gemm_dot_impl.h, the int8 widened to f32 in registers (V's
//    I8W loader: vpmovsxbd + vcvtdq2ps), so each weight byte is read from memory once and nothing is
//    materialised. On AVX-512 one scale per row is applied once to the finished sum, and the next tile's rows are
//    requested ahead; AVX2 scales every group inside the loop and requests nothing (as before the two shared this
//    code: the per-row scale rounds differently).
//  - Q8_0 at decode: row pointers plus block offsets, each block's (AVX2: half block's) partial sum scaled once.
//  - Many rows (prefill): a slab of 32 weight rows is dequantized into the caller's scratch (128 KiB at K = 1024,
//    kept in L2) and handed to the ISA's packed f32 GEMM, which is compute-bound there, so the int8 source costs
//    nothing extra.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/leaf.h"
#include "kernels/quant_leaf.h"
#include "kernels/x86/gemm_dot_impl.h"
#include "tensor/q8_0_tiles.h"

namespace minfer::kernels::x86 {
namespace {

// The tile shapes of gemm_dot_impl.h (DotShape), plus what only W8A16 has.
template <class V>
struct W8A16Shape : DotShape<V> {
  static constexpr int kLoneNR = kWide<V> ? 8 : 4;  // weight rows per tile for the rows left over
  // AVX-512 only (bit for bit what each ISA computed before they shared this code): a per-row scale applied to
  // the finished sum, symmetric weights without the zero-point subtraction, the next tile requested ahead.
  static constexpr bool kSpecialise = kWide<V>;
};

inline float q80_scale(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  return _cvtsh_ss(d);
}

// Int8 rows [n, k] with scales [n, groups] (and zeros).
struct W8A16Rows {
  const int8_t* q;
  const float* scales;
  const float* zeros;
  int64_t k, group_size, groups;
  const int8_t* at(int64_t row, int64_t col) const { return q + row * k + col; }
  float scale(int64_t row, int64_t g) const { return scales[row * groups + g]; }
  float zero(int64_t row, int64_t g) const { return zeros ? zeros[row * groups + g] : 0.0f; }
  int64_t row_bytes() const { return k; }
};

// Q8_0 blocks: per row k / 32 blocks of {f16 scale, 32 int8} (the slab path's source; decode has q80_tile).
struct W8A16Q80 {
  const uint8_t* blocks;
  int64_t k;
  static constexpr int64_t group_size = 32;
  int64_t groups;
  const int8_t* at(int64_t row, int64_t col) const {
    return reinterpret_cast<const int8_t*>(blocks + (row * groups + col / 32) * kQ80BlockBytes + 2 + col % 32);
  }
  float scale(int64_t row, int64_t g) const { return q80_scale(blocks + (row * groups + g) * kQ80BlockBytes); }
  float zero(int64_t, int64_t) const { return 0.0f; }
};

// y[i, j] for i < MR, j < NR over weight rows row0.. (kScaled: scales applied per group inside the loop;
// otherwise the one scale per row multiplies the finished sum). kAsym: zero points subtracted from q.
template <class V, class I8W, class Src, int MR, int NR, bool kScaled, bool kAsym>
inline void w8a16_tile(const float* x, const Src& w, int64_t row0, float* y, int64_t ldy, const float* bias,
                       bool prefetch_next) {
  using Reg = typename V::Reg;
  const int64_t k = w.k;
  Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t c0 = g * w.group_size, c1 = c0 + w.group_size < k ? c0 + w.group_size : k;
    Reg sv[NR], zv[NR];
    for (int j = 0; j < NR; ++j) {
      if constexpr (kScaled) sv[j] = V::set1(w.scale(row0 + j, g));
      if constexpr (kAsym) zv[j] = V::set1(w.zero(row0 + j, g));
    }
    for (int64_t c = c0; c < c1; c += V::kWidth) {
      const typename V::Tail tail = V::tail(c1 - c);
      if (prefetch_next && (c & 63) == 0) {
        for (int j = 0; j < NR; ++j)
          _mm_prefetch(reinterpret_cast<const char*>(w.at(row0 + j, c) + NR * w.row_bytes()), _MM_HINT_T0);
      }
      Reg xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = V::template load_weights_tail<typename V::F32>(x + i * k + c, tail);
      for (int j = 0; j < NR; ++j) {
        Reg wv = V::template load_weights_tail<I8W>(w.at(row0 + j, c), tail);
        if constexpr (kAsym) wv = V::sub(wv, zv[j]);
        if constexpr (kScaled) wv = V::mul(wv, sv[j]);
        for (int i = 0; i < MR; ++i) acc[i][j] = V::fmadd(xv[i], wv, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = V::reduce_add(acc[i][j]);
      if constexpr (!kScaled) s *= w.scale(row0 + j, 0);
      y[i * ldy + j] = bias ? s + bias[j] : s;
    }
  }
}

template <class V, class I8W, class Src, int MR, int NR, bool kScaled, bool kAsym>
void w8a16_rows(const float* x, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  constexpr bool kPrefetch = W8A16Shape<V>::kSpecialise;
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    w8a16_tile<V, I8W, Src, MR, NR, kScaled, kAsym>(x, w, j, y + j, n, bias ? bias + j : nullptr,
                                                    kPrefetch && j + 2 * NR <= n1);
  }
  for (; j < n1; ++j)
    w8a16_tile<V, I8W, Src, MR, 1, kScaled, kAsym>(x, w, j, y + j, n, bias ? bias + j : nullptr, false);
}

template <class V, class I8W, class Src, bool kScaled, bool kAsym>
void w8a16_dot_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0,
                    int64_t n1) {
  using S = W8A16Shape<V>;
  const int64_t k = w.k;
  if constexpr (kWide<V>) {
    if (m == 1) return w8a16_rows<V, I8W, Src, 1, 8, kScaled, kAsym>(x, w, n, bias, y, n0, n1);
    if (m == 2) return w8a16_rows<V, I8W, Src, 2, 8, kScaled, kAsym>(x, w, n, bias, y, n0, n1);
  }
  int64_t i = 0;
  for (; i + S::kMaxMR <= m; i += S::kMaxMR)
    w8a16_rows<V, I8W, Src, S::kMaxMR, 4, kScaled, kAsym>(x + i * k, w, n, bias, y + i * n, n0, n1);
  for (; i < m; ++i) w8a16_rows<V, I8W, Src, 1, S::kLoneNR, kScaled, kAsym>(x + i * k, w, n, bias, y + i * n, n0, n1);
}

// Q8_0 at decode: y[i, j] for i < MR, j < NR over the NR weight rows starting at `w` (rows `rb` bytes apart),
// block by block: the block's columns, two vectors at a time, are widened and multiplied by x into one partial sum
// per (i, j), which the block's scale then adds into the accumulator (one scale multiply per block on AVX-512, per
// half block on AVX2, where that keeps two X vectors per row within the 16 registers). Every address is a row
// pointer plus the block offset: computing them from (row, col) each time spilled registers and ran at half this
// speed. `next` (the first row of the tile after the next, or null) has its blocks requested as these are read, so
// a row's start never waits on the hardware prefetcher. Q8_0 rows are 34-byte blocks read row by row, so a decode
// GEMV is bound by how many misses are in flight: on AVX-512 one X row takes 16 weight rows per tile (16 streams;
// 8 measured 15% slower) and requests two tiles ahead (one tile ahead measured 8% slower, three 3%).
template <class V, class I8W, int MR, int NR>
inline void q80_tile(const float* x, int64_t k, const uint8_t* w, int64_t rb, float* y, int64_t ldy, const float* bias,
                     const uint8_t* next) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kWidth;
  const int64_t groups = k / 32;
  const uint8_t* row[NR];
  for (int j = 0; j < NR; ++j) row[j] = w + j * rb;
  Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t off = g * kQ80BlockBytes;
    if (next && (g & 1) == 0) {
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * rb + off), _MM_HINT_T0);
    }
    for (int64_t h = 0; h < 32; h += 2 * L) {
      Reg x0[MR], x1[MR];
      for (int i = 0; i < MR; ++i) {
        x0[i] = V::load(x + i * k + g * 32 + h);
        x1[i] = V::load(x + i * k + g * 32 + h + L);
      }
      for (int j = 0; j < NR; ++j) {
        const uint8_t* b = row[j] + off;
        const Reg s = V::set1(q80_scale(b));
        const Reg w0 = V::template load_weights<I8W>(reinterpret_cast<const int8_t*>(b + 2 + h));
        const Reg w1 = V::template load_weights<I8W>(reinterpret_cast<const int8_t*>(b + 2 + h + L));
        for (int i = 0; i < MR; ++i) {
          const Reg t = V::fmadd(x1[i], w1, V::mul(x0[i], w0));
          acc[i][j] = V::fmadd(t, s, acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const float v = V::reduce_add(acc[i][j]);
      y[i * ldy + j] = bias ? v + bias[j] : v;
    }
  }
}

template <class V, class I8W, int MR, int NR>
void q80_rows(const float* x, int64_t k, const uint8_t* w, int64_t n, const float* bias, float* y, int64_t n0,
              int64_t n1) {
  const int64_t rb = k / 32 * kQ80BlockBytes;
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const uint8_t* next = j + 3 * NR <= n1 ? w + (j + 2 * NR) * rb : nullptr;
    q80_tile<V, I8W, MR, NR>(x, k, w + j * rb, rb, y + j, n, bias ? bias + j : nullptr, next);
  }
  for (; j < n1; ++j) q80_tile<V, I8W, MR, 1>(x, k, w + j * rb, rb, y + j, n, bias ? bias + j : nullptr, nullptr);
}

template <class V, class I8W>
void q80_cols(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, const float* bias, float* y,
              int64_t n0, int64_t n1) {
  using S = W8A16Shape<V>;
  if constexpr (kWide<V>) {
    if (m == 1) return q80_rows<V, I8W, 1, 16>(x, k, w, n, bias, y, n0, n1);  // 16 accumulators
    if (m == 2) return q80_rows<V, I8W, 2, 8>(x, k, w, n, bias, y, n0, n1);
  }
  int64_t i = 0;
  for (; i + S::kMaxMR <= m; i += S::kMaxMR)
    q80_rows<V, I8W, S::kMaxMR, 4>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
  for (; i < m; ++i) q80_rows<V, I8W, 1, 8>(x + i * k, k, w, n, bias, y + i * n, n0, n1);
}

// Rows [row0, row0 + rows) dequantized to f32 into out [rows, k] (out has a vector of room past its end: the
// last group of a row may be stored whole, its extra lanes overwritten by what follows).
template <class V, class I8W, class Src>
void dequantize_slab(const Src& w, int64_t row0, int64_t rows, float* out, bool asym) {
  const int64_t k = w.k;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < w.groups; ++g) {
      const int64_t c0 = g * w.group_size, c1 = c0 + w.group_size < k ? c0 + w.group_size : k;
      const typename V::Reg s = V::set1(w.scale(row0 + r, g));
      const typename V::Reg z = V::set1(asym ? w.zero(row0 + r, g) : 0.0f);
      for (int64_t c = c0; c < c1; c += V::kWidth) {
        const typename V::Tail tail = V::tail(c1 - c);
        const typename V::Reg q = V::template load_weights_tail<I8W>(w.at(row0 + r, c), tail);
        V::store_padded(out + r * k + c, tail, V::mul(V::sub(q, z), s));
      }
    }
  }
}

template <class V, class I8W, class Src>
void slab_cols(const float* x, int64_t m, const Src& w, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1,
               float* scratch, bool asym, GemmColsFn packed_gemm) {
  for (int64_t j = n0; j < n1; j += kW8A16SlabRows) {
    const int64_t rows = n1 - j < kW8A16SlabRows ? n1 - j : kW8A16SlabRows;
    dequantize_slab<V, I8W>(w, j, rows, scratch, asym);
    packed_gemm(x, m, w.k, scratch, DType::F32, n, bias ? bias + j : nullptr, y + j, 0, rows);
  }
}

// Columns [n0, n1) of the W8A16 GEMM (quant_leaf.h's W8A16ColsFn); packed_gemm: the ISA's gemm_cols_packed.
template <class V, class I8W>
void w8a16_cols(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias, float* y,
                int64_t n0, int64_t n1, float* scratch, GemmColsFn packed_gemm) {
  if (w.q8_0) {
    const W8A16Q80 src{static_cast<const uint8_t*>(w.data), k, w.groups};
    if (scratch) return slab_cols<V, I8W>(x, m, src, n, bias, y, n0, n1, scratch, false, packed_gemm);
    return q80_cols<V, I8W>(x, m, k, src.blocks, n, bias, y, n0, n1);
  }
  const W8A16Rows src{static_cast<const int8_t*>(w.data), w.scales, w.zeros, k, w.group_size, w.groups};
  const bool asym = w.zeros != nullptr;
  if (scratch) return slab_cols<V, I8W>(x, m, src, n, bias, y, n0, n1, scratch, asym, packed_gemm);
  if constexpr (W8A16Shape<V>::kSpecialise) {
    if (w.groups == 1) {
      return asym ? w8a16_dot_cols<V, I8W, W8A16Rows, false, true>(x, m, src, n, bias, y, n0, n1)
                  : w8a16_dot_cols<V, I8W, W8A16Rows, false, false>(x, m, src, n, bias, y, n0, n1);
    }
    if (!asym) return w8a16_dot_cols<V, I8W, W8A16Rows, true, false>(x, m, src, n, bias, y, n0, n1);
  }
  return w8a16_dot_cols<V, I8W, W8A16Rows, true, true>(x, m, src, n, bias, y, n0, n1);
}

}  // namespace
}  // namespace minfer::kernels::x86
