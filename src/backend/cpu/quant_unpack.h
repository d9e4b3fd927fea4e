// The portable kernels' integer unpacking of one block (or sub-block), in
// weight order, and their integer dot products: shared by the reference
// dequantization (quant_dequantize.cpp) and the portable dots
// (quant_generic.cpp). Internal to those two files.
#pragma once

#include <cstdint>
#include <cstring>

namespace llm::cpu::unpack {


inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Integer quants of one 32-weight block (or sub-block), in weight order.
inline void UnpackQ4(const uint8_t* qs, int offset, int8_t* q) {  // nibbles - offset
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0xF) - offset);
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}
inline void UnpackQ5(const uint8_t* qs, uint32_t qh, int offset, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset);
    q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset);
  }
}
// Sub-blocks 2c and 2c+1 of a Q4_K/Q5_K super-block (chunk c of 64 weights).
inline void UnpackK(const uint8_t* qs, const uint8_t* qh, int c, int8_t* lo, int8_t* hi) {
  for (int l = 0; l < 32; ++l) {
    const uint8_t b = qs[32 * c + l];
    lo[l] = static_cast<int8_t>(b & 0xF);
    hi[l] = static_cast<int8_t>(b >> 4);
    if (qh != nullptr) {
      lo[l] = static_cast<int8_t>(lo[l] | (((qh[l] >> (2 * c)) & 1) << 4));
      hi[l] = static_cast<int8_t>(hi[l] | (((qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
}
inline int32_t Dot32(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += static_cast<int32_t>(a[i]) * b[i];
  return s;
}
inline int32_t Dot16(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += static_cast<int32_t>(a[i]) * b[i];
  return s;
}


}  // namespace llm::cpu::unpack
