// Rounding f32 rows into GGUF block types, as llama.cpp's reference quantizers do (ggml-quants.c,
// quantize_row_*_ref: what `llama-quantize` writes when no importance matrix is given), so that a file minfer
// writes holds what llama.cpp's own tool would have written from the same weights.
//   Q8_0, Q4_0, Q5_0   one f16 scale per 32: max-magnitude scaling
//   Q4_1, Q5_1         f16 scale and minimum per 32: min/max scaling
//   Q4_K, Q5_K         256-element super-blocks of eight 32s, 6-bit scales and mins found by a weighted
//                      least-squares search (make_qkx2_quants), then the f16 super-scales
//   Q6_K               sixteen 16s with int8 scales from an x^2-weighted search (make_qx_quants)
// The search itself is the file format's contract with its readers only through the bytes it produces, so minfer
// writes it out here rather than linking llama.cpp (the oracle test compares the bytes with llama.cpp's).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace minfer {

// True for the types quantize_gguf_row writes: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, and F32/F16/BF16.
bool gguf_quantizer_supports(DType type);

// Rounds n values (a multiple of the type's block) into dtype_bytes(type, n) bytes at out.
void quantize_gguf_row(DType type, const float* x, int64_t n, uint8_t* out);

}  // namespace minfer
