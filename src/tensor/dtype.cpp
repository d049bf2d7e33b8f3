#include "tensor/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace minfer {

size_t dtype_bytes(DType dtype, size_t n) {
  switch (dtype) {
    case DType::F32: return 4 * n;
    case DType::F16: return 2 * n;
    case DType::BF16: return 2 * n;
    case DType::I8: return n;
    case DType::I32: return 4 * n;
    case DType::I64: return 8 * n;
    case DType::Q8_0: return (n / 32) * 34;
  }
  return 0;
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
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::I32, DType::I64, DType::Q8_0}) {
    if (lower == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

}  // namespace minfer
