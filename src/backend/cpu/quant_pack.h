// Row-interleaved ("R8") copies of block-quantized weights for the SIMD
// matmul, made once when the CPU backend is created.
//
// Rows are taken 8 at a time; for each 32-weight block b of the row group the
// packed block holds the 8 rows' scales side by side and their quants
// interleaved so that one 256-bit vector carries 8 consecutive weights of
// four rows. A vector of activations broadcast four times then meets four
// rows at once, and the 8 rows' integer dot products come out of the
// multiply-adds in one vector (lane r = row r) with a single horizontal add,
// instead of one horizontal reduction per row.
//
// Quant order (32 weights of row r, chunk c = weights 8c .. 8c+7):
//   vector "A" holds rows 0, 1, 4, 5 and vector "B" rows 2, 3, 6, 7, each
//   row's 8 bytes in that order, so that hadd(A, B) yields rows 0..7 in order.
//
// PackedQ4 (Q4_0 and Q4_1): qs[32·v + i], v = 0..3, is one byte with two
// 4-bit quants: low nibble from chunk 0 (v = 0: A, v = 1: B) or chunk 1
// (v = 2: A, v = 3: B), high nibble from chunk 2 or 3 of the same rows.
// Weight = d · q + m; Q4_0 (q - 8) is stored as m = -8 · d (exact in F16).
// PackedQ8 (Q8_0): qs[32·(2c + h) + i], h = 0: A, 1: B, the int8 quants of
// chunk c; weight = d · q.
//
// Rows past the matrix's end (rows % 8 != 0) are zero: scale 0, quants 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/tensor_type.h"
#include "model/weights.h"

namespace llm::cpu {

struct PackedQ4 {
  uint16_t d[8];  // F16 scales of rows 0..7
  uint16_t m[8];  // F16 minimums (Q4_0: -8·d)
  uint8_t qs[128];
};
static_assert(sizeof(PackedQ4) == 160);

struct PackedQ8 {
  uint16_t d[8];
  int8_t qs[256];
};
static_assert(sizeof(PackedQ8) == 272);

inline constexpr int64_t kPackRows = 8;

// Whether `w` can be packed: Q4_0, Q4_1 or Q8_0 with whole 32-weight blocks.
bool CanPackR8(const WeightView& w);
// Bytes of the packed copy of w (CanPackR8(w) must hold).
size_t PackedR8Bytes(const WeightView& w);
// Writes the packed copy of w to out (PackedR8Bytes(w) bytes): row group g,
// block b at out + (g · (cols / 32) + b) · sizeof(PackedQ4 or PackedQ8).
// False (out unusable) for a Q4_0 scale whose -8·d does not fit in F16.
bool PackR8(const WeightView& w, uint8_t* out);
// The same for row groups [g_begin, g_end) only (groups of kPackRows rows):
// disjoint ranges may be packed in parallel.
bool PackR8Groups(const WeightView& w, uint8_t* out, int64_t g_begin, int64_t g_end);

}  // namespace llm::cpu
