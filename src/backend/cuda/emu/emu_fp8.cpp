// EMULATE builds: cvt.rn.f16x2.e4m3x2 (PTX ISA, "cvt": sm_89+), the
// instruction the attention kernels widen FP8 E4M3 KV bytes with. Every
// E4M3 value is exact in half, so the "rn" never rounds. The value is
// computed as a number (sign, significand, power of two) and then written
// in half's fields, a different route from the device fallback's field
// rebias (kernels/kv_elem.cuh E4m3ToHalfBitsSoft): tests/test_fp8.cpp
// checks both against ml_dtypes' table for all 256 bytes.
#include "emu_internal.h"

namespace llm::emu {
namespace {

uint32_t E4m3ToHalf(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 8;
  const int e = static_cast<int>((b >> 3) & 15u), m = static_cast<int>(b & 7u);
  if (e == 15 && m == 7) return 0x7fffu;  // the canonical NaN
  // value = sig * 2^exp with sig an integer of at most 4 bits
  int sig = e == 0 ? m : 8 + m;
  int exp = e == 0 ? -9 : e - 10;
  if (sig == 0) return sign;
  while (sig < 8) {  // normalise to 1.xxx * 2^(exp + 3)
    sig <<= 1;
    --exp;
  }
  const int half_exp = exp + 3 + 15;  // -9 .. 8 -> 6 .. 23: always a normal half
  return sign | (static_cast<uint32_t>(half_exp) << 10) | (static_cast<uint32_t>(sig - 8) << 7);
}

}  // namespace

uint32_t CvtF16x2E4m3x2(uint16_t v) { return E4m3ToHalf(v & 0xffu) | (E4m3ToHalf(v >> 8) << 16); }

}  // namespace llm::emu
