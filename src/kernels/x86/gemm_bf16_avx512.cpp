// AVX-512-BF16 GEMM for bf16 weights with the activations rounded to bf16: vdpbf16ps multiplies 32 bf16 pairs
// and accumulates in f32 (the products are exact in f32), so a 64-byte load of weights feeds one instruction
// with no widening, at twice the multiply-adds of an f32 FMA.
//
// Two forms, chosen by the number of rows of X:
//  * dot form (decode, few rows): an MR x NR tile of dot products along k, weight rows loaded straight from
//    memory (each weight byte is streamed once per call and used for all MR rows), the next tile's rows
//    prefetched; one horizontal sum per output at the end of the tile.
//  * packed form (prefill): a panel of 32 weight rows x kKc is transposed once into an L1-sized buffer of
//    k-pairs (pair p of row r at [p][r]), then a 12 x 32 register tile accumulates outer products: one
//    broadcast pair of X (an embedded {1to16} memory operand) times two panel vectors per pair of vdpbf16ps.
// And the GEMM over weights already in oneDNN's blocked layout (TensorLayout::kBf16Blocked64) for decode: one pass
// up to 7 rows, block-major with prefetch for batches; the driver gives oneDNN's matmul 8-11 rows and prefill
// (kernels/onednn_gemm.h, onednn_takes_rows).
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
namespace {

// ---- dot form ------------------------------------------------------------------------------------------
inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// y[i, j] (i < MR, j < NR) = dot(xb row i, w row j); xb rows are zero-padded to a multiple of 32.
template <int MR, int NR>
inline void dot_tile(const uint16_t* xb, int64_t ldxb, int64_t k, const uint16_t* w, float* y, int64_t ldy,
                     const float* bias, const uint16_t* next) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    // Rows are short (896 bf16 = 28 lines): fetch the same line of the next tile's rows meanwhile, so the
    // stream never waits for the hardware prefetcher to ramp up on a new row.
    for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * k + p), _MM_HINT_T0);
    __m512i xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_si512(xb + i * ldxb + p);
    for (int j = 0; j < NR; ++j) {
      const __m512i wv = _mm512_loadu_si512(w + j * k + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], as_bh(wv), as_bh(xv[i]));
    }
  }
  if (p < k) {  // weight tail masked to zero; the padding of xb is zero as well
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - p)) - 1);
    __m512i xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_si512(xb + i * ldxb + p);
    for (int j = 0; j < NR; ++j) {
      const __m512i wv = _mm512_maskz_loadu_epi16(mask, w + j * k + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], as_bh(wv), as_bh(xv[i]));
    }
  }
  for (int i = 0; i < MR; ++i) x86::store_sums<Vec, NR>(acc[i], y + i * ldy, bias);
}

// Rows [0, MR) of X against weight rows [n0, n1), NR at a time, single rows for the tail.
template <int MR, int NR>
void dot_rows(const uint16_t* xb, int64_t ldxb, int64_t k, const uint16_t* w, int64_t n, const float* bias, float* y,
              int64_t n0, int64_t n1) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const int64_t next = j + 2 * NR <= n1 ? j + NR : j;
    dot_tile<MR, NR>(xb, ldxb, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + next * k);
  }
  for (; j < n1; ++j) dot_tile<MR, 1>(xb, ldxb, k, w + j * k, y + j, n, bias ? bias + j : nullptr, w + j * k);
}

// More rows than one tile holds: NR weight rows are loaded from memory once and applied to every row of X
// in groups of MR while they sit in L1 (X itself stays in L1/L2: a few rows of bf16).
template <int MR, int NR>
void dot_many(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n, const float* bias,
              float* y, int64_t n0, int64_t n1) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR) {
    const float* bj = bias ? bias + j : nullptr;
    const uint16_t* next = w + (j + 2 * NR <= n1 ? j + NR : j) * k;
    int64_t i = 0;
    for (; i + MR <= m; i += MR) dot_tile<MR, NR>(xb + i * ldxb, ldxb, k, w + j * k, y + i * n + j, n, bj, next);
    for (; i < m; ++i) dot_tile<1, NR>(xb + i * ldxb, ldxb, k, w + j * k, y + i * n + j, n, bj, next);
  }
  for (; j < n1; ++j) {
    const float* bj = bias ? bias + j : nullptr;
    int64_t i = 0;
    for (; i + MR <= m; i += MR) dot_tile<MR, 1>(xb + i * ldxb, ldxb, k, w + j * k, y + i * n + j, n, bj, w + j * k);
    for (; i < m; ++i) dot_tile<1, 1>(xb + i * ldxb, ldxb, k, w + j * k, y + i * n + j, n, bj, w + j * k);
  }
}

// ---- GEMV over blocked weights (TensorLayout::kBf16Blocked64) ------------------------------------------
// Block j / 64 (64 weight rows) starts at w + j * kp and holds kp / 2 k-pairs of [64 rows][2] = 256 bytes, read
// front to back: every pair is 4 vectors of 16 rows x 2 k, multiplied by one broadcast pair of each X row. No
// horizontal sums; the padding (rows past n, columns past k) is zero, so no masking but on the store.
constexpr int64_t kBlockRows = 64;

// y[i, j..min(j + 64, n1)) for i < MR from `pairs` pair rows of the 64-row block at `block` (+= y instead of + bias
// when `accumulate`). With `prefetch`, the pair rows p = phase, phase + stride, ... of the segment at `prefetch` are
// fetched into L2 as pair row p here is read: the block-major loop below gives each of its row groups one phase,
// so the next segment's fetch is spread evenly over all of them.
template <int MR>
inline void block_tile(const uint16_t* xb, int64_t ldxb, int64_t pairs, const uint16_t* block, const float* bias,
                       float* y, int64_t n, int64_t j, int64_t n1, const uint16_t* prefetch, int stride, int phase,
                       bool accumulate) {
  // One or two rows of X leave 4-8 accumulators, too few chains to cover vdpbf16ps's latency: they get a second
  // set for the odd pairs, added at the end.
  constexpr int kSets = MR <= 2 ? 2 : 1;
  const auto* x32 = reinterpret_cast<const uint32_t*>(xb);
  const int64_t ld32 = ldxb / 2;
  __m512 acc[kSets][MR][4];
  for (int s = 0; s < kSets; ++s) {
    for (int i = 0; i < MR; ++i) {
      for (int c = 0; c < 4; ++c) acc[s][i][c] = _mm512_setzero_ps();
    }
  }
  int until_prefetch = phase;
  for (int64_t p = 0; p < pairs; p += kSets, block += kSets * 2 * kBlockRows) {
    if (prefetch) {
      if (until_prefetch-- == 0) {
        for (int l = 0; l < 4 * kSets; ++l) _mm_prefetch(reinterpret_cast<const char*>(prefetch + l * 32), _MM_HINT_T1);
        until_prefetch = stride - 1;
      }
      prefetch += kSets * 2 * kBlockRows;
    }
    for (int s = 0; s < kSets; ++s) {
      __m512i wv[4];
      for (int c = 0; c < 4; ++c) wv[c] = _mm512_load_si512(block + s * 2 * kBlockRows + c * 32);
      for (int i = 0; i < MR; ++i) {
        const __m512i xv = _mm512_set1_epi32(static_cast<int>(x32[i * ld32 + p + s]));
        for (int c = 0; c < 4; ++c) acc[s][i][c] = _mm512_dpbf16_ps(acc[s][i][c], as_bh(wv[c]), as_bh(xv));
      }
    }
  }
  for (int c = 0; c < 4; ++c) {
    const int64_t col = j + c * 16;
    if (col >= n1) break;
    const __mmask16 mask = tail_mask(n1 - col);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + col) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      __m512 v = acc[0][i][c];
      if constexpr (kSets == 2) v = _mm512_add_ps(v, acc[1][i][c]);
      const __m512 base = accumulate ? _mm512_maskz_loadu_ps(mask, y + i * n + col) : b;
      _mm512_mask_storeu_ps(y + i * n + col, mask, _mm512_add_ps(v, base));
    }
  }
}

using BlockTileFn = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, const float*, float*, int64_t, int64_t,
                             int64_t, const uint16_t*, int, int, bool);
constexpr int kOnePassRows = 7;  // 28 accumulators: up to 7 X rows read each block once, in one pass
constexpr BlockTileFn kBlockTile[kOnePassRows + 1] = {nullptr,       block_tile<1>, block_tile<2>, block_tile<3>,
                                                      block_tile<4>, block_tile<5>, block_tile<6>, block_tile<7>};
constexpr int kGroupRows = 6;  // block-major groups: 7 rows measured slower once the block is re-read from L2
// Pair rows per segment of a block: at most 128 x 256 B = 32 KiB, so the groups after the first read it from L1.
constexpr int64_t kSegmentPairs = 128;

// Block-major, for more rows than one pass holds. Each 64-row block is cut along k into segments of equal length;
// all row groups (at most 6 rows each, sizes balanced so that no group is a small leftover) run over a segment
// while it sits in L1, the first group having read it from memory or L2, and meanwhile the groups together
// prefetch the next segment (the rest of this block, or the next block of [n0, n1)) into L2, one pair row in
// `groups` each: a steady stream from memory instead of a burst during the first group's pass.
void blocked_many(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t kp, const uint16_t* w, int64_t n,
                  const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t pairs = kp / 2;  // a multiple of 16 (kp is a multiple of 32)
  const int64_t segments = (pairs + kSegmentPairs - 1) / kSegmentPairs;
  const int64_t segment = ((pairs + segments - 1) / segments + 15) / 16 * 16;
  const int64_t groups = (m + kGroupRows - 1) / kGroupRows;
  constexpr int64_t kPairElems = 2 * kBlockRows;  // bf16 per pair row of a block
  for (int64_t j = n0; j < n1; j += kBlockRows) {
    const uint16_t* block = w + j * kp;
    for (int64_t p0 = 0; p0 < pairs; p0 += segment) {
      const int64_t len = pairs - p0 < segment ? pairs - p0 : segment;
      const uint16_t* next = p0 + len < pairs      ? block + (p0 + len) * kPairElems
                             : j + kBlockRows < n1 ? block + kBlockRows * kp
                                                   : nullptr;
      int64_t i = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t rows = m * (g + 1) / groups - m * g / groups;  // 4 to 6 rows
        kBlockTile[rows](xb + i * ldxb + 2 * p0, ldxb, len, block + p0 * kPairElems, bias, y + i * n, n, j, n1, next,
                         static_cast<int>(groups), static_cast<int>(g), p0 > 0);
        i += rows;
      }
    }
  }
}

// ---- packed form ---------------------------------------------------------------------------------------
// From this many rows of X on, the packed form is used. Alone on one core the two forms tie at 32 rows
// (bench/micro/gemm_bench.cpp, strategy_bf16/*), but in whole decode steps on 2 threads (`minfer bench ops
// --profile`, Qwen2.5-0.5B shape) the packed form at 32-63 rows made the gate/up and lm_head GEMMs 1.5x
// slower than the dot form; from 64 rows on they are even, and the packed form wins in prefill.
constexpr int64_t kPackedMinRows = 64;
constexpr int kMr = 12;            // rows of X per register tile (24 accumulators)
constexpr int kNr = 32;            // weight rows per panel (two vectors of Y)
constexpr int64_t kKc = 512;       // k per panel: 32 x 512 bf16 = 32 KiB, within L1
constexpr int64_t kMc = kMr * 16;  // rows of X per block: 192 x 512 x 2 B = 192 KiB of L2

// Where the 32-column block starting at column `col` of weight row `row` is.
// load(row, col, mask): the (masked) 32 bf16 from column `col` of weight row `row`.
struct RowMajorRows {
  const uint16_t* w;
  int64_t k;
  __m512i load(int64_t row, int64_t col, __mmask32 mask) const {
    return _mm512_maskz_loadu_epi16(mask, w + row * k + col);
  }
};
// Int8 rows, converted to bf16 exactly (|q| <= 128 needs at most 8 significant bits, bf16 has 8).
struct Int8Rows {
  const int8_t* q;
  int64_t k;
  __m512i load(int64_t row, int64_t col, __mmask32 mask) const {
    const __m256i b = _mm256_maskz_loadu_epi8(mask, q + row * k + col);
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(b)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(b, 1)));
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  }
};

// Panel of `rows` (<= 32, zero beyond) weight rows from row0, kc columns from col0 (kc even after padding): the
// pair (W[r, 2q], W[r, 2q + 1]) goes to buf[q * 32 + r]; a column past kc reads as zero.
template <class Rows>
void pack_panel(const Rows& w, int64_t row0, int64_t col0, int64_t rows, int64_t kc, uint32_t* buf) {
  for (int64_t r0 = 0; r0 < kNr; r0 += 16) {
    const int64_t nr = rows - r0 < 0 ? 0 : (rows - r0 > 16 ? 16 : rows - r0);
    for (int64_t p = 0; p < kc; p += 32) {
      const int64_t np = kc - p < 32 ? kc - p : 32;  // bf16 columns in this block
      const __mmask32 mask = np >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << np) - 1);
      __m512 v[16];
      for (int64_t r = 0; r < 16; ++r) {
        v[r] = r < nr ? _mm512_castsi512_ps(w.load(row0 + r0 + r, col0 + p, mask)) : _mm512_setzero_ps();
      }
      transpose16(v);
      const int64_t pairs = (np + 1) / 2;
      for (int64_t c = 0; c < pairs; ++c) _mm512_store_ps(reinterpret_cast<float*>(buf + (p / 2 + c) * kNr + r0), v[c]);
    }
  }
}

// Y[0:MR, 0:32] (masked to the valid columns) = or += Xb[0:MR, pairs] * panel (+ bias when not accumulating).
template <int MR>
void micro_tile(const uint16_t* xb, int64_t ldxb, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
                __mmask16 m0, __mmask16 m1, const float* bias, bool accumulate) {
  __m512 c0[MR];
  __m512 c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  const uint32_t* x32 = reinterpret_cast<const uint32_t*>(xb);
  const int64_t ld32 = ldxb / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512i b0 = _mm512_load_si512(panel + q * kNr);
    const __m512i b1 = _mm512_load_si512(panel + q * kNr + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(x32[i * ld32 + q]));
      c0[i] = _mm512_dpbf16_ps(c0[i], as_bh(b0), as_bh(a));
      c1[i] = _mm512_dpbf16_ps(c1[i], as_bh(b1), as_bh(a));
    }
  }
  store_tile<MR>(c0, c1, y, ldy, m0, m1, bias, accumulate);
}

using MicroFn = void (*)(const uint16_t*, int64_t, const uint32_t*, int64_t, float*, int64_t, __mmask16, __mmask16,
                         const float*, bool);
constexpr MicroFn kMicro[kMr + 1] = {nullptr,        micro_tile<1>,  micro_tile<2>, micro_tile<3>, micro_tile<4>,
                                     micro_tile<5>,  micro_tile<6>,  micro_tile<7>, micro_tile<8>, micro_tile<9>,
                                     micro_tile<10>, micro_tile<11>, micro_tile<12>};

}  // namespace

void bf16_round_rows(const float* x, int64_t rows, int64_t k, uint16_t* xb, int64_t ldxb) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x + r * k;
    uint16_t* dst = xb + r * ldxb;
    for (int64_t p = 0; p < ldxb; p += 32) {
      const int64_t left = k - p;
      const __m512 lo = _mm512_maskz_loadu_ps(tail_mask(left), src + p);
      const __m512 hi = _mm512_maskz_loadu_ps(tail_mask(left - 16), src + p + 16);
      _mm512_storeu_si512(dst + p, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

void gemm_bf16_cols_dot(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                        const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (m) {
    case 1: return dot_rows<1, 8>(xb, ldxb, k, w, n, bias, y, n0, n1);
    case 2: return dot_rows<2, 8>(xb, ldxb, k, w, n, bias, y, n0, n1);
    case 3: return dot_rows<3, 4>(xb, ldxb, k, w, n, bias, y, n0, n1);
    case 4: return dot_rows<4, 4>(xb, ldxb, k, w, n, bias, y, n0, n1);
    default: return dot_many<4, 4>(xb, ldxb, m, k, w, n, bias, y, n0, n1);
  }
}

namespace {

// No per-row scale: the sums are the result.
struct NoFinish {
  void operator()(float*, int64_t, int64_t, int64_t, int64_t) const {}
};

// finish(y, ldy, rows, col0, cols) runs on each finished block of y (all of k summed) while it is in cache.
template <class Rows, class Finish = NoFinish>
void packed_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const Rows& w, int64_t n, const float* bias,
                 float* y, int64_t n0, int64_t n1, const Finish& finish = {}) {
  alignas(64) uint32_t panel[kKc / 2 * kNr];
  for (int64_t mb = 0; mb < m; mb += kMc) {
    const int64_t mc = m - mb < kMc ? m - mb : kMc;
    for (int64_t kb = 0; kb < k; kb += kKc) {
      const int64_t kc = k - kb < kKc ? k - kb : kKc;
      const int64_t pairs = (kc + 1) / 2;
      for (int64_t nb = n0; nb < n1; nb += kNr) {
        const int64_t nr = n1 - nb < kNr ? n1 - nb : kNr;
        pack_panel(w, nb, kb, nr, kc, panel);
        const __mmask16 m0 = tail_mask(nr);
        const __mmask16 m1 = tail_mask(nr - 16);
        const float* bn = bias ? bias + nb : nullptr;
        for (int64_t i = 0; i < mc; i += kMr) {
          const int64_t mr = mc - i < kMr ? mc - i : kMr;
          kMicro[mr](xb + (mb + i) * ldxb + kb, ldxb, panel, pairs, y + (mb + i) * n + nb, n, m0, m1, bn, kb > 0);
        }
        if (kb + kc == k) finish(y + mb * n + nb, n, mc, nb, nr);
      }
    }
  }
}

}  // namespace

void gemm_bf16_cols_packed(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                           const float* bias, float* y, int64_t n0, int64_t n1) {
  packed_cols(xb, ldxb, m, k, RowMajorRows{w, k}, n, bias, y, n0, n1);
}

void gemm_bf16_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                    const float* bias, float* y, int64_t n0, int64_t n1) {
  if (m < kPackedMinRows) {
    gemm_bf16_cols_dot(xb, ldxb, m, k, w, n, bias, y, n0, n1);
  } else {
    gemm_bf16_cols_packed(xb, ldxb, m, k, w, n, bias, y, n0, n1);
  }
}

void gemm_bf16_blocked_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                            const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t kp = bf16_row_stride(k);
  if (m <= 0) return;
  if (m > kOnePassRows) return blocked_many(xb, ldxb, m, kp, w, n, bias, y, n0, n1);
  for (int64_t j = n0; j < n1; j += kBlockRows) {
    kBlockTile[m](xb, ldxb, kp / 2, w + j * kp, bias, y, n, j, n1, nullptr, 1, 0, false);
  }
}

void gemm_w8a16_bf16_packed_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const int8_t* q,
                                 const float* scales, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1) {
  // Sums of bf16(x) * q, then y = scale[col] * sum + bias[col]: the scale is exact outside the sum.
  const auto finish = [scales, bias](float* yb, int64_t ldy, int64_t rows, int64_t col0, int64_t cols) {
    const __mmask16 m0 = tail_mask(cols), m1 = tail_mask(cols - 16);
    const __m512 s0 = _mm512_maskz_loadu_ps(m0, scales + col0), s1 = _mm512_maskz_loadu_ps(m1, scales + col0 + 16);
    const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias + col0) : _mm512_setzero_ps();
    const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + col0 + 16) : _mm512_setzero_ps();
    for (int64_t i = 0; i < rows; ++i) {
      float* r = yb + i * ldy;
      _mm512_mask_storeu_ps(r, m0, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, r), s0, b0));
      _mm512_mask_storeu_ps(r + 16, m1, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, r + 16), s1, b1));
    }
  };
  packed_cols(xb, ldxb, m, k, Int8Rows{q, k}, n, nullptr, y, n0, n1, finish);
}

}  // namespace minfer::kernels::avx512
