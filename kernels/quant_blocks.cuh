// Device decoding of GGUF block-quantized weights, 32 at a time (one
// "chunk": a whole Q4_0..Q8_0, IQ4_NL or MXFP4 block, or one of the 8
// sub-blocks of a K-quant (Q2_K..Q6_K), IQ4_XS or IQ2/IQ3 lattice
// super-block). Included by the .cu files only.
//
// The arithmetic is the CPU backend's reference dequantization
// (backend/cpu/quant_generic.cpp, DequantizeBlocks) operation for operation:
// d * q, d * q + m, (d * sc) * q - (dmin * m), with the products rounded
// separately (__fmul_rn: nvcc would otherwise contract d * q + m into one
// FMA, which rounds differently), so a dequantized weight is the same float
// on both backends. Blocks are read byte by byte: most block sizes (18, 22,
// 34, 210 bytes) leave 16- and 32-bit fields unaligned.
#pragma once

#include <cstring>

#include "device_util.cuh"
#include "quant_matrix.cuh"
#include "quant_tables.cuh"

namespace llm::cuda::dev {

__device__ __forceinline__ float HalfBitsToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);  // inf / nan
  } else if (em >= 0x400u) {
    bits = sign | ((em << 13) + 0x38000000u);  // normal: exponent rebased by 127 - 15
  } else {
    const float f = static_cast<float>(em) * 5.9604644775390625e-8f;  // subnormal: em * 2^-24, exact
    memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float r;
  memcpy(&r, &bits, 4);
  return r;
}

__device__ __forceinline__ float LoadHalf(const uint8_t* p) {
  return HalfBitsToFloat(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8);
}

__device__ __forceinline__ uint32_t LoadU32Bytes(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// Byte offset of chunk c's block in a row of `type`.
__device__ __forceinline__ int64_t ChunkBlockOffset(uint32_t type, int64_t c) {
  switch (type) {
    case kQuantQ4_0: return c * 18;
    case kQuantQ4_1: return c * 20;
    case kQuantQ5_0: return c * 22;
    case kQuantQ5_1: return c * 24;
    case kQuantQ8_0: return c * 34;
    case kQuantQ4_K: return (c >> 3) * 144;
    case kQuantQ5_K: return (c >> 3) * 176;
    case kQuantQ2_K: return (c >> 3) * 84;
    case kQuantQ3_K: return (c >> 3) * 110;
    case kQuantIQ4_NL: return c * 18;
    case kQuantIQ4_XS: return (c >> 3) * 136;
    case kQuantMXFP4: return c * 17;
    case kQuantIQ2_XXS: return (c >> 3) * 66;
    case kQuantIQ2_XS: return (c >> 3) * 74;
    case kQuantIQ3_XXS: return (c >> 3) * 98;
    case kQuantIQ3_S: return (c >> 3) * 110;
    case kQuantIQ2_S: return (c >> 3) * 82;
    case kQuantIQ1_S: return (c >> 3) * 50;
    case kQuantIQ1_M: return (c >> 3) * 56;
    case kQuantTQ1_0: return (c >> 3) * 54;
    case kQuantTQ2_0: return (c >> 3) * 66;
    default: return (c >> 3) * 210;  // Q6_K
  }
}

// The lattice (IQ1/IQ2/IQ3) and ternary (TQ) types' decoding: apart from
// DecodeChunk's other cases, so that a kernel instantiated without them
// (DecodeChunk<false>) keeps the register count the older types need (64
// against 141 for all cases together, sm_90).
__host__ __device__ __forceinline__ bool IsLatticeType(uint32_t type) {
  return type == kQuantIQ2_XXS || type == kQuantIQ2_XS || type == kQuantIQ2_S || type == kQuantIQ3_XXS ||
         type == kQuantIQ3_S || type == kQuantIQ1_S || type == kQuantIQ1_M || type == kQuantTQ1_0 ||
         type == kQuantTQ2_0;
}

__device__ __forceinline__ void DecodeLatticeChunk(uint32_t type, const uint8_t* b, int64_t c, float (&v)[32]) {
  switch (type) {
    case kQuantIQ2_XXS:
    case kQuantIQ2_XS:
    case kQuantIQ2_S:
    case kQuantIQ3_XXS:
    case kQuantIQ3_S:
    case kQuantIQ1_S:
    case kQuantIQ1_M: {  // sub-block j = c % 8 (model/tensor_type.h, IQLatticePoints)
      const int j = static_cast<int>(c & 7);
      uint64_t point[4];
      uint32_t sign[4];  // bit k: weight 8l + k negative
      int mul[2];
      float unit = 0.125f;
      if (type == kQuantIQ2_XXS) {  // 4 grid index bytes, then a u32 of 4 sign indices and the scale
        const uint8_t* p = b + 2 + 8 * j;
        const uint32_t aux = LoadU32Bytes(p + 4);
        for (int l = 0; l < 4; ++l) point[l] = kIQ2XXSGrid[p[l]], sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127u];
        mul[0] = mul[1] = 2 * static_cast<int>(aux >> 28) + 1;
      } else if (type == kQuantIQ2_XS) {  // per 8 weights a u16: 9-bit grid index, 7-bit sign index
        const uint8_t* p = b + 2 + 8 * j;
        for (int l = 0; l < 4; ++l) {
          const uint32_t v = static_cast<uint32_t>(p[2 * l]) | static_cast<uint32_t>(p[2 * l + 1]) << 8;
          point[l] = kIQ2XSGrid[v & 511u], sign[l] = kIQ2Signs[v >> 9];
        }
        const int sc = b[66 + j];
        mul[0] = 2 * (sc & 0xF) + 1;
        mul[1] = 2 * (sc >> 4) + 1;
      } else if (type == kQuantIQ2_S) {  // index bytes at 2, sign bytes at 34, 2 high index bits each in qh (66)
        const uint8_t qh = b[66 + j];
        for (int l = 0; l < 4; ++l) {
          point[l] = kIQ2SGrid[b[2 + 4 * j + l] | ((qh >> (2 * l)) & 3) << 8];
          sign[l] = b[34 + 4 * j + l];
        }
        const int sc = b[74 + j];
        mul[0] = 2 * (sc & 0xF) + 1;
        mul[1] = 2 * (sc >> 4) + 1;
      } else if (type == kQuantIQ3_XXS) {  // 8 grid index bytes of 4 weights; the u32 at 66 + 4j: signs and scale
        const uint8_t* idx = b + 2 + 8 * j;
        const uint32_t aux = LoadU32Bytes(b + 66 + 4 * j);
        for (int l = 0; l < 4; ++l) {
          point[l] = kIQ3XXSGrid[idx[2 * l]] | static_cast<uint64_t>(kIQ3XXSGrid[idx[2 * l + 1]]) << 32;
          sign[l] = kIQ2Signs[(aux >> (7 * l)) & 127u];
        }
        mul[0] = mul[1] = 2 * static_cast<int>(aux >> 28) + 1;
        unit = 0.25f;
      } else if (type == kQuantIQ1_S || type == kQuantIQ1_M) {  // values 8g +- 1 of kIQ1SGrid's g in {-1, 0, 1}
        int delta[4];
        if (type == kQuantIQ1_S) {  // index bytes at 2; u16 qh at 34 + 2j: 3 high bits each, scale, delta sign
          const uint32_t qh = static_cast<uint32_t>(b[34 + 2 * j]) | static_cast<uint32_t>(b[35 + 2 * j]) << 8;
          for (int l = 0; l < 4; ++l) point[l] = kIQ1SGrid[b[2 + 4 * j + l] | ((qh >> (3 * l)) & 7u) << 8];
          for (int l = 0; l < 4; ++l) delta[l] = qh & 0x8000u ? -1 : 1;
          mul[0] = mul[1] = 2 * static_cast<int>((qh >> 12) & 7u) + 1;
        } else {  // index bytes at 0, per group a nibble of qh (32): 3 high bits, delta sign; scales at 48
          for (int l = 0; l < 4; ++l) {
            const int nib = (b[32 + 2 * j + l / 2] >> (4 * (l & 1))) & 0xF;
            point[l] = kIQ1SGrid[b[4 * j + l] | (nib & 7) << 8];
            delta[l] = nib & 8 ? -1 : 1;
          }
          const uint32_t sc = static_cast<uint32_t>(b[48 + 2 * (j / 2)]) | static_cast<uint32_t>(b[49 + 2 * (j / 2)]) << 8;
          mul[0] = 2 * static_cast<int>((sc >> (6 * (j & 1))) & 7u) + 1;
          mul[1] = 2 * static_cast<int>((sc >> (6 * (j & 1) + 3)) & 7u) + 1;
        }
        for (int l = 0; l < 4; ++l) {  // as magnitudes and signs
          uint64_t m = 0;
          uint32_t s = 0;
          for (int k = 0; k < 8; ++k) {
            const int val = 8 * static_cast<int8_t>((point[l] >> (8 * k)) & 0xFFu) + delta[l];
            m |= static_cast<uint64_t>(val < 0 ? -val : val) << (8 * k);
            s |= static_cast<uint32_t>(val < 0) << k;
          }
          point[l] = m, sign[l] = s;
        }
      } else {  // IQ3_S: index bytes at 2 with a ninth bit in qh (66), sign bytes at 74, scale nibbles at 106
        const uint8_t qh = b[66 + j];
        for (int l = 0; l < 4; ++l) {
          const int k = 2 * l;
          const int i0 = b[2 + 8 * j + k] | ((qh >> k) & 1) << 8, i1 = b[3 + 8 * j + k] | ((qh >> (k + 1)) & 1) << 8;
          point[l] = kIQ3SGrid[i0] | static_cast<uint64_t>(kIQ3SGrid[i1]) << 32;
          sign[l] = b[74 + 4 * j + l];
        }
        mul[0] = mul[1] = 2 * ((b[106 + j / 2] >> (4 * (j & 1))) & 0xF) + 1;
        unit = 1.0f;
      }
      float d;
      if (type == kQuantIQ1_M) {  // the F16 d from the top nibbles of the 4 u16 scales at 48
        const uint32_t s0 = b[49] >> 4, s1 = b[51] >> 4, s2 = b[53] >> 4, s3 = b[55] >> 4;
        d = HalfBitsToFloat(s0 | s1 << 4 | s2 << 8 | s3 << 12);
      } else {
        d = LoadHalf(b);
      }
      const float du = __fmul_rn(d, unit);
      for (int l = 0; l < 4; ++l) {
        const uint32_t bits = sign[l];
        for (int k = 0; k < 8; ++k) {
          const int m = static_cast<int>((point[l] >> (8 * k)) & 0xFFu);
          const int q = (bits >> k) & 1u ? -m : m;
          v[8 * l + k] = __fmul_rn(du, static_cast<float>(mul[(8 * l + k) >> 4] * q));
        }
      }
      return;
    }
    case kQuantTQ2_0: {  // chunk j = c % 8: bits 2(j % 4) of qs[32 (j / 4) ..]; d at 64 (model/tensor_type.h)
      const int j = static_cast<int>(c & 7);
      const float d = LoadHalf(b + 64);
      const uint8_t* qs = b + 32 * (j >> 2);
      const int shift = 2 * (j & 3);
      for (int l = 0; l < 32; ++l) v[l] = __fmul_rn(d, static_cast<float>(((qs[l] >> shift) & 3) - 1));
      return;
    }
    case kQuantTQ1_0: {  // base-3 digits (model/tensor_type.h, UnpackTQ); d at 52
      const int j = static_cast<int>(c & 7);
      const float d = LoadHalf(b + 52);
      const uint32_t pow3[5] = {1, 3, 9, 27, 81};
      for (int l = 0; l < 32; ++l) {
        const int k = 32 * j + l;
        uint32_t byte, n;
        if (k < 160) {
          byte = b[k & 31], n = k >> 5;
        } else if (k < 240) {
          byte = b[32 + (k - 160) % 16], n = (k - 160) / 16;
        } else {
          byte = b[48 + (k - 240) % 4], n = (k - 240) / 4;
        }
        const int code = static_cast<int>((((byte * pow3[n]) & 0xFFu) * 3u) >> 8);
        v[l] = __fmul_rn(d, static_cast<float>(code - 1));
      }
      return;
    }
  }
}

// True when some part of w is of a lattice or ternary type: its kernels
// need DecodeChunk<true>.
inline bool QuantMatrixHasLattice(const QuantMatrix& w) {
  for (int32_t p = 0; p < w.n_parts && p < kMaxQuantParts; ++p)
    if (IsLatticeType(w.part[p].type)) return true;
  return false;
}

// Weights 32c .. 32c+32 of a row of `type` starting at `row`, into v.
// kLattice false: a kernel for matrices without lattice or ternary parts
// (QuantMatrixHasLattice), which leaves their decoding out.
template <bool kLattice = true>
__device__ __forceinline__ void DecodeChunk(uint32_t type, const uint8_t* row, int64_t c, float (&v)[32]) {
  const uint8_t* b = row + ChunkBlockOffset(type, c);
  if constexpr (kLattice) {
    if (IsLatticeType(type)) return DecodeLatticeChunk(type, b, c, v);
  }
  switch (type) {
    case kQuantQ8_0: {
      const float d = LoadHalf(b);
      for (int i = 0; i < 32; ++i) v[i] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(b[2 + i])));
      return;
    }
    case kQuantQ4_0:
    case kQuantQ4_1: {
      // byte j: weight j in the low nibble, weight j + 16 in the high one
      const bool has_min = type == kQuantQ4_1;
      const float d = LoadHalf(b), m = has_min ? LoadHalf(b + 2) : 0.0f;
      const uint8_t* qs = b + (has_min ? 4 : 2);
      const int off = has_min ? 0 : 8;
      for (int j = 0; j < 16; ++j) {
        const float q0 = static_cast<float>((qs[j] & 0xF) - off), q1 = static_cast<float>((qs[j] >> 4) - off);
        v[j] = has_min ? __fmul_rn(d, q0) + m : __fmul_rn(d, q0);
        v[j + 16] = has_min ? __fmul_rn(d, q1) + m : __fmul_rn(d, q1);
      }
      return;
    }
    case kQuantQ5_0:
    case kQuantQ5_1: {
      // fifth bit of weight j: bit j of qh (little-endian u32)
      const bool has_min = type == kQuantQ5_1;
      const float d = LoadHalf(b), m = has_min ? LoadHalf(b + 2) : 0.0f;
      const uint32_t qh = LoadU32Bytes(b + (has_min ? 4 : 2));
      const uint8_t* qs = b + (has_min ? 8 : 6);
      const int off = has_min ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        const int lo = (qs[j] & 0xF) | static_cast<int>((qh >> j) & 1u) << 4;
        const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        const float q0 = static_cast<float>(lo - off), q1 = static_cast<float>(hi - off);
        v[j] = has_min ? __fmul_rn(d, q0) + m : __fmul_rn(d, q0);
        v[j + 16] = has_min ? __fmul_rn(d, q1) + m : __fmul_rn(d, q1);
      }
      return;
    }
    case kQuantQ4_K:
    case kQuantQ5_K: {
      // sub-block j = c % 8: the low (j even) or high nibbles of qs[32 (j/2) ..]
      const bool q5 = type == kQuantQ5_K;
      const int j = static_cast<int>(c & 7);
      const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
      const uint8_t* sc = b + 4;
      int s, mn;
      if (j < 4) {
        s = sc[j] & 63;
        mn = sc[j + 4] & 63;
      } else {
        s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      }
      const float ds = __fmul_rn(d, static_cast<float>(s)), dm = __fmul_rn(dmin, static_cast<float>(mn));
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (q5 ? 48 : 16) + 32 * (j >> 1);
      const int shift = (j & 1) * 4;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[l] >> shift) & 0xF;
        if (q5) q |= ((qh[l] >> j) & 1) << 4;
        v[l] = __fmul_rn(ds, static_cast<float>(q)) - dm;
      }
      return;
    }
    case kQuantQ3_K: {  // sub-block j = c % 8: 2-bit fields at bits 2(j % 4) of qs[32 (j / 4) ..], high bit j of hmask
      const int j = static_cast<int>(c & 7);
      const float d = LoadHalf(b + 108);
      const uint8_t* sc = b + 96;
      const uint8_t* qs = b + 32 + 32 * (j >> 2);
      const int shift = 2 * (j & 3);
      float dl[2];
      for (int h = 0; h < 2; ++h) {  // groups 2j, 2j + 1: 6-bit scales (model/tensor_type.h, Q3KScale)
        const int i = 2 * j + h;
        const int lo = (i < 8 ? sc[i] : sc[i - 8] >> 4) & 0xF, hi = (sc[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        dl[h] = __fmul_rn(d, static_cast<float>((lo | hi << 4) - 32));
      }
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 3) - ((b[l] >> j) & 1 ? 0 : 4);
        v[l] = __fmul_rn(dl[l >> 4], static_cast<float>(q));
      }
      return;
    }
    case kQuantQ2_K: {  // sub-block j = c % 8: groups 2j, 2j + 1 with 4-bit scale and minimum each
      const int j = static_cast<int>(c & 7);
      const float d = LoadHalf(b + 80), dmin = LoadHalf(b + 82);
      const uint8_t* qs = b + 16 + 32 * (j >> 2);
      const int shift = 2 * (j & 3);
      float dl[2], ml[2];
      for (int h = 0; h < 2; ++h) {
        dl[h] = __fmul_rn(d, static_cast<float>(b[2 * j + h] & 0xF));
        ml[h] = __fmul_rn(dmin, static_cast<float>(b[2 * j + h] >> 4));
      }
      for (int l = 0; l < 32; ++l)
        v[l] = __fmul_rn(dl[l >> 4], static_cast<float>((qs[l] >> shift) & 3)) - ml[l >> 4];
      return;
    }
    case kQuantIQ4_NL: {  // byte j: index of weight j low, of weight j + 16 high
      const float d = LoadHalf(b);
      for (int j = 0; j < 16; ++j) {
        v[j] = __fmul_rn(d, static_cast<float>(kIQ4NLValues[b[2 + j] & 0xF]));
        v[j + 16] = __fmul_rn(d, static_cast<float>(kIQ4NLValues[b[2 + j] >> 4]));
      }
      return;
    }
    case kQuantMXFP4: {  // E8M0 exponent e: scale 2^(e - 128) (model/tensor_type.h, MXFP4Scale); codes as IQ4_NL's
      const uint32_t e = b[0];
      const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
      float d;
      memcpy(&d, &bits, 4);
      for (int j = 0; j < 16; ++j) {
        v[j] = __fmul_rn(d, static_cast<float>(kE2M1Values[b[1 + j] & 0xF]));
        v[j + 16] = __fmul_rn(d, static_cast<float>(kE2M1Values[b[1 + j] >> 4]));
      }
      return;
    }
    case kQuantIQ4_XS: {  // sub-block j = c % 8: scale bits in scales_l[j / 2], scales_h; indices at 8 + 16j
      const int j = static_cast<int>(c & 7);
      const uint32_t sh = static_cast<uint32_t>(b[2]) | static_cast<uint32_t>(b[3]) << 8;
      const int ls = (((b[4 + j / 2] >> (4 * (j & 1))) & 0xF) | static_cast<int>((sh >> (2 * j)) & 3u) << 4) - 32;
      const float dl = __fmul_rn(LoadHalf(b), static_cast<float>(ls));
      const uint8_t* qs = b + 8 + 16 * j;
      for (int l = 0; l < 16; ++l) {
        v[l] = __fmul_rn(dl, static_cast<float>(kIQ4NLValues[qs[l] & 0xF]));
        v[l + 16] = __fmul_rn(dl, static_cast<float>(kIQ4NLValues[qs[l] >> 4]));
      }
      return;
    }
    default: {  // Q6_K: half h = (c % 8) / 4, quarter k = c % 4 (model/tensor_type.h, UnpackQ6K)
      const int h = static_cast<int>((c & 7) >> 2), k = static_cast<int>(c & 3);
      const float d = LoadHalf(b + 208);
      const uint8_t* ql = b + 64 * h + (k & 1) * 32;
      const uint8_t* qh = b + 128 + 32 * h;
      const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * k;
      const int shift = k < 2 ? 0 : 4;
      const float ds0 = __fmul_rn(d, static_cast<float>(scales[0])), ds1 = __fmul_rn(d, static_cast<float>(scales[1]));
      for (int l = 0; l < 32; ++l) {
        const int q = (((ql[l] >> shift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
        v[l] = __fmul_rn(l < 16 ? ds0 : ds1, static_cast<float>(q));
      }
      return;
    }
  }
}

// Part and row within it of stacked row r of w (r < w.rows).
__device__ __forceinline__ const uint8_t* QuantRow(const QuantMatrix& w, int64_t r, uint32_t* type) {
  int p = 0;
  while (p + 1 < w.n_parts && r >= w.part[p].rows) r -= w.part[p++].rows;
  *type = w.part[p].type;
  return static_cast<const uint8_t*>(w.part[p].data) + r * w.part[p].row_bytes;
}

}  // namespace llm::cuda::dev
