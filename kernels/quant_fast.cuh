// The quantized GEMV's decoding of the five types real files hold most of
// their weights in (Q4_K, Q5_K, Q6_K, Q8_0, Q4_0), one function per type so
// that a kernel instantiated for the type inlines it whole: 32 weights of one
// chunk into registers, 4 bytes at a time, from a block the kernel staged in
// shared memory with 16-byte global loads (quant_gemv.cu). Every other type
// goes through DecodeChunk (quant_blocks.cuh). Included by the .cu files only.
//
// The layouts and formulas are DecodeChunk's (the GGUF spec's); what differs
// is how the arithmetic is issued:
// - an integer field q < 2^23 becomes a float without a conversion
//   instruction: the bits 0x4B000000 | q are the float 2^23 + q, and one
//   exact subtraction leaves q (a signed field subtracts its bias there too);
// - Q4_K/Q5_K's d·sc·q - dmin·m is one fused multiply-add (DecodeChunk rounds
//   the product first, as the CPU backend does), so a weight may differ from
//   the CPU backend's by one rounding, 2^-24 of its size: far inside the
//   GEMV's 1e-5·Σ|wx| bound. The other three types give DecodeChunk's floats.
#pragma once

#include <cstring>

#include "quant_blocks.cuh"

namespace llm::cuda::dev {

// Bytes per block and 32-weight chunks per block of a fast type; 0 for the others.
__host__ __device__ constexpr int FastBlockBytes(uint32_t type) {
  return type == kQuantQ4_K ? 144 : type == kQuantQ5_K ? 176 : type == kQuantQ6_K ? 210 : type == kQuantQ8_0 ? 34
         : type == kQuantQ4_0 ? 18 : 0;
}
__host__ __device__ constexpr int FastChunksPerBlock(uint32_t type) {
  return type == kQuantQ8_0 || type == kQuantQ4_0 ? 1 : 8;
}
__host__ __device__ constexpr bool IsFastType(uint32_t type) { return FastBlockBytes(type) != 0; }

__device__ __forceinline__ float BitsAsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// The float 2^23 + q (q < 2^23); minus 2^23 + bias it is q - bias, exactly.
__device__ __forceinline__ float MagicFloat(uint32_t q) { return BitsAsFloat(0x4B000000u | q); }
constexpr float kMagic = 8388608.0f;  // 2^23

// The 4 bytes at p (shared memory, p 2-aligned): one aligned word when p is
// 4-aligned, else two funnelled together (the stage buffer ends with a spare
// 16 bytes, so the second word is always inside it).
__device__ __forceinline__ uint32_t SmemWord(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t{3});
  const uint32_t shift = static_cast<uint32_t>(a & 3u) * 8u;
  const uint64_t both = static_cast<uint64_t>(w[1]) << 32 | w[0];
  return static_cast<uint32_t>(both >> shift);
}
// The same for a p known to be 4-aligned (Q4_K's and Q5_K's blocks, 144 and
// 176 bytes, are 16-aligned wherever a row starts).
__device__ __forceinline__ uint32_t SmemWordAligned(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Weights 32 sub .. 32 sub + 32 of the block at b (staged), into v.
template <uint32_t kType>
__device__ __forceinline__ void DecodeFast(const uint8_t* b, int sub, float (&v)[32]);

template <>
__device__ __forceinline__ void DecodeFast<kQuantQ8_0>(const uint8_t* b, int, float (&v)[32]) {
  const float d = HalfBitsToFloat(SmemWord(b) & 0xFFFFu);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t w = SmemWord(b + 2 + 4 * k);
#pragma unroll
    for (int i = 0; i < 4; ++i)  // int8 q: (q + 128) is the byte with its top bit flipped
      v[4 * k + i] = __fmul_rn(d, MagicFloat(((w >> (8 * i)) & 0xFFu) ^ 0x80u) - (kMagic + 128.0f));
  }
}

template <>
__device__ __forceinline__ void DecodeFast<kQuantQ4_0>(const uint8_t* b, int, float (&v)[32]) {
  // byte m: weight m in the low nibble, weight m + 16 in the high one
  const float d = HalfBitsToFloat(SmemWord(b) & 0xFFFFu);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t w = SmemWord(b + 2 + 4 * k);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[4 * k + i] = __fmul_rn(d, MagicFloat((w >> (8 * i)) & 0xFu) - (kMagic + 8.0f));
      v[4 * k + i + 16] = __fmul_rn(d, MagicFloat((w >> (8 * i + 4)) & 0xFu) - (kMagic + 8.0f));
    }
  }
}

// Q4_K and Q5_K: sub-block j's scale and minimum (6 bits each, packed in the
// 12 bytes at 4), d·sc and dmin·m.
__device__ __forceinline__ void KQuantScaleMin(const uint8_t* b, int j, float* ds, float* dm) {
  const uint32_t dd = SmemWordAligned(b);
  const uint8_t* sc = b + 4;
  int s, mn;
  if (j < 4) {
    s = sc[j] & 63;
    mn = sc[j + 4] & 63;
  } else {
    s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
    mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
  *ds = __fmul_rn(HalfBitsToFloat(dd & 0xFFFFu), static_cast<float>(s));
  *dm = __fmul_rn(HalfBitsToFloat(dd >> 16), static_cast<float>(mn));
}

template <>
__device__ __forceinline__ void DecodeFast<kQuantQ4_K>(const uint8_t* b, int j, float (&v)[32]) {
  // sub-block j: the low (j even) or high nibbles of qs[32 (j/2) ..]
  float ds, dm;
  KQuantScaleMin(b, j, &ds, &dm);
  const uint8_t* qs = b + 16 + 32 * (j >> 1);
  const uint32_t shift = (j & 1) * 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t w = SmemWordAligned(qs + 4 * k) >> shift;
#pragma unroll
    for (int i = 0; i < 4; ++i) v[4 * k + i] = fmaf(ds, MagicFloat((w >> (8 * i)) & 0xFu) - kMagic, -dm);
  }
}

template <>
__device__ __forceinline__ void DecodeFast<kQuantQ5_K>(const uint8_t* b, int j, float (&v)[32]) {
  // as Q4_K with qs at 48, and the fifth bit of weight l: bit j of qh[l] (16)
  float ds, dm;
  KQuantScaleMin(b, j, &ds, &dm);
  const uint8_t* qs = b + 48 + 32 * (j >> 1);
  const uint32_t shift = (j & 1) * 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t w = SmemWordAligned(qs + 4 * k) >> shift, h = SmemWordAligned(b + 16 + 4 * k) >> j;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t q = ((w >> (8 * i)) & 0xFu) | ((h >> (8 * i)) & 1u) << 4;
      v[4 * k + i] = fmaf(ds, MagicFloat(q) - kMagic, -dm);
    }
  }
}

template <>
__device__ __forceinline__ void DecodeFast<kQuantQ6_K>(const uint8_t* b, int c, float (&v)[32]) {
  // half h = c / 4, quarter k = c % 4 (DecodeChunk's Q6_K case)
  const int h = c >> 2, k = c & 3;
  const float d = HalfBitsToFloat(SmemWord(b + 208) & 0xFFFFu);
  const uint8_t* ql = b + 64 * h + (k & 1) * 32;
  const uint8_t* qh = b + 128 + 32 * h;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * k;
  const float ds0 = __fmul_rn(d, static_cast<float>(scales[0])), ds1 = __fmul_rn(d, static_cast<float>(scales[1]));
  const uint32_t lshift = k < 2 ? 0 : 4, hshift = 2 * k;
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const uint32_t lw = SmemWord(ql + 4 * m) >> lshift, hw = SmemWord(qh + 4 * m) >> hshift;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t q = ((lw >> (8 * i)) & 0xFu) | ((hw >> (8 * i)) & 3u) << 4;
      v[4 * m + i] = __fmul_rn(m < 4 ? ds0 : ds1, MagicFloat(q) - (kMagic + 32.0f));
    }
  }
}

}  // namespace llm::cuda::dev
