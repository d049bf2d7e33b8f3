// Scalar element access to f32/f16/bf16 weights for the reference kernels.
#pragma once

#include <cstdint>

#include "base/error.h"
#include "base/half.h"
#include "tensor/dtype.h"

namespace minfer::kernels::ref {

struct F32Weights {
  const float* p;
  float operator[](int64_t i) const { return p[i]; }
};
struct F16Weights {
  const uint16_t* p;
  float operator[](int64_t i) const { return f16_to_f32(p[i]); }
};
struct Bf16Weights {
  const uint16_t* p;
  float operator[](int64_t i) const { return bf16_to_f32(p[i]); }
};

// Calls fn(accessor) with the accessor type for `dtype`, so loops are compiled once per weight type.
template <typename Fn>
void with_weights(const void* data, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: fn(F32Weights{static_cast<const float*>(data)}); return;
    case DType::F16: fn(F16Weights{static_cast<const uint16_t*>(data)}); return;
    case DType::BF16: fn(Bf16Weights{static_cast<const uint16_t*>(data)}); return;
    default: fail("kernels: weights of type {} are not supported here (need f32, f16 or bf16)", dtype_name(dtype));
  }
}

}  // namespace minfer::kernels::ref
