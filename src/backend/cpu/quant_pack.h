// Row-interleaved ("R8") copies of block-quantized weights for the SIMD
// matmul, made once when the CPU backend is created.
//
// Rows are taken 8 at a time; for each 32-weight block b of the row group the
// packed block holds the 8 rows' scales side by side and their quants
// interleaved so that one 256-bit vector carries 4 consecutive weights of
// each of the 8 rows. Four activations broadcast to every 32-bit lane then
// meet all 8 rows at once, and after one widening multiply-add 32-bit lane r
// holds row r's dot product: no horizontal reduction at all, per row or per
// group.
//
// Quant order: vector j, byte 4·r + i = quant 4j + i of row r.
//
// PackedQ4 (Q4_1): qs[32·v + 4·r + i], v = 0..3, is one byte with two
// 4-bit quants of row r: low nibble quant 4v + i, high nibble quant
// 4v + 16 + i. Weight = d · q + m.
// PackedQ4_0 (Q4_0): the same without m, which the kernel makes as -8 · d
// (exact in F32): 144 bytes per 8 rows of 32 weights, Q4_0's own size, so a
// decode step streams no more than the file holds (the F16 m cost 11%).
// PackedQ8 (Q8_0): qs[32·j + 4·r + i], j = 0..7, is quant 4j + i of row r;
// weight = d · q.
// PackedQ5_0, PackedQ5_1, PackedQ5K: unsigned 5-bit quants q, their low
// 4 bits as PackedQ4's nibbles and their fifth bits in one more vector qh
// (below); weight = d · q + m (Q5_0: m = -16 · d).
//
// PackedQ2K, PackedQ3K (Q2_K, Q3_K): 2-bit fields four to a byte, in
// quant_pack_k23.h.
//
// Rows past the matrix's end (rows % 8 != 0) are zero: scale 0, quants 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/quant_pack_k23.h"  // PackedQ2K, PackedQ3K
#include "model/tensor_type.h"
#include "model/weights.h"

namespace llm::cpu {

struct PackedQ4 {
  uint16_t d[8];  // F16 scales of rows 0..7
  uint16_t m[8];  // F16 minimums (Q4_0: -8·d)
  uint8_t qs[128];
};
static_assert(sizeof(PackedQ4) == 160);

struct PackedQ4_0 {
  uint16_t d[8];  // F16 scales of rows 0..7; the minimum is -8·d
  uint8_t qs[128];
};
static_assert(sizeof(PackedQ4_0) == 144);

// Q4_K, one 256-weight super-block of 8 rows: the rows' F16 d and dmin as
// in the file, then per 32-weight sub-block j the rows' 6-bit scale sc and
// minimum m as bytes and the quants as in PackedQ4; weight =
// (d · sc) · q - dmin · m. The kernel forms d · sc and dmin · m in F32,
// exactly (an F16 times a 6-bit integer has at most 17 significant bits).
// 4.625 bits per weight against Q4_K's 4.5 (the earlier layout kept the
// products as F32 in every block: 6 bits, and decode streams every byte).
struct PackedQ4KSub {
  uint8_t sc[8];
  uint8_t m[8];
  uint8_t qs[128];
};
struct PackedQ4K {
  uint16_t d[8];
  uint16_t dmin[8];
  PackedQ4KSub sub[8];
};
static_assert(sizeof(PackedQ4K) == 32 + 8 * 144);

// Q6_K, one 256-weight super-block of 8 rows: the rows' F16 d as in the
// file, then per 32-weight sub-block j the rows' two int8 scales (quants
// 0..15 and 16..31) and the unsigned 6-bit quants q (weight d · sc · (q - 32))
// split as the file splits them: the low 4 bits as PackedQ4's nibbles (ql),
// the high 2 bits in two vectors (qh). qh byte 32u + 4r + i holds, from bit 0
// up, the high bits of row r's quants 8u + i, 8u + 16 + i, 8u + 4 + i and
// 8u + 20 + i: those of ql vector 2u's low and high nibble, then of ql vector
// 2u + 1's, so each comes out with one shift and one mask. 1680 bytes per 8
// rows, Q6_K's own 8 × 210 (the earlier layout kept q - 32 as bytes: 9 bits
// per weight against 6.5625, and decode streams every byte).
struct PackedQ6KSub {
  int8_t sc[2][8];  // sc[0][r]: quants 0..15 of row r, sc[1][r]: 16..31
  uint8_t ql[128];
  uint8_t qh[64];
};
struct PackedQ6K {
  uint16_t d[8];
  PackedQ6KSub sub[8];
};
static_assert(sizeof(PackedQ6K) == 8 * 210);

struct PackedQ8 {
  uint16_t d[8];
  int8_t qs[256];
};
static_assert(sizeof(PackedQ8) == 272);

// The 5-bit formats: the quants' low 4 bits in qs as PackedQ4's nibbles,
// their fifth bits in qh, where byte 4r + i holds, for row r, the fifth bit
// of quant 4v + i at bit v and of quant 4v + 16 + i at bit 4 + v (v = 0..3):
// nibble vector v's fifth bits come out with one 16-bit shift and a mask.
// Each is the file's own size per weight (the earlier layout kept the quants
// as bytes and the scales as F32: 10 bits per weight against Q5_0's and
// Q5_K's 5.5, and decode streams every byte).
//
// Q5_0: the rows' F16 d; the minimum is -16 · d, made by the kernel in F32
// (exact). 176 bytes per 8 rows of 32 weights, 8 × Q5_0's 22.
struct PackedQ5_0 {
  uint16_t d[8];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(PackedQ5_0) == 176);

// Q5_1: the rows' F16 d and m. 192 bytes, 8 × Q5_1's 24.
struct PackedQ5_1 {
  uint16_t d[8];
  uint16_t m[8];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(PackedQ5_1) == 192);

// Q5_K, one 256-weight super-block of 8 rows, as PackedQ4K with the fifth
// bits: weight = (d · sc) · q - dmin · m. 5.625 bits per weight against
// Q5_K's 5.5.
struct PackedQ5KSub {
  uint8_t sc[8];
  uint8_t m[8];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct PackedQ5K {
  uint16_t d[8];
  uint16_t dmin[8];
  PackedQ5KSub sub[8];
};
static_assert(sizeof(PackedQ5K) == 32 + 8 * 176);

// IQ4_NL, 8 rows of one 32-weight block: PackedQ4_0's shape, the nibbles
// now indices into kIQ4NLValues (weight = d · kIQ4NLValues[index]): 144
// bytes, the file's 8 × 18. Built and read by quant_pack_iq4.cpp and
// quant_packed_iq4_x86.h.
struct PackedIQ4NL {
  uint16_t d[8];    // F16 scales of rows 0..7
  uint8_t qs[128];  // indices, interleaved as PackedQ4's nibbles
};
static_assert(sizeof(PackedIQ4NL) == 8 * 18);

// MXFP4, 8 rows of one 32-weight block: the rows' E8M0 exponents e as in
// the file, then the E2M1 codes interleaved as PackedQ4's nibbles; weight =
// 2^(e - 128) · kE2M1Values[code]. 136 bytes, the file's 8 × 17.
struct PackedMXFP4 {
  uint8_t e[8];
  uint8_t qs[128];
};
static_assert(sizeof(PackedMXFP4) == 8 * 17);

// IQ4_XS, one 256-weight super-block of 8 rows: the rows' F16 d as in the
// file, then per 32-weight sub-block j the rows' signed scales ls_j - 32
// (in [-32, 31]) as int8 and the indices interleaved as PackedQ4's nibbles;
// weight = d · (ls_j - 32) · kIQ4NLValues[index]. 1104 bytes per 8 rows
// against the file's 8 × 136 = 1088 (+1.5%: the 6-bit scales as bytes).
struct PackedIQ4XSSub {
  int8_t sc[8];     // ls_j - 32 of rows 0..7
  uint8_t qs[128];  // indices
};
struct PackedIQ4XS {
  uint16_t d[8];
  PackedIQ4XSSub sub[8];
};
static_assert(sizeof(PackedIQ4XS) == 16 + 8 * 136);

inline constexpr int64_t kPackRows = 8;

// Whether `w` can be packed: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL or MXFP4 with
// whole 32-weight blocks, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS with whole 256-weight
// super-blocks.
bool CanPackR8(const WeightView& w);
// Whether type t packs to PackedQ8 blocks (Q8_0).
bool PacksAsQ8(TensorType t);
// Bytes of one packed block (8 rows, 32 weights) of type t (the K-quants and
// IQ4_XS: an eighth of a PackedQ2K, PackedQ3K, PackedQ4K, PackedQ5K,
// PackedQ6K, PackedIQ4XS).
size_t PackedBlockBytes(TensorType t);
// Bytes of the packed copy of w (CanPackR8(w) must hold).
size_t PackedR8Bytes(const WeightView& w);
// Writes the packed copy of w to out (PackedR8Bytes(w) bytes): row group g,
// block b at out + (g · (cols / 32) + b) · PackedBlockBytes(type).
// Every packable weight packs (the bool is kept for layouts that may not).
bool PackR8(const WeightView& w, uint8_t* out);
// The same for row groups [g_begin, g_end) only (groups of kPackRows rows):
// disjoint ranges may be packed in parallel.
bool PackR8Groups(const WeightView& w, uint8_t* out, int64_t g_begin, int64_t g_end);

// PackR8Groups' step for IQ4_NL, IQ4_XS and MXFP4 (quant_pack_iq4.cpp): block b of
// row r (0..7) of a group, the row's bytes at `row`, into the packed copy
// `out` whose block index of that group's block b is idx.
void PackIQ4Block(TensorType t, const uint8_t* row, int64_t b, int r, uint8_t* out, int64_t idx);

}  // namespace llm::cpu
