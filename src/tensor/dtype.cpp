#include "tensor/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace minfer {

BlockShape dtype_block(DType dtype) {
  switch (dtype) {
    case DType::F32: return {1, 4};
    case DType::F16: return {1, 2};
    case DType::BF16: return {1, 2};
    case DType::I8: return {1, 1};
    case DType::I32: return {1, 4};
    case DType::I64: return {1, 8};
    case DType::Q8_0: return {32, 34};
    case DType::Q4_0: return {32, 18};
    case DType::Q4_1: return {32, 20};
    case DType::Q5_0: return {32, 22};
    case DType::Q5_1: return {32, 24};
    case DType::Q2_K: return {256, 84};
    case DType::Q3_K: return {256, 110};
    case DType::Q4_K: return {256, 144};
    case DType::Q5_K: return {256, 176};
    case DType::Q6_K: return {256, 210};
    case DType::IQ4_NL: return {32, 18};
    case DType::IQ4_XS: return {256, 136};
    case DType::MXFP4: return {32, 17};
  }
  return {1, 0};
}

bool is_block_type(DType dtype) { return dtype_block(dtype).elements > 1; }

size_t dtype_bytes(DType dtype, size_t n) {
  const BlockShape b = dtype_block(dtype);
  return n / static_cast<size_t>(b.elements) * static_cast<size_t>(b.bytes);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q2_K: return "q2_k";
    case DType::Q3_K: return "q3_k";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
    case DType::IQ4_NL: return "iq4_nl";
    case DType::IQ4_XS: return "iq4_xs";
    case DType::MXFP4: return "mxfp4";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int d = 0; d <= static_cast<int>(DType::MXFP4); ++d) {
    if (lower == dtype_name(static_cast<DType>(d))) {
      *out = static_cast<DType>(d);
      return true;
    }
  }
  return false;
}

}  // namespace minfer
