// Element types of weight tensors, with the numeric ids GGUF files use
// (ggml_type), and the byte layouts of the block-quantized ones. Only the
// types the backends can read are named here.
//
// A block-quantized row is a sequence of blocks; each block holds a fixed
// number of weights (32, or 256 for the K-quants, IQ4_XS, the IQ2/IQ3 lattice types and TQ1_0/TQ2_0) and its own
// scales. The layouts below are the GGUF/ggml ones, field for field (all
// little-endian; "F16" fields are IEEE half floats stored as uint16_t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/quant_tables.h"

namespace llm {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// ---------------------------------------------------------------- 32-weight blocks
//
// Nibble order of Q4_x/Q5_x: byte j holds weight j in its low nibble and
// weight j + 16 in its high nibble. Q5_x's fifth bits: bit j of qh (a
// little-endian u32) belongs to weight j.

inline constexpr int kQ8_0BlockSize = 32;
inline constexpr int kQBlock = 32;   // weights per block of Q4_0 .. Q8_0
inline constexpr int kQKBlock = 256;  // weights per K-quant super-block

// value = d * q
struct BlockQ8_0 {
  uint16_t d;      // F16 scale
  int8_t qs[32];   // quants
};
static_assert(sizeof(BlockQ8_0) == 34);

// value = d * (q - 8), q in [0, 15]
struct BlockQ4_0 {
  uint16_t d;       // F16 scale
  uint8_t qs[16];   // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18);

// value = d * q + m, q in [0, 15]
struct BlockQ4_1 {
  uint16_t d;       // F16 scale
  uint16_t m;       // F16 minimum
  uint8_t qs[16];   // nibbles
};
static_assert(sizeof(BlockQ4_1) == 20);

// value = d * (q - 16), q in [0, 31] (low nibble | fifth bit << 4)
struct BlockQ5_0 {
  uint16_t d;       // F16 scale
  uint8_t qh[4];    // fifth bits, u32 little-endian
  uint8_t qs[16];   // low nibbles
};
static_assert(sizeof(BlockQ5_0) == 22);

// value = d * q + m, q in [0, 31]
struct BlockQ5_1 {
  uint16_t d;       // F16 scale
  uint16_t m;       // F16 minimum
  uint8_t qh[4];    // fifth bits, u32 little-endian
  uint8_t qs[16];   // low nibbles
};
static_assert(sizeof(BlockQ5_1) == 24);

// ---------------------------------------------------------------- K-quants (256 weights)
//
// Q4_K and Q5_K: 8 sub-blocks of 32 weights; sub-block j has a 6-bit scale
// sc_j and a 6-bit min m_j packed into scales[12]:
//
//   j < 4:  sc_j = scales[j] & 63                m_j = scales[j + 4] & 63
//   j >= 4: sc_j = (scales[j + 4] & 15)          m_j = (scales[j + 4] >> 4)
//                  | (scales[j - 4] >> 6) << 4         | (scales[j] >> 6) << 4
//
//   value = d * sc_j * q - dmin * m_j
//
// Quants come in 4 chunks of 64 weights, 32 bytes each: sub-block 2c is the
// low nibbles of qs[32c .. 32c+32), sub-block 2c+1 their high nibbles. Q5_K's
// fifth bit of weight l of sub-block j is bit j of qh[l].

struct BlockQ4_K {
  uint16_t d;          // F16 super-scale of the scales
  uint16_t dmin;       // F16 super-scale of the mins
  uint8_t scales[12];  // 6-bit scales and mins, packed as above
  uint8_t qs[128];     // nibbles
};
static_assert(sizeof(BlockQ4_K) == 144);

// 6-bit scale and minimum of sub-block j (0..7) of a Q4_K / Q5_K super-block
// from its 12 packed bytes: j < 4 in the low 6 bits of bytes j and j + 4;
// j >= 4 in the nibbles of byte j + 4 with the top 2 bits of bytes j - 4, j.
inline void KScaleMin(int j, const uint8_t* scales, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];      // fifth bits
  uint8_t qs[128];     // low nibbles
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 weights with int8 scales; value = d * sc_i * (q - 32),
// q in [0, 63]. Two halves of 128 weights; in half h, for l in [0, 32):
//
//   weight  l      : ql[64h + l]      low nibble  | (qh[32h + l] >> 0 & 3) << 4
//   weight  l + 32 : ql[64h + l + 32] low nibble  | (qh[32h + l] >> 2 & 3) << 4
//   weight  l + 64 : ql[64h + l]      high nibble | (qh[32h + l] >> 4 & 3) << 4
//   weight  l + 96 : ql[64h + l + 32] high nibble | (qh[32h + l] >> 6 & 3) << 4
//
// and weight i (0..255) uses scale scales[i / 16].
struct BlockQ6_K {
  uint8_t ql[128];     // low 4 bits
  uint8_t qh[64];      // high 2 bits
  int8_t scales[16];   // sub-block scales
  uint16_t d;          // F16 super-scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Weights 32k .. 32k+32 of half h of a Q6_K super-block, minus 32 (in
// [-32, 31]); they use scales 8h + 2k (the first 16) and 8h + 2k + 1.
inline void UnpackQ6K(const BlockQ6_K& b, int h, int k, int8_t* q) {
  const uint8_t* ql = b.ql + 64 * h;
  const uint8_t* qh = b.qh + 32 * h;
  for (int l = 0; l < 32; ++l) {
    const int low = k & 1 ? ql[l + 32] : ql[l];
    const int nib = k < 2 ? low & 0xF : low >> 4;
    q[l] = static_cast<int8_t>((nib | (((qh[l] >> (2 * k)) & 3) << 4)) - 32);
  }
}

// ---------------------------------------------------------------- low-bit K-quants
//
// Q3_K and Q2_K: 16 groups of 16 weights, each with its own scale. Their 2-bit
// quant fields share one layout: weight 32j + l (j = 4h + s, h = 0..1,
// s = 0..3, l = 0..31) is bits 2s, 2s+1 of qs[32h + l], and weight i uses
// group i / 16.

// Q3_K: value = d * (sc_i - 32) * q, q in [-4, 3]: the 2-bit field minus 4
// unless bit j of hmask[l] (the "high" bit of weight 32j + l) is set. The
// 6-bit scales sc_i pack into scales[12]: low 4 bits in the nibbles of
// bytes 0..7 (i < 8: low nibble of byte i; i >= 8: high nibble of byte
// i - 8), high 2 bits in bits 2(i / 4), +1 of byte 8 + i % 4.
struct BlockQ3_K {
  uint8_t hmask[32];   // high bits
  uint8_t qs[64];      // 2-bit fields
  uint8_t scales[12];  // 6-bit scales, packed as above
  uint16_t d;          // F16 super-scale
};
static_assert(sizeof(BlockQ3_K) == 110);

// Signed scale (sc_i - 32, in [-32, 31]) of group i (0..15) of a Q3_K block.
inline int Q3KScale(const uint8_t* scales, int i) {
  const int lo = (i < 8 ? scales[i] : scales[i - 8] >> 4) & 0xF;
  const int hi = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// Quants (in [-4, 3]) of weights 32j .. 32j+32 of a Q3_K block.
inline void UnpackQ3K(const BlockQ3_K& b, int j, int8_t* q) {
  const uint8_t* qs = b.qs + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  for (int l = 0; l < 32; ++l)
    q[l] = static_cast<int8_t>(((qs[l] >> shift) & 3) - ((b.hmask[l] >> j) & 1 ? 0 : 4));
}

// Q2_K: value = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4),
// q in [0, 3] the 2-bit field.
struct BlockQ2_K {
  uint8_t scales[16];  // per group: 4-bit scale (low), 4-bit minimum (high)
  uint8_t qs[64];      // 2-bit fields
  uint16_t d;          // F16 super-scale of the scales
  uint16_t dmin;       // F16 super-scale of the minimums
};
static_assert(sizeof(BlockQ2_K) == 84);

// Quants (in [0, 3]) of weights 32j .. 32j+32 of a Q2_K block.
inline void UnpackQ2K(const BlockQ2_K& b, int j, int8_t* q) {
  const uint8_t* qs = b.qs + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>((qs[l] >> shift) & 3);
}

// ---------------------------------------------------------------- non-linear 4-bit
//
// IQ4_NL and IQ4_XS: a 4-bit index per weight into the 16 int8 values of
// kIQ4NLValues (model/quant_tables.h); nibble order as Q4_0's (byte j of 16:
// weight j low, weight j + 16 high).

// value = d * kIQ4NLValues[index]
struct BlockIQ4_NL {
  uint16_t d;      // F16 scale
  uint8_t qs[16];  // indices
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 8 sub-blocks of 32 weights; value = d * (ls_j - 32) * kIQ4NLValues[index]
// with the 6-bit ls_j of sub-block j: low 4 bits the nibble j % 2 of
// scales_l[j / 2], high 2 bits bits 2j, 2j+1 of scales_h. Sub-block j's
// indices are qs[16j .. 16j+16).
struct BlockIQ4_XS {
  uint16_t d;           // F16 super-scale
  uint16_t scales_h;    // high 2 bits of the 8 scales
  uint8_t scales_l[4];  // low 4 bits
  uint8_t qs[128];      // indices
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Signed scale (ls_j - 32, in [-32, 31]) of sub-block j (0..7) of an IQ4_XS block.
inline int IQ4XSScale(const BlockIQ4_XS& b, int j) {
  const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  const int hi = (b.scales_h >> (2 * j)) & 3;
  return (lo | hi << 4) - 32;
}

// The 32 int8 values (of `table`, 16 entries) of 16 index bytes, in weight
// order.
inline void UnpackIQ4(const uint8_t* qs, int8_t* q, const int8_t* table = kIQ4NLValues) {
  for (int j = 0; j < 16; ++j) {
    q[j] = table[qs[j] & 0xF];
    q[j + 16] = table[qs[j] >> 4];
  }
}

// ---------------------------------------------------------------- MXFP4
//
// OCP microscaling FP4: 32 weights share an E8M0 exponent e; each weight is
// a 4-bit E2M1 code in the nibble order of Q4_0. value = 2^(e - 128) *
// kE2M1Values[code] (the codebook holds the E2M1 values doubled, the scale
// is halved to match: 2^(e - 127) * E2M1 value).
struct BlockMXFP4 {
  uint8_t e;       // E8M0 shared exponent
  uint8_t qs[16];  // E2M1 codes
};
static_assert(sizeof(BlockMXFP4) == 17);

// 2^(e - 128) as an F32 (subnormal for e < 2; finite for every e).
inline float MXFP4Scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---------------------------------------------------------------- lattice types (IQ2, IQ3)
//
// 256-weight super-blocks with an F16 scale d. Each group of 8 (IQ2) or 4
// (IQ3) weights is one point of a lattice table (model/quant_tables.h): an
// index gives its magnitudes; the signs of 8 weights are a byte (IQ2_S,
// IQ3_S) or a 7-bit index into kIQ2Signs[] (the others: the eighth sign
// makes the number of negatives even). A 4-bit scale s per 16 or 32 weights
// gives
//
//   IQ2_XXS, IQ2_XS, IQ2_S: value = d * (0.5 + s) / 4 * magnitude * sign
//   IQ3_XXS:                value = d * (0.5 + s) / 2 * magnitude * sign
//   IQ3_S:                  value = d * (1 + 2s) * magnitude * sign
//   IQ1_S, IQ1_M:           value = d * (1 + 2s) * (g + delta)
//
// (IQ1: g in {-1, 0, 1} from kIQ1SGrid, delta = +-1/8 per 32 or 8 weights:
// d/8 * (2s + 1) * (8g +- 1), as magnitude |8g +- 1| and its sign.)
//
// which is d * unit * ((2s + 1) * magnitude * sign) with unit 1/8, 1/4 or 1:
// d * unit and d * (0.5 + s) * unit are exact in F32, so both forms round
// once, to the same float. The unpackers below return, per 32-weight
// sub-block, the signed magnitudes and the odd multipliers 2s + 1 of its two
// 16-weight halves.

inline constexpr float kIQ2Unit = 0.125f, kIQ3Unit = 0.25f, kIQ3SUnit = 1.0f;

inline uint32_t IQLoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 8 signed magnitudes: the bytes of lattice point `point`, negated where
// `bits` has a bit set (bit l: weight l).
inline void IQSigned8(uint64_t point, int bits, int8_t* q) {
  for (int l = 0; l < 8; ++l) {
    const int m = static_cast<int>((point >> (8 * l)) & 0xFF);
    q[l] = static_cast<int8_t>(bits >> l & 1 ? -m : m);
  }
}

// IQ2_XXS: sub-block ib is qs[4ib .. 4ib+4) read as two u32: the first's
// bytes are 4 indices into kIQ2XXSGrid, the second holds four 7-bit sign
// indices (bits 7l ..) and the 4-bit scale (bits 28 ..).
struct BlockIQ2_XXS {
  uint16_t d;        // F16 super-scale
  uint16_t qs[32];   // per sub-block: 4 grid indices, 4 sign indices, scale
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// IQ2_XS: qs[4ib + l] holds a 9-bit index into kIQ2XSGrid (low bits) and a
// 7-bit sign index (high bits) for weights 32ib + 8l ..; scales[ib] holds
// the 4-bit scales of the sub-block's halves (low nibble first).
struct BlockIQ2_XS {
  uint16_t d;         // F16 super-scale
  uint16_t qs[32];    // per 8 weights: grid index | sign index << 9
  uint8_t scales[8];  // per 16 weights: 4-bit scale
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// IQ3_XXS: qs[0 .. 64) are indices into kIQ3XXSGrid (8 per sub-block, 4
// weights each); the u32 at qs[64 + 4ib] holds sub-block ib's four 7-bit
// sign indices (one per 8 weights) and its 4-bit scale (bits 28 ..).
struct BlockIQ3_XXS {
  uint16_t d;       // F16 super-scale
  uint8_t qs[96];   // 64 grid indices, then 8 u32 of signs and scale
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// IQ3_S: sub-block ib's 8 grid indices (4 weights each) are qs[8ib + k] with
// bit k of qh[ib] as their ninth bit (into kIQ3SGrid); signs[4ib + l] holds
// the signs of weights 32ib + 8l .. (bit k: weight 8l + k); the 4-bit scale
// of sub-block ib is nibble ib % 2 of scales[ib / 2].
struct BlockIQ3_S {
  uint16_t d;          // F16 super-scale
  uint8_t qs[64];      // low 8 bits of the grid indices
  uint8_t qh[8];       // their ninth bits
  uint8_t signs[32];   // sign bits
  uint8_t scales[4];   // 4-bit scales
};
static_assert(sizeof(BlockIQ3_S) == 110);

// IQ2_S: sub-block ib's 4 grid indices (8 weights each) are qs[4ib + l] with
// bits 2l, 2l+1 of qh[ib] as their high bits (into kIQ2SGrid); the sign
// bytes follow the indices (qs[32 + 4ib + l]); scales as IQ2_XS's.
struct BlockIQ2_S {
  uint16_t d;          // F16 super-scale
  uint8_t qs[64];      // 32 low index bytes, then 32 sign bytes
  uint8_t qh[8];       // high 2 bits of the indices
  uint8_t scales[8];   // per 16 weights: 4-bit scale
};
static_assert(sizeof(BlockIQ2_S) == 82);

// IQ1_S: sub-block ib's 4 grid indices (8 weights each) are qs[4ib + l] with
// bits 3l .. 3l+2 of qh[ib] as their high bits (into kIQ1SGrid); bits 12 ..
// 14 of qh[ib] are its 3-bit scale s, bit 15 the sign of its delta (set: -1/8).
struct BlockIQ1_S {
  uint16_t d;        // F16 super-scale
  uint8_t qs[32];    // low 8 bits of the grid indices
  uint16_t qh[8];    // high index bits, scale, delta sign
};
static_assert(sizeof(BlockIQ1_S) == 50);

// IQ1_M: no d field: the F16 d is the top nibbles of the four u16 of
// `scales` (bits 12 .. 15 of u16 i are bits 4i .. 4i+3 of d). Group k (8
// weights, 0..31) has index qs[k] | (nibble k % 2 of qh[k / 2] & 7) << 8, its
// delta sign in that nibble's bit 3. The 3-bit scale of 16 weights
// 16m .. (m = 0..15) is bits 3(m % 4) .. of u16 m / 4 of scales.
struct BlockIQ1_M {
  uint8_t qs[32];     // low 8 bits of the grid indices
  uint8_t qh[16];     // per group: 3 high index bits, delta sign
  uint8_t scales[8];  // 4 u16: 3-bit scales, the d's nibbles on top
};
static_assert(sizeof(BlockIQ1_M) == 56);

// IQ1_M's d, as F16 bits.
inline uint16_t IQ1MScaleBits(const uint8_t* scales) {
  uint16_t sc[4];
  std::memcpy(sc, scales, 8);
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
}

// The magnitudes and sign bits of 8 IQ1 weights 8g + delta8 (g the int8
// bytes of `point`, delta8 = +-1).
inline void IQ1Point(uint64_t point, int delta8, uint64_t* magnitude, int* sign) {
  *magnitude = 0, *sign = 0;
  for (int k = 0; k < 8; ++k) {
    const int v = 8 * static_cast<int8_t>((point >> (8 * k)) & 0xFF) + delta8;
    *magnitude |= static_cast<uint64_t>(v < 0 ? -v : v) << (8 * k);
    *sign |= (v < 0) << k;
  }
}

// Sub-block ib (0..7) of the lattice-type super-block at `block`: the
// magnitudes of its weights 8l .. 8l+8 (point[l], byte k weight 8l + k),
// their sign bits sign[l] (bit k: weight 8l + k negative), and the
// multipliers mul[2] of its halves.
// Returns the F32 unit (d * unit * mul * signed magnitude is the value); 0
// for another type.
inline float IQLatticePoints(TensorType t, const uint8_t* block, int ib, uint64_t* point, int* sign, int* mul) {
  switch (t) {
    case TensorType::IQ2_XXS: {
      const uint8_t* p = block + 2 + 8 * ib;
      const uint32_t aux = IQLoadU32(p + 4);
      for (int l = 0; l < 4; ++l) point[l] = kIQ2XXSGrid[p[l]], sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127];
      mul[0] = mul[1] = 2 * static_cast<int>(aux >> 28) + 1;
      return kIQ2Unit;
    }
    case TensorType::IQ2_XS: {
      const uint8_t* p = block + 2 + 8 * ib;
      for (int l = 0; l < 4; ++l) {
        const int v = p[2 * l] | p[2 * l + 1] << 8;
        point[l] = kIQ2XSGrid[v & 511], sign[l] = kIQ2Signs[v >> 9];
      }
      const uint8_t sc = block[offsetof(BlockIQ2_XS, scales) + ib];
      mul[0] = 2 * (sc & 0xF) + 1;
      mul[1] = 2 * (sc >> 4) + 1;
      return kIQ2Unit;
    }
    case TensorType::IQ3_XXS: {
      const uint8_t* idx = block + 2 + 8 * ib;
      const uint32_t aux = IQLoadU32(block + 2 + 64 + 4 * ib);
      for (int l = 0; l < 4; ++l) {
        point[l] = kIQ3XXSGrid[idx[2 * l]] | static_cast<uint64_t>(kIQ3XXSGrid[idx[2 * l + 1]]) << 32;
        sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127];
      }
      mul[0] = mul[1] = 2 * static_cast<int>(aux >> 28) + 1;
      return kIQ3Unit;
    }
    case TensorType::IQ3_S: {
      const auto& b = *reinterpret_cast<const BlockIQ3_S*>(block);
      for (int l = 0; l < 4; ++l) {
        const int k0 = 8 * ib + 2 * l;
        const int i0 = b.qs[k0] | ((b.qh[ib] >> (2 * l)) & 1) << 8;
        const int i1 = b.qs[k0 + 1] | ((b.qh[ib] >> (2 * l + 1)) & 1) << 8;
        point[l] = kIQ3SGrid[i0] | static_cast<uint64_t>(kIQ3SGrid[i1]) << 32;
        sign[l] = b.signs[4 * ib + l];
      }
      mul[0] = mul[1] = 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1;
      return kIQ3SUnit;
    }
    case TensorType::IQ2_S: {
      const auto& b = *reinterpret_cast<const BlockIQ2_S*>(block);
      for (int l = 0; l < 4; ++l) {
        point[l] = kIQ2SGrid[b.qs[4 * ib + l] | ((b.qh[ib] >> (2 * l)) & 3) << 8];
        sign[l] = b.qs[32 + 4 * ib + l];
      }
      mul[0] = 2 * (b.scales[ib] & 0xF) + 1;
      mul[1] = 2 * (b.scales[ib] >> 4) + 1;
      return kIQ2Unit;
    }
    case TensorType::IQ1_S: {
      const auto& b = *reinterpret_cast<const BlockIQ1_S*>(block);
      const int qh = b.qh[ib];
      for (int l = 0; l < 4; ++l)
        IQ1Point(kIQ1SGrid[b.qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8], qh & 0x8000 ? -1 : 1, &point[l], &sign[l]);
      mul[0] = mul[1] = 2 * ((qh >> 12) & 7) + 1;
      return kIQ2Unit;
    }
    case TensorType::IQ1_M: {
      const auto& b = *reinterpret_cast<const BlockIQ1_M*>(block);
      for (int l = 0; l < 4; ++l) {
        const int nib = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
        IQ1Point(kIQ1SGrid[b.qs[4 * ib + l] | (nib & 7) << 8], nib & 8 ? -1 : 1, &point[l], &sign[l]);
      }
      const int sc = b.scales[2 * (ib / 2)] | b.scales[2 * (ib / 2) + 1] << 8;
      mul[0] = 2 * ((sc >> (6 * (ib % 2))) & 7) + 1;
      mul[1] = 2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1;
      return kIQ2Unit;
    }
    default: return 0.0f;
  }
}

// The same sub-block as 32 signed magnitudes q (in weight order).
inline float UnpackIQLattice(TensorType t, const uint8_t* block, int ib, int8_t* q, int* mul) {
  uint64_t point[4];
  int sign[4];
  const float unit = IQLatticePoints(t, block, ib, point, sign, mul);
  for (int l = 0; l < 4; ++l) IQSigned8(point[l], sign[l], q + 8 * l);
  return unit;
}

constexpr bool IsIQLattice(TensorType t) {
  return t == TensorType::IQ2_XXS || t == TensorType::IQ2_XS || t == TensorType::IQ2_S ||
         t == TensorType::IQ3_XXS || t == TensorType::IQ3_S || t == TensorType::IQ1_S || t == TensorType::IQ1_M;
}

// The F16 bits of a lattice-type block's d (IQ1_M's is spread over its scales).
inline uint16_t IQLatticeScaleBits(TensorType t, const uint8_t* block) {
  if (t == TensorType::IQ1_M) return IQ1MScaleBits(block + offsetof(BlockIQ1_M, scales));
  return static_cast<uint16_t>(block[0] | block[1] << 8);
}

// ---------------------------------------------------------------- ternary (TQ1_0, TQ2_0)
//
// 256-weight blocks of ternary codes q in {0, 1, 2} and an F16 scale d at the
// block's end: value = d * (q - 1).
//
// TQ2_0: 2 bits per code; weight 128c + 32s + l (c = 0..1, s = 0..3) is bits
// 2s, 2s+1 of qs[32c + l] (a code of 3 reads as 2: value 2d).
// TQ1_0: codes packed in base 3, 5 per byte (4 in qh's) as the fraction
// b / 256 of the digits: digit n of byte b is (uint8(b * 3^n) * 3) >> 8.
// Bytes qs[0 .. 32) give weights 32n + l (n = 0..4), qs[32 .. 48) weights
// 160 + 16n + l, qh[0 .. 4) weights 240 + 4n + l (n = 0..3).
struct BlockTQ2_0 {
  uint8_t qs[64];  // 2-bit codes
  uint16_t d;      // F16 scale
};
static_assert(sizeof(BlockTQ2_0) == 66);

struct BlockTQ1_0 {
  uint8_t qs[48];  // 5 base-3 digits per byte
  uint8_t qh[4];   // 4 base-3 digits per byte
  uint16_t d;      // F16 scale
};
static_assert(sizeof(BlockTQ1_0) == 54);

// Digit n of a TQ1_0 byte, in {0, 1, 2}.
inline int TQ1Digit(uint8_t b, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  return (static_cast<uint8_t>(b * kPow3[n]) * 3) >> 8;
}

// Weights 32c .. 32c+32 (c = 0..7) of a TQ1_0 / TQ2_0 block as q - 1.
inline void UnpackTQ(TensorType t, const uint8_t* block, int c, int8_t* q) {
  for (int i = 0; i < 32; ++i) {
    const int k = 32 * c + i;
    int code;
    if (t == TensorType::TQ2_0) {
      code = (block[32 * (k / 128) + k % 32] >> (2 * ((k / 32) % 4))) & 3;
    } else if (k < 160) {
      code = TQ1Digit(block[k % 32], k / 32);
    } else if (k < 240) {
      code = TQ1Digit(block[32 + (k - 160) % 16], (k - 160) / 16);
    } else {
      code = TQ1Digit(block[48 + (k - 240) % 4], (k - 240) / 4);
    }
    q[i] = static_cast<int8_t>(code - 1);
  }
}

// Byte offset of the F16 scale in a TQ1_0 / TQ2_0 block.
constexpr int TQScaleOffset(TensorType t) { return t == TensorType::TQ2_0 ? 64 : 52; }

// Weights per block and bytes per block of a matrix type (1 and the element
// size for F32/F16/BF16); false for a type this build does not read.
constexpr bool TensorTypeLayout(TensorType t, int64_t* block_elems, int64_t* block_bytes) {
  switch (t) {
    case TensorType::F32: *block_elems = 1, *block_bytes = 4; return true;
    case TensorType::F16:
    case TensorType::BF16: *block_elems = 1, *block_bytes = 2; return true;
    case TensorType::Q4_0: *block_elems = 32, *block_bytes = sizeof(BlockQ4_0); return true;
    case TensorType::Q4_1: *block_elems = 32, *block_bytes = sizeof(BlockQ4_1); return true;
    case TensorType::Q5_0: *block_elems = 32, *block_bytes = sizeof(BlockQ5_0); return true;
    case TensorType::Q5_1: *block_elems = 32, *block_bytes = sizeof(BlockQ5_1); return true;
    case TensorType::Q8_0: *block_elems = 32, *block_bytes = sizeof(BlockQ8_0); return true;
    case TensorType::Q4_K: *block_elems = 256, *block_bytes = sizeof(BlockQ4_K); return true;
    case TensorType::Q5_K: *block_elems = 256, *block_bytes = sizeof(BlockQ5_K); return true;
    case TensorType::Q6_K: *block_elems = 256, *block_bytes = sizeof(BlockQ6_K); return true;
    case TensorType::IQ4_NL: *block_elems = 32, *block_bytes = sizeof(BlockIQ4_NL); return true;
    case TensorType::IQ4_XS: *block_elems = 256, *block_bytes = sizeof(BlockIQ4_XS); return true;
    case TensorType::MXFP4: *block_elems = 32, *block_bytes = sizeof(BlockMXFP4); return true;
    case TensorType::Q2_K: *block_elems = 256, *block_bytes = sizeof(BlockQ2_K); return true;
    case TensorType::Q3_K: *block_elems = 256, *block_bytes = sizeof(BlockQ3_K); return true;
    case TensorType::IQ2_XXS: *block_elems = 256, *block_bytes = sizeof(BlockIQ2_XXS); return true;
    case TensorType::IQ2_XS: *block_elems = 256, *block_bytes = sizeof(BlockIQ2_XS); return true;
    case TensorType::IQ3_XXS: *block_elems = 256, *block_bytes = sizeof(BlockIQ3_XXS); return true;
    case TensorType::IQ3_S: *block_elems = 256, *block_bytes = sizeof(BlockIQ3_S); return true;
    case TensorType::IQ2_S: *block_elems = 256, *block_bytes = sizeof(BlockIQ2_S); return true;
    case TensorType::IQ1_S: *block_elems = 256, *block_bytes = sizeof(BlockIQ1_S); return true;
    case TensorType::IQ1_M: *block_elems = 256, *block_bytes = sizeof(BlockIQ1_M); return true;
    case TensorType::TQ1_0: *block_elems = 256, *block_bytes = sizeof(BlockTQ1_0); return true;
    case TensorType::TQ2_0: *block_elems = 256, *block_bytes = sizeof(BlockTQ2_0); return true;
  }
  return false;
}

// Block-quantized (the matmul quantizes its activations to Q8 blocks first).
constexpr bool IsBlockQuantized(TensorType t) {
  return t != TensorType::F32 && t != TensorType::F16 && t != TensorType::BF16;
}

// Bytes of one row of `cols` weights of type `t`; 0 when `t` is unknown or
// `cols` is not a whole number of its blocks.
constexpr size_t TensorRowBytes(TensorType t, int64_t cols) {
  int64_t be = 0, bb = 0;
  if (!TensorTypeLayout(t, &be, &bb) || cols <= 0 || cols % be != 0) return 0;
  return static_cast<size_t>(cols / be * bb);
}

}  // namespace llm
