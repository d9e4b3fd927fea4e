// IEEE half (F16) and bfloat16 (BF16) conversions, round to nearest even.
//
// The *Portable versions are plain integer code and are always defined (the
// tests check them against the hardware path). F16ToF32/F32ToF16 use the F16C
// instructions when the build enables them (-mf16c or -march=native).
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __F16C__
#include <immintrin.h>
#endif

namespace llm {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// F16 layout: sign(1) exponent(5, bias 15) mantissa(10).
inline float F16ToF32Portable(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in F32
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return BitsFloat(FloatBits(v) | sign);
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return BitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

inline uint16_t F32ToF16Portable(float f) {
  uint32_t bits = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep it a (quiet) NaN with the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a subnormal in
    // units of 2^-24. Adding 0.5f (whose ulp is 2^-24) makes the FPU round
    // the value to that grid, nearest-even; the low bits are the result.
    float r = BitsFloat(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatBits(r) - 0x3f000000u));
  }
  // Normal: rebias the exponent (-112 << 23) and round the 13 dropped
  // mantissa bits to nearest even; a carry into the exponent is correct.
  uint32_t odd = (abs >> 13) & 1;
  abs += 0xc8000fffu + odd;
  return static_cast<uint16_t>(sign | (abs >> 13));
}

inline float F16ToF32(uint16_t h) {
#ifdef __F16C__
  return _cvtsh_ss(h);
#else
  return F16ToF32Portable(h);
#endif
}

inline uint16_t F32ToF16(float f) {
#ifdef __F16C__
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  return F32ToF16Portable(f);
#endif
}

// BF16 is the top half of an F32.
inline float Bf16ToF32(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t F32ToBf16(float f) {
  uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays a quiet NaN
  }
  bits += 0x7fffu + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace llm
