#include "util/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace llm {
namespace {

bool SameF16(uint16_t a, uint16_t b) {
  bool a_nan = (a & 0x7c00) == 0x7c00 && (a & 0x3ff);
  bool b_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
  return a_nan ? b_nan : a == b;
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);  // below the midpoint to infinity
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // the midpoint rounds to even: infinity
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);           // half of min subnormal: even
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);           // 1.5 ulp: to even (2)
  EXPECT_EQ(F32ToF16(1e-10f), 0x0000);
  uint16_t nan = F32ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
}

TEST(Fp16, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = F16ToF32Portable(static_cast<uint16_t>(h));
    EXPECT_TRUE(SameF16(F32ToF16Portable(f), static_cast<uint16_t>(h))) << std::hex << h;
    float g = F16ToF32(static_cast<uint16_t>(h));
    EXPECT_TRUE(FloatBits(f) == FloatBits(g) || (std::isnan(f) && std::isnan(g))) << std::hex << h;
  }
}

// Each value halfway between two adjacent halves must go to the even one;
// just above/below it to the nearer one.
TEST(Fp16, MidpointsRoundToEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    for (uint32_t s : {0u, 0x8000u}) {
      uint16_t lo = static_cast<uint16_t>(h | s), hi = static_cast<uint16_t>((h + 1) | s);
      double a = F16ToF32Portable(lo), b = F16ToF32Portable(hi);
      float mid = static_cast<float>((a + b) / 2);  // exact in F32
      uint16_t even = (h & 1) ? hi : lo;
      ASSERT_EQ(F32ToF16Portable(mid), even) << std::hex << h;
      ASSERT_EQ(F32ToF16(mid), even) << std::hex << h;
      ASSERT_EQ(F32ToF16Portable(std::nextafter(mid, 0.0f)), lo) << std::hex << h;
      ASSERT_EQ(F32ToF16Portable(std::nextafter(mid, s ? -1e9f : 1e9f)), hi) << std::hex << h;
    }
  }
}

TEST(Fp16, RandomFloatsAreNearest) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float f = BitsFloat(rng());
    if (std::isnan(f)) continue;
    uint16_t h = F32ToF16Portable(f);
    EXPECT_EQ(h, F32ToF16(f));
    if (std::fabs(f) >= 65520.0f) {
      EXPECT_EQ(h & 0x7fff, 0x7c00);
      continue;
    }
    // No other half is nearer than h.
    double err = std::fabs(static_cast<double>(F16ToF32(h)) - f);
    for (int d : {-1, 1}) {
      uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7fff) >= 0x7c00) continue;
      if ((h & 0x7fff) == 0 && d < 0) continue;
      EXPECT_LE(err, std::fabs(static_cast<double>(F16ToF32(n)) - f)) << f;
    }
  }
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(BitsFloat(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(F32ToBf16(BitsFloat(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(F32ToBf16(BitsFloat(0x3f808001)), 0x3f81);
  EXPECT_EQ(F32ToBf16(BitsFloat(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to inf
  uint16_t nan = F32ToBf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(Bf16ToF32(nan)));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(BitsFloat(0x7f800001)))));  // sNaN stays NaN
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(F32ToBf16(f), b);
    }
  }
}

}  // namespace
}  // namespace llm
