// Int8 weights: quantizing a float matrix, the layouts the kernels read (tensor/quant_params.h), and the
// quantized GEMM entry point. W8A16 keeps activations f32 and dequantizes int8 (or GGUF Q8_0) weights in
// registers inside the GEMM; W8A8 quantizes each activation row to int8 on the fly (one scale per token) and
// multiplies int8 x int8 into int32 (AVX-512 VNNI vpdpbusd where the CPU has it), rescaling in the epilogue.
// GGUF Q8_0 weights re-laid in 16-row tiles (kQ8_0Tiles16) take X in int16 blocks of 32 instead and multiply
// int16 x int8 exactly per block (vpdpwssd), a 16-bit activation like bf16 but finer. Where the GGUF tiles are
// made (gguf_tiles_preferred) Q8_0 goes into them instead, with int8 activations (vpdpbusd, twice the rate).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/gemm_epilogue.h"
#include "tensor/quant_params.h"
#include "tensor/tensor.h"

namespace minfer::kernels {

struct QuantScheme {
  int64_t group_size = 0;  // 0 = one scale per output channel; else 32, 64 or 128 (must be a multiple of 4)
  bool symmetric = true;
  bool int8_activations = false;  // W8A8 (packed for the int8 x int8 kernels)
};

// Quantizes a float matrix [N, K] (f32/f16/bf16) row by row: symmetric scale = max|w| / 127 per group;
// asymmetric scale = (max - min) / 255 with an integer zero point. `column_factors` (optional, [K]) multiplies
// column k and `row_factors` (optional, [N]) row n before quantization (SmoothQuant's folded factors, see
// model/quant/smoothing.h). Returns an I8 tensor in the kVnniPanels layout when
// scheme.int8_activations, else kRows. Throws Error on a bad scheme or a non-matrix.
Tensor quantize_matrix(const Tensor& w, const QuantScheme& scheme, const float* column_factors = nullptr,
                       const float* row_factors = nullptr);

// Builds an int8 tensor in the row layout from its parts (a quantized checkpoint): q [N, K] int8, scales
// [N, groups] (f32/f16/bf16), zeros [N, groups] (i8, or an empty tensor when symmetric). Checks the shapes.
Tensor make_quantized(const Tensor& q, const Tensor& scales, const Tensor& zeros, int64_t group_size);

// A GGUF Q8_0 matrix as an int8 row-layout tensor with group 32 scales (copies the int8 values, widens the f16
// scales; no f32 weights), e.g. to pack it for W8A8.
Tensor q8_0_to_rows(const Tensor& w);

// A copy of a row-major GGUF Q8_0 matrix in TensorLayout::kQ8_0Tiles16 (tensor/q8_0_tiles.h: the same scales and
// int8, re-ordered, rows padded to 16), which the quantized GEMM reads with int16 activations. Throws Error for
// anything else. The tiles are split across `pool` when given (load time).
Tensor to_q8_0_tiles(const Tensor& w, ThreadPool* pool = nullptr);

// True when the quantized GEMM of the kernels in use reads the 4-bit GGUF types in 16-row tiles
// (TensorLayout::kGgufTiles16, made by kernels::to_gguf_tiles in kernels/gguf_tiles.h at load).
bool gguf_tiles_preferred();

// Re-lays an int8 tensor for the given activation mode: kRows <-> kVnniPanels (no requantization).
Tensor relayout(const Tensor& w, bool int8_activations);

// True for tensors the quantized GEMM takes: I8 with quant params, or Q8_0.
bool is_quantized(const Tensor& w);

// Rows [row0, row0 + rows) of a quantized matrix (any layout, or Q8_0) dequantized to f32 [rows, K].
void dequantize_rows(const Tensor& w, int64_t row0, int64_t rows, float* out);

// Bytes the weight occupies in memory: payload (with any padding) plus scales, zero points and sums.
size_t resident_bytes(const Tensor& w);

// Y[m, n] = X[m, k] * dequant(W)^T + bias, for any quantized W (see is_quantized), on the widest kernels the CPU
// runs. The GEMM drivers (run_gemm) forward here when the weight is quantized, so callers need not check; the
// epilogue, when given, is applied per column tile as run_gemm does (kernels/gemm_epilogue.h).
void gemm_quantized(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
                    ThreadPool& pool, const GemmEpilogue* epilogue = nullptr);

// out[t, :] = dequantized row ids[t] of a quantized table [vocab, dim] (ids already checked by the caller).
void embedding_quantized(const int32_t* ids, int64_t n, const Tensor& table, float* out);

}  // namespace minfer::kernels
