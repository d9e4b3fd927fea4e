// The R8 layouts of the 2- and 3-bit K-quants (Q2_K, Q3_K): 8 rows of one
// 256-weight super-block per element, the rows' F16 scales first, then one
// sub-block per 32 weights (activation block 8i + j meets sub-block j of
// super-block i). A 256-bit vector holds 4 weights of each of the 8 rows,
// two of either 16-weight half: byte 4r + i of vector v (v = 0..7 over the
// sub-block's 32) is quant K23Quant(v, i) of row r,
//
//   i = 0, 1: quant 2v + i (half 0)      i = 2, 3: quant 16 + 2v + i - 2 (half 1)
//
// so the int16 pair sums of a multiply-add with activations in the same
// order (the x86 matmul permutes each token's blocks so, once per call)
// fall into lane 2r for half 0 and 2r + 1 for half 1 of row r: one running
// sum per token keeps the halves apart for their own scales.
//
// Both keep the quants unsigned, q in [0, 3] (Q2_K) or q + 4 in [0, 7]
// (Q3_K), so they meet the activations as unsigned bytes (maddubs/vpdpbusd);
// the 2-bit fields of a sub-block are packed 4 to a byte:
//
//   ql[32u + 4r + i], bits 2k..2k+1 = low 2 bits of byte 4r + i of
//                                     vector 4u + k   (u = 0, 1)
//
// so vector v = 4u + k comes out of ql half u with one 16-bit shift by 2k
// and a mask of 3 (the bits a 16-bit shift moves across bytes fall outside
// the mask). Q3_K's third bits are one more vector:
//
//   qh[4r + i], bit v = bit 2 of byte 4r + i of vector v (q + 4)
//
// Scales per sub-block, byte 2r + h = row r's 16-weight group 2j + h:
//   Q2_K: the file's scale|min byte (4-bit scale low, 4-bit minimum high),
//         weight = d · sc · q - dmin · m;
//   Q3_K: the file's 6-bit signed scale in [-32, 31] as int8,
//         weight = d · sc · (q' - 4), q' = q + 4.
// The kernel applies them to the halves' exact int32 sums (quant_packed_k23_x86.h).
//
// Sizes: Q2_K 672 bytes per 8 rows of a super-block, the file's 8 × 84
// (the scale|min bytes stay nibbles); Q3_K 912 against the file's 8 × 110 =
// 880 (+3.6%: the 6-bit scales as bytes, 4 more bytes per row and
// super-block, which spares the kernel the 6-bit unpacking).
//
// Rows past the matrix's end (rows % 8 != 0) are zero: scale 0, quants 0.
#pragma once

#include <cstdint>

#include "model/tensor_type.h"

namespace llm::cpu {

// The quant (0..31 of its sub-block) at byte 4r + i of vector v (above).
constexpr int K23Quant(int v, int i) { return i < 2 ? 2 * v + i : 16 + 2 * v + i - 2; }

struct PackedQ2KSub {
  uint8_t sc[16];  // byte 2r + h: row r's scale (low nibble) | minimum (high) of quants 16h..16h+15
  uint8_t ql[64];  // 2-bit quants, 4 to a byte (above)
};
struct PackedQ2K {
  uint16_t d[8];     // F16 super-scales of rows 0..7
  uint16_t dmin[8];  // F16 super-minimums
  PackedQ2KSub sub[8];
};
static_assert(sizeof(PackedQ2K) == 8 * sizeof(BlockQ2_K));

struct PackedQ3KSub {
  int8_t sc[16];   // byte 2r + h: row r's signed scale of quants 16h..16h+15
  uint8_t ql[64];  // low 2 bits of q + 4, 4 to a byte
  uint8_t qh[32];  // bit 2 of q + 4
};
struct PackedQ3K {
  uint16_t d[8];  // F16 super-scales of rows 0..7
  PackedQ3KSub sub[8];
};
static_assert(sizeof(PackedQ3K) == 16 + 8 * 112);

// Writes row r of sub-block j (0..7) of a Q2_K / Q3_K super-block into the
// packed element s (zeroed beforehand).
void PackQ2KSub(const BlockQ2_K& blk, int j, int r, PackedQ2K* s);
void PackQ3KSub(const BlockQ3_K& blk, int j, int r, PackedQ3K* s);

}  // namespace llm::cpu
