// Shared helpers of the kernel tests: the variants this CPU can run, random inputs, tolerant comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "tensor/tensor.h"

namespace minfer::kernels::testing {

// Every table this CPU supports (scalar included: it must agree with the oracle through the drivers too).
inline std::vector<const KernelTable*> available_tables() {
  std::vector<const KernelTable*> out;
  for (Isa isa : kAllIsas) {
    if (const KernelTable* t = kernel_table(isa)) out.push_back(t);
  }
  return out;
}

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A tensor of `dtype` holding `values` rounded to that type.
inline Tensor make_tensor(const std::vector<float>& values, std::vector<int64_t> shape, DType dtype) {
  Tensor f = Tensor::allocate(DType::F32, std::move(shape));
  std::memcpy(f.mutable_as<float>(), values.data(), values.size() * sizeof(float));
  return dtype == DType::F32 ? f : convert(f, dtype);
}

// |got - want| <= atol + rtol * scale[i] (scale defaults to |want|), reporting the first few misses.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol, float atol,
                         const std::string& what, const std::vector<float>* scale = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float s = scale ? (*scale)[i] : std::fabs(want[i]);
    const bool ok = std::fabs(got[i] - want[i]) <= atol + rtol * s || (std::isnan(got[i]) && std::isnan(want[i])) ||
                    (std::isinf(want[i]) && got[i] == want[i]);
    if (!ok && ++misses <= 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i] << " (scale " << s << ")";
    }
  }
  EXPECT_EQ(misses, 0) << what;
}

}  // namespace minfer::kernels::testing
