// Declarations of the AVX2 and AVX-512 quantized GEMM leaves (contracts in kernels/quant_leaf.h). Declarations
// only: safe to include from code built for any instruction set.
#pragma once

#include <cstdint>

#include "kernels/quant_leaf.h"

#define MINFER_DECLARE_X86_QUANT_LEAVES                                                                                \
  void w8a16_cols(const float* x, int64_t m, int64_t k, const W8A16View& w, int64_t n, const float* bias, float* y,    \
                  int64_t n0, int64_t n1, float* scratch);                                                             \
  void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t k4, int64_t group_size, int64_t groups,          \
                     uint8_t* q, float* scale, int32_t* sums);                                                         \
  void w8a8_cols(const QuantizedRows& a, int64_t m, const W8A8View& w, int64_t n, const float* bias, float* y,         \
                 int64_t n0, int64_t n1);                                                                              \
  void quantize_int16(const float* x, int64_t rows, int64_t k, int16_t* q, float* scale);                              \
  void q8_0_tiles_cols(const Int16Blocks& x, int64_t m, int64_t k, const uint8_t* tiles, int64_t n, const float* bias, \
                       float* y, int64_t n0, int64_t n1);                                                              \
  void quantize_q8(const float* x, int64_t rows, int64_t k, int8_t* q, float* d16, float* s16, int32_t* sum16);        \
  void gguf_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* w, int64_t n, const float* bias,  \
                 float* y, int64_t n0, int64_t n1);

namespace minfer::kernels::avx2 {
MINFER_DECLARE_X86_QUANT_LEAVES
}  // namespace minfer::kernels::avx2

namespace minfer::kernels::avx512 {
MINFER_DECLARE_X86_QUANT_LEAVES
void gguf_tiles_cols(const Q8Blocks& x, int64_t m, int64_t k, DType type, const uint8_t* tiles, int64_t n,
                     const float* bias, float* y, int64_t n0, int64_t n1);
}  // namespace minfer::kernels::avx512

#undef MINFER_DECLARE_X86_QUANT_LEAVES
