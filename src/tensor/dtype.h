// Element types of tensors. Q8_0 is GGUF's block format (32 int8 + one f16 scale per block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace minfer {

enum class DType : uint8_t { F32, F16, BF16, I8, I32, I64, Q8_0 };

// Bytes of `n` consecutive elements (for Q8_0, n must be a multiple of 32).
size_t dtype_bytes(DType dtype, size_t n);
std::string_view dtype_name(DType dtype);
// Parses "f32", "f16", "bf16" (and the safetensors spellings F32, F16, BF16, I8, I32, I64).
bool parse_dtype(std::string_view name, DType* out);

}  // namespace minfer
