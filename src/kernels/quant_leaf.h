// Leaf kernels of the quantized GEMM (see kernels/leaf.h for the split between leaves and drivers): each
// instruction set provides a QuantLeaves table; the driver (gemm_quant_driver.cpp) checks operands, quantizes
// activations and splits output columns across the pool.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/leaf.h"
#include "tensor/dtype.h"

namespace minfer::kernels {

// A W8A16 weight [n, k] as the leaves read it: int8 rows with f32 scales per group, or GGUF Q8_0 blocks.
struct W8A16View {
  bool q8_0 = false;              // true: `data` is Q8_0 blocks (34 bytes: f16 scale + 32 int8), groups of 32
  const void* data = nullptr;     // int8 [n, k] row-major, or the Q8_0 blocks
  const float* scales = nullptr;  // [n, groups] (row layout only)
  const float* zeros = nullptr;   // [n, groups] or null (symmetric)
  int64_t group_size = 0;         // == k for one scale per row
  int64_t groups = 1;
};

// Columns [n0, n1) of y[m, n] = x[m, k] * dequant(w)^T (+ bias[n]). `scratch` is w8a16_scratch_floats(k)
// floats owned by the calling thread (null when m < w8a16_scratch_min_rows).
using W8A16ColsFn = void (*)(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias,
                             float* y, int64_t n0, int64_t n1, float* scratch);

// A W8A8 weight in the kVnniPanels layout (tensor/quant_params.h).
struct W8A8View {
  const int8_t* panels = nullptr;  // [ceil(n/16)][k4/4][16][4]
  int64_t k4 = 0;                  // k rounded up to a multiple of 4
  int64_t group_size = 0;
  int64_t groups = 1;
  const float* scales = nullptr;   // [ceil(n/16)][groups][16]
  const int32_t* qsum = nullptr;   // [ceil(n/16)][groups][16]
  const int32_t* zeros = nullptr;  // [ceil(n/16)][groups][16] or null (symmetric)
};

// Activations quantized per row: x[i, :] ~ scale[i] * q[i, :], q in [-127, 127], stored in the encoding of the
// leaf set that produced them (signed int8, or int8 + 128 as unsigned bytes for VNNI); columns k..k4 encode 0.
// sums[i * groups + g] = sum of q over group g (only when the weight is asymmetric; else null).
struct QuantizedRows {
  const uint8_t* q = nullptr;  // [m, k4]
  const float* scale = nullptr;
  const int32_t* sums = nullptr;
};

using QuantizeRowsFn = void (*)(const float* x, int64_t rows, int64_t k, int64_t k4, int64_t group_size, int64_t groups,
                                uint8_t* q, float* scale, int32_t* sums);
// Columns [n0, n1) of y (n0 a multiple of 16): y[i, j] = scale[i] * sum_g wscale[j, g] * int32 dot of group g
// (+ bias[j]), with the per-group sums accumulated in order by fused multiply-adds: every variant gives the
// same bits as the reference.
using W8A8ColsFn = void (*)(const QuantizedRows& a, int64_t m, const W8A8View& w, int64_t n, const float* bias,
                            float* y, int64_t n0, int64_t n1);

// Columns [n0, n1) of y = scales[j] * (xb . q_j) + bias[j] for int8 rows q [n, k] with one scale per row
// (symmetric), xb the activations rounded to bf16 ([m, ldxb], see Bf16RoundRowsFn).
using W8A16Bf16ColsFn = void (*)(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const int8_t* q,
                                 const float* scales, int64_t n, const float* bias, float* y, int64_t n0, int64_t n1);

// Activations for Q8_0 tiles: each row of x [m, k] in blocks of 32, scale = max|x| / 32767 per block and
// q = round(x / scale) (0 for an all-zero block). Error at most half a step, 2^-16 of the block's largest value:
// finer than the bf16 rounding of x the bf16 GEMM makes, and 16-bit like the A16 of W8A16.
struct Int16Blocks {
  const int16_t* q = nullptr;    // [m, k]
  const float* scale = nullptr;  // [m, k / 32]
};
using QuantizeInt16Fn = void (*)(const float* x, int64_t rows, int64_t k, int16_t* q, float* scale);
// Columns [n0, n1) of y[m, n] = x * dequant(w)^T (+ bias) for w in TensorLayout::kQ8_0Tiles16 (tensor/q8_0_tiles.h;
// n0 a multiple of 16): per block the exact int32 sum of q_x * q_w, then y += float(sum) * (scale_w * scale_x) as
// one fused multiply-add in block order, bias added last: every variant gives the reference's bits.
using Q80TilesColsFn = void (*)(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n,
                                const float* bias, float* y, int64_t n0, int64_t n1);

// Activations for the GGUF block types (kernels/gguf_blocks.h): each row of x [m, k] in blocks of 32, scale
// d = max|x| / 127 and q = round(x / d) in [-127, 127], as llama.cpp's Q8_0 activations. Per 16 elements the leaves
// read the block's scale (d16), d times the sum of the 16 q (s16, for the offsets of the asymmetric types) and that
// sum itself (sum16, exact, for the zero points of the tiled layout).
struct Q8Blocks {
  const int8_t* q = nullptr;       // [m, k]
  const float* d16 = nullptr;      // [m, k / 16]
  const float* s16 = nullptr;      // [m, k / 16]
  const int32_t* sum16 = nullptr;  // [m, k / 16]
};
using QuantizeQ8Fn = void (*)(const float* x, int64_t rows, int64_t k, int8_t* q, float* d16, float* s16,
                              int32_t* sum16);
// Columns [n0, n1) of y[m, n] = x * dequant(w)^T (+ bias) for w [n, k] rows of GGUF blocks of `type` (any block type
// but Q8_0, which has its own tiles): each weight row is decoded into the form of gguf_blocks.h (int8 and per-16
// scales, in L1, never f32) and multiplied with every row of x as exact int32 sums per 16 elements, scaled in f32.
using GgufColsFn = void (*)(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* w, int64_t n,
                            const float* bias, float* y, int64_t n0, int64_t n1);
// The same for a 4-bit type in TensorLayout::kGgufTiles16 (tensor/gguf_tiles.h; n0 a multiple of 16): per block of 32
// the exact int32 sum of (u - z) x for 16 rows at once, scaled in f32.
using GgufTilesColsFn = void (*)(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* tiles, int64_t n,
                                 const float* bias, float* y, int64_t n0, int64_t n1);

struct QuantLeaves {
  const char* name;
  W8A16ColsFn w8a16_cols;
  int64_t w8a16_scratch_min_rows;  // from this many rows of x the leaf wants scratch (INT64_MAX: never)
  QuantizeRowsFn quantize_rows;
  W8A8ColsFn w8a8_cols;
  // W8A16 prefill on CPUs with bf16 dot products (null elsewhere): from w8a16_bf16_min_rows rows of x, per-channel
  // symmetric weights take the packed bf16 GEMM (x rounded to bf16 once, as for bf16 weights; int8 -> bf16 exact).
  Bf16RoundRowsFn bf16_round_rows = nullptr;
  W8A16Bf16ColsFn w8a16_bf16_cols = nullptr;
  int64_t w8a16_bf16_min_rows = INT64_MAX;
  QuantizeInt16Fn quantize_int16 = nullptr;
  Q80TilesColsFn q8_0_tiles_cols = nullptr;
  QuantizeQ8Fn quantize_q8 = nullptr;
  GgufColsFn gguf_cols = nullptr;
  GgufTilesColsFn gguf_tiles_cols = nullptr;  // null: the tiled layout is not made for this instruction set
};

// Floats of W8A16 scratch per thread: a slab of 32 dequantized weight rows.
inline constexpr int64_t kW8A16SlabRows = 32;
constexpr size_t w8a16_scratch_floats(int64_t k) { return static_cast<size_t>(kW8A16SlabRows * k + 16); }

extern const QuantLeaves kRefQuantLeaves;
extern const QuantLeaves kAvx2QuantLeaves;
extern const QuantLeaves kAvx512QuantLeaves;  // W8A8 needs AVX-512 VNNI (see quant_leaves())

// The table for an instruction set: AVX-512 without VNNI uses the AVX2 W8A8 leaves.
const QuantLeaves& quant_leaves(Isa isa);

// Driver (baseline code) over one leaf set.
void run_gemm_quantized(const QuantLeaves& leaves, const float* x, int64_t m, int64_t k, const Tensor& w,
                        const float* bias, float* y, ThreadPool& pool, const GemmEpilogue* epilogue = nullptr);

}  // namespace minfer::kernels
