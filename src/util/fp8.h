// OCP FP8 E4M3 (the "E4M3FN" of the OCP 8-bit floating point specification,
// CUDA's __nv_fp8_e4m3): sign(1) exponent(4, bias 7) mantissa(3), no
// infinities, S.1111.111 the only NaNs, largest finite value 448
// (S.1111.110), smallest subnormal 2^-9. The KV cache's FP8 blocks
// (backend/kv_wire.h) hold these bytes; the CUDA kernels have their own
// device twins (kernels/kv_elem.cuh), checked against these and against an
// independent table (tests/test_fp8.cpp, tests/data/fp8_e4m3_vectors.inc).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace llm {

inline constexpr float kE4M3Max = 448.0f;
inline constexpr uint8_t kE4M3MaxCode = 0x7e;  // +448; the sign bit makes -448

// The value of an E4M3 byte (NaN for 0x7f / 0xff).
inline float E4M3ToF32(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = std::nanf("");
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m * 2^-9
  else v = std::ldexp(static_cast<float>(8 + m), e - 10);      // (1 + m/8) * 2^(e-7)
  return (b & 0x80) != 0 ? -v : v;
}

// f rounded to E4M3, nearest even, saturating: |f| >= 448 (infinities too)
// becomes +-448 (the OCP "saturating" conversion; never the NaN code);
// NaN becomes +0, as the KV cache's quantizers store NaN.
inline uint8_t F32ToE4M3(float f) {
  if (f != f) return 0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | kE4M3MaxCode);  // >= 448
  if (a < 0x3c800000u) {  // below 2^-6, the smallest normal: multiples of 2^-9
    float af;
    std::memcpy(&af, &a, 4);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(std::nearbyint(af * 512.0f)));  // 0 .. 8 (8: 2^-6)
  }
  // normal: round the 23-bit mantissa to 3 bits, nearest even (a carry
  // moves to the exponent; below 448 the result is at most 448), then
  // rebase the exponent from 127 to 7
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  return static_cast<uint8_t>(sign | ((r >> 20) - (120u << 3)));
}

}  // namespace llm
