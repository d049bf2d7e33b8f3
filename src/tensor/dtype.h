// Element types of tensors. Q8_0 and the other GGUF block types (ggml's layouts, tensor/gguf_blocks.h) hold their
// elements in blocks of 32 or 256 along a row, each block a fixed number of bytes with its own scales.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace minfer {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I8,
  I32,
  I64,
  Q8_0,
  // GGUF block types beside Q8_0 (ggml's names and layouts).
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_NL,
  IQ4_XS,
  MXFP4,  // OCP microscaling FP4 (gpt-oss's experts): an E8M0 scale byte, then 32 E2M1 nibbles
};

// Elements and bytes of one block of a GGUF block type ({1, element size} for the others).
struct BlockShape {
  int64_t elements = 1;
  int64_t bytes = 0;
};
BlockShape dtype_block(DType dtype);
// True for Q8_0 and the other GGUF block types.
bool is_block_type(DType dtype);

// Bytes of `n` consecutive elements (for a block type, n must be a multiple of its block's elements).
size_t dtype_bytes(DType dtype, size_t n);
std::string_view dtype_name(DType dtype);
// Parses "f32", "f16", "bf16", the GGUF block type names ("q4_k", "Q4_K") and the safetensors spellings F32, F16,
// BF16, I8, I32, I64.
bool parse_dtype(std::string_view name, DType* out);

}  // namespace minfer
