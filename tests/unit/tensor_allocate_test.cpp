#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "tensor/tensor.h"

namespace minfer {
namespace {

bool all_zero(const Tensor& t) {
  const auto* p = t.as<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Small buffers: 64-byte aligned and zeroed. From 2 MiB on (weights re-laid out at load): on a 2 MiB boundary,
// zeroed without a memset (fresh pages), writable to the last byte, and given back when the last copy goes.
TEST(TensorAllocate, ZeroedAndAlignedAtEverySize) {
  for (const int64_t elems : {int64_t{2}, int64_t{1000}, int64_t{1} << 19, (int64_t{1} << 19) + 3, int64_t{3} << 20}) {
    Tensor t = Tensor::allocate(DType::F32, {elems});
    ASSERT_EQ(t.nbytes(), static_cast<size_t>(elems) * 4);
    const auto addr = reinterpret_cast<uintptr_t>(t.data);
    EXPECT_EQ(addr % (t.nbytes() >= (size_t{2} << 20) ? size_t{2} << 20 : 64), 0u) << elems;
    EXPECT_TRUE(all_zero(t)) << elems;
    float* p = t.mutable_as<float>();
    p[0] = 1.0f;
    p[elems - 1] = 2.0f;
    const Tensor copy = t;  // shares the buffer
    t = Tensor{};
    EXPECT_EQ(copy.as<float>()[0], 1.0f);
    EXPECT_EQ(copy.as<float>()[elems - 1], 2.0f);
  }
}

}  // namespace
}  // namespace minfer
