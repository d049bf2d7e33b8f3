// f16 / bf16 <-> f32 conversions: exhaustive round trips, subnormals, NaN/inf, round to nearest even, and
// f32 -> f16 against the compiler's _Float16 conversion on random bit patterns.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "base/half.h"

namespace minfer {
namespace {

bool is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = f16_to_f32(h);
    if (is_f16_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(is_f16_nan(f32_to_f16(f))) << std::hex << i;
      EXPECT_EQ(f32_to_f16(f) & 0x8000u, h & 0x8000u) << std::hex << i;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << std::hex << i;
    }
  }
}

TEST(Half, Bf16RoundTripsEveryValue) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bf16_to_f32(h);
    if (is_bf16_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(is_bf16_nan(f32_to_bf16(f))) << std::hex << i;
    } else {
      ASSERT_EQ(f32_to_bf16(f), h) << std::hex << i;
    }
  }
}

TEST(Half, F16KnownEncodings) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);                          // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);                          // tie -> even (up)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above tie
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie at the top rounds to inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  // Subnormal results: units of 2^-24.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half a unit: tie -> 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie -> 2
  EXPECT_EQ(f32_to_f16(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 units: tie -> 2
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into the smallest normal
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
}

TEST(Half, F16MatchesCompilerConversion) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t bits = rng();
    // Concentrate half of the samples on the f16 range (exponents 100..143), where rounding matters.
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + bits % 44u) << 23);
    const float f = std::bit_cast<float>(bits);
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_f16_nan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(got, want) << std::hex << bits;
    }
  }
}

// The bf16 nearest to f by exact arithmetic in double (ties to even), treating the value past the largest
// finite as 2^128 so that overflow rounds as IEEE says.
uint16_t bf16_oracle(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t lo = mag & 0xffff0000u;
  const uint32_t hi = lo + 0x10000u;
  auto value = [](uint32_t b) { return b >= 0x7f800000u ? std::ldexp(1.0, 128) : double(std::bit_cast<float>(b)); };
  const double x = double(std::bit_cast<float>(mag));
  const double dlo = x - value(lo);
  const double dhi = value(hi) - x;
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (((lo >> 16) & 1u) ? hi : lo);
  return static_cast<uint16_t>((sign | pick) >> 16);
}

TEST(Half, Bf16MatchesExactRounding) {
  std::mt19937 rng(43);
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact ties
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_bf16_nan(f32_to_bf16(f))) << std::hex << bits;
    } else {
      ASSERT_EQ(f32_to_bf16(f), bf16_oracle(f)) << std::hex << bits;
    }
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::ldexp(1.0f, -140)), 0x0000 | (std::bit_cast<uint32_t>(std::ldexp(1.0f, -140)) >> 16));
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // signalling NaN -> quiet, still NaN
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

}  // namespace
}  // namespace minfer
