// EMULATE builds (-DLLM_CUDA=EMULATE): the bfloat16 types and conversions of
// CUDA's <cuda_bf16.h> that the kernels and the backend use, on the host.
// Our own small types rather than the toolkit's header: an emulator build
// must not need the CUDA toolkit installed. Conversions round to nearest even
// (the _rn intrinsics), NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
  // Zero-initialised, unlike CUDA's: a class with only a defaulted default
  // constructor gets a guard variable as a `static thread_local` (what
  // __shared__ is here), and the guard's first-use write would look like a
  // shared-memory race to the detector.
  unsigned short __x = 0;

  __nv_bfloat16() = default;
  __nv_bfloat16(float f);  // NOLINT: CUDA's type converts implicitly too
  operator float() const;
};

struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4);

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  __nv_bfloat16 r;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    r.__x = static_cast<unsigned short>((u >> 16) | 0x0040u);  // quiet NaN, sign kept
  } else {
    u += 0x7FFFu + ((u >> 16) & 1u);
    r.__x = static_cast<unsigned short>(u >> 16);
  }
  return r;
}

inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.__x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline __nv_bfloat16::__nv_bfloat16(float f) : __x(__float2bfloat16_rn(f).__x) {}
inline __nv_bfloat16::operator float() const { return __bfloat162float(*this); }

inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162{__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return float2{__bfloat162float(v.x), __bfloat162float(v.y)}; }
inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }
