// Reading and writing rows of the paged KV pool in its element types
// (common.cuh: BF16, F16, Q8_0, Q4_0 or FP8 E4M3, K's and V's each their
// own). The attention kernels load K/V tiles through LoadKv8 / LoadKv1 from
// a side's KvPlane, which widen the stored values to bf16 on
// the way into shared memory (no dequantized copy of the cache exists); the
// KV-store kernel writes through StoreKvHalf / StoreKvRowQ8 / StoreKvRowQ4.
//
// Q8_0 is the CPU backend's rule (backend/kv_wire.h QuantizeRowQ8): one F32
// scale per head_dim row, scale = max|x| / 127, q = rint(x / scale) clamped
// to [-127, 127], NaN stored as 0. The widened value is bf16(scale * q).
// Q4_0 is the wire's GGUF block (backend/kv_wire.h QuantizeBlockQ4, the CPU
// pool's rule): the widened value is bf16(d * (q - 8)).
// FP8 E4M3 is the wire's block (backend/kv_wire.h QuantizeBlockFp8, util/
// fp8.h F32ToE4M3): the widened value is bf16(s * e4m3), the E4M3 byte
// widened to half exactly by cvt.rn.f16x2.e4m3x2 (sm_89+).
// Included by the .cu files only.
#pragma once

#include <cstring>

#include "device_util.cuh"

namespace llm::cuda::dev {

// F32 -> IEEE half bits, round to nearest even (inf/NaN kept, overflow to inf).
__device__ __forceinline__ uint32_t FloatToHalfBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504
  if (a >= 0x38800000u) {                       // normal half
    const uint32_t m = a - 0x38000000u;         // exponent rebased by 127 - 15, still 23-bit mantissa
    return sign | ((m + 0xfffu + ((m >> 13) & 1u)) >> 13);
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal: +-0
  // subnormal half: value = a's significand shifted right
  const uint32_t e = a >> 23, sig = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14 .. 24
  const uint32_t r = sig >> shift, rem = sig & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  return sign | (r + (rem > halfway || (rem == halfway && (r & 1u)) ? 1u : 0u));
}

__device__ __forceinline__ float HalfToFloat(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x400u) {
    bits = sign | ((em << 13) + 0x38000000u);
  } else {
    const float f = static_cast<float>(em) * 5.9604644775390625e-8f;  // em * 2^-24, exact
    memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float r;
  memcpy(&r, &bits, 4);
  return r;
}

// E4M3 byte b (OCP E4M3FN: bias 7, no infinities, S.1111.111 NaN) as IEEE
// half bits, exactly, by integer operations: the fallback below sm_89,
// where the backend refuses FP8 pools (it is compiled, never run).
__device__ __forceinline__ uint32_t E4m3ToHalfBitsSoft(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 8, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return sign | 0x7e00u;
  if (e != 0u) return sign | ((e + 8u) << 10) | (m << 7);  // rebias 7 -> 15
  if (m == 0u) return sign;
  const uint32_t sh = m >= 4u ? 0u : m >= 2u ? 1u : 2u;  // subnormal m * 2^-9: normalise
  return sign | ((8u - sh) << 10) | (((m << sh) & 3u) << 8);
}

// Two E4M3 bytes (bits 0..7 and 8..15 of v) as two IEEE halves (the first
// in the low 16 bits), exactly: cvt.rn.f16x2.e4m3x2 on sm_89+, whose
// emulated twin (emu_fp8.cpp) runs on the emulator.
__device__ __forceinline__ uint32_t E4m3x2ToHalf2(uint32_t v) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t r;
  const unsigned short in = static_cast<unsigned short>(v & 0xffffu);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(in));
  return r;
#elif defined(__CUDACC__)
  return E4m3ToHalfBitsSoft(v & 0xffu) | (E4m3ToHalfBitsSoft((v >> 8) & 0xffu) << 16);
#else
  return ::llm::emu::CvtF16x2E4m3x2(static_cast<uint16_t>(v & 0xffffu));
#endif
}

// f as an E4M3 byte: util/fp8.h F32ToE4M3's rule (nearest even,
// saturating to +-448, NaN to 0), bit for bit.
__device__ __forceinline__ uint32_t F32ToE4m3Bits(float f) {
  if (f != f) return 0u;
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448
  if (a < 0x3c800000u) {                      // below 2^-6: multiples of 2^-9
    float af;
    memcpy(&af, &a, 4);
    return sign | static_cast<uint32_t>(rintf(af * 512.0f));
  }
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  return sign | ((r >> 20) - (120u << 3));
}

// One side (K or V) of a layer view: where its tiles start, their size and
// element type. K and V may be of different types (PagedKv::elem_v), so the
// kernels read each side through its own plane.
struct KvPlane {
  const unsigned char* base;
  int64_t block_stride;
  int64_t tile_bytes;
  int32_t block_size;
  int32_t elem;
};
__device__ __forceinline__ KvPlane KPlane(const PagedKv& kv) {
  return KvPlane{kv.k, kv.block_stride, kv.tile_bytes, kv.block_size, kv.elem};
}
__device__ __forceinline__ KvPlane VPlane(const PagedKv& kv) {
  return KvPlane{kv.v, kv.block_stride, kv.TileBytesV(), kv.block_size, kv.ElemV()};
}

// Start of the tile holding position `pos` of kv head h in a plane.
__device__ __forceinline__ const unsigned char* KvTile(const KvPlane& kv, const int32_t* table, int32_t pos,
                                                       int32_t h) {
  return kv.base + static_cast<int64_t>(table[pos / kv.block_size]) * kv.block_stride + h * kv.tile_bytes;
}

// Dims [d0, d0 + 8) of position pos's row (kv head h) as 8 bf16. d0 and
// head_dim are multiples of 8.
__device__ __forceinline__ uint4 LoadKv8(const KvPlane& kv, const int32_t* table, int32_t pos, int32_t h,
                                         int32_t head_dim, int32_t d0) {
  const unsigned char* tile = KvTile(kv, table, pos, h);
  const int32_t r = pos % kv.block_size;
  if (kv.elem == kKvBf16) return *reinterpret_cast<const uint4*>(tile + (static_cast<int64_t>(r) * head_dim + d0) * 2);
  float x[8];
  if (kv.elem == kKvF16) {
    const uint4 w = *reinterpret_cast<const uint4*>(tile + (static_cast<int64_t>(r) * head_dim + d0) * 2);
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = HalfToFloat(u[i] & 0xffffu);
      x[2 * i + 1] = HalfToFloat(u[i] >> 16);
    }
  } else if (kv.elem == kKvQ4) {
    // [d0, d0 + 8) lies in one block (d0 % 8 == 0): bytes (d0 % 16) .. + 8 of
    // its nibbles, low nibbles for the block's first 16 values, high for the
    // rest. Blocks are 18 bytes, so 2-aligned: four 16-bit loads.
    const unsigned char* blk = tile + (static_cast<int64_t>(r) * (head_dim / 32) + d0 / 32) * kQ4BlockBytes;
    const float d = HalfToFloat(*reinterpret_cast<const uint16_t*>(blk));
    const uint16_t* nb = reinterpret_cast<const uint16_t*>(blk + 2 + (d0 & 15));
    const int32_t shift = (d0 & 31) >= 16 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = nb[i];
      x[2 * i] = d * static_cast<float>(static_cast<int32_t>((w >> shift) & 15u) - 8);
      x[2 * i + 1] = d * static_cast<float>(static_cast<int32_t>((w >> (8 + shift)) & 15u) - 8);
    }
  } else if (kv.elem == kKvFp8) {
    // [d0, d0 + 8) lies in one block: its F32 scale, then bytes (d0 % 32)
    // .. + 8. Blocks are 36 bytes, so 4-aligned: two 32-bit loads.
    const unsigned char* blk = tile + (static_cast<int64_t>(r) * (head_dim / 32) + d0 / 32) * kFp8BlockBytes;
    const float s = *reinterpret_cast<const float*>(blk);
    const uint32_t u[2] = {*reinterpret_cast<const uint32_t*>(blk + 4 + (d0 & 31)),
                           *reinterpret_cast<const uint32_t*>(blk + 8 + (d0 & 31))};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t h2 = E4m3x2ToHalf2(u[i / 2] >> (16 * (i % 2)));
      x[2 * i] = s * HalfToFloat(h2 & 0xffffu);
      x[2 * i + 1] = s * HalfToFloat(h2 >> 16);
    }
  } else {  // Q8_0: 4-aligned (tile bytes and the scales are multiples of 4, head_dim of 8)
    const float scale = *reinterpret_cast<const float*>(tile + 4 * r);
    const unsigned char* q = tile + 4 * static_cast<int64_t>(kv.block_size) + static_cast<int64_t>(r) * head_dim + d0;
    const uint32_t u[2] = {*reinterpret_cast<const uint32_t*>(q), *reinterpret_cast<const uint32_t*>(q + 4)};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      x[i] = scale * static_cast<float>(static_cast<int8_t>((u[i / 4] >> (8 * (i % 4))) & 0xffu));
  }
  return make_uint4(PackBf16x2(x[0], x[1]), PackBf16x2(x[2], x[3]), PackBf16x2(x[4], x[5]), PackBf16x2(x[6], x[7]));
}

// Dim d of position pos's row (kv head h) as bf16 (any head_dim), for the
// BF16, F16 and Q8_0 pools: a Q4_0 or FP8 pool's head_dim is a multiple
// of 32 (KvElemFits, checked by every launcher), so the kernels read it
// through LoadKv8 only. (A Q4_0 branch here, dead as it is, cost the decode kernel
// 408 bytes of register spills on sm_90, and a trap in its place 4.)
__device__ __forceinline__ bf16 LoadKv1(const KvPlane& kv, const int32_t* table, int32_t pos, int32_t h,
                                        int32_t head_dim, int32_t d) {
  const unsigned char* tile = KvTile(kv, table, pos, h);
  const int32_t r = pos % kv.block_size;
  const int64_t e = static_cast<int64_t>(r) * head_dim + d;
  if (kv.elem == kKvBf16) return reinterpret_cast<const bf16*>(tile)[e];
  if (kv.elem == kKvF16) return __float2bfloat16_rn(HalfToFloat(reinterpret_cast<const uint16_t*>(tile)[e]));
  float scale;  // byte copy: with head_dim % 4 != 0 a tile may start 2-aligned
  memcpy(&scale, tile + 4 * r, 4);
  return __float2bfloat16_rn(scale * static_cast<float>(reinterpret_cast<const int8_t*>(tile + 4 * kv.block_size)[e]));
}

// Writable tile of kv head h in a block: K's (side 0) or V's (side 1), each
// of its side's size.
__device__ __forceinline__ unsigned char* KvTileW(const PagedKv& kv, int32_t side, int32_t block, int32_t h) {
  return (side == 0 ? kv.k : kv.v) + static_cast<int64_t>(block) * kv.block_stride +
         h * (side == 0 ? kv.tile_bytes : kv.TileBytesV());
}

// Stores x as element d of row r of a BF16 or F16 tile.
__device__ __forceinline__ void StoreKvHalf(int32_t elem, unsigned char* tile, int32_t r, int32_t head_dim, int32_t d,
                                            float x) {
  const int64_t e = static_cast<int64_t>(r) * head_dim + d;
  if (elem == kKvBf16) reinterpret_cast<bf16*>(tile)[e] = __float2bfloat16_rn(x);
  else reinterpret_cast<uint16_t*>(tile)[e] = static_cast<uint16_t>(FloatToHalfBits(x));
}

// One warp quantizes row x[0 .. head_dim) into row r of a Q8_0 tile.
__device__ __forceinline__ void StoreKvRowQ8(unsigned char* tile, int32_t block_size, int32_t r, int32_t head_dim,
                                             const float* x, int32_t lane) {
  float amax = 0.0f;
  for (int32_t d = lane; d < head_dim; d += 32) amax = fmaxf(amax, fabsf(x[d]));
  amax = WarpMax(amax);
  const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  int8_t* q = reinterpret_cast<int8_t*>(tile + 4 * static_cast<int64_t>(block_size)) + static_cast<int64_t>(r) * head_dim;
  for (int32_t d = lane; d < head_dim; d += 32) {
    const float v = rintf(x[d] * inv);
    q[d] = static_cast<int8_t>(v >= 127.0f ? 127.0f : v <= -127.0f ? -127.0f : v == v ? v : 0.0f);
  }
  if (lane == 0) memcpy(tile + 4 * r, &scale, 4);  // byte copy: see LoadKv1
}

// One warp quantizes row x[0 .. head_dim) (head_dim % 32 == 0) into row r
// of a Q4_0 tile, one 32-value block per pass, lane j holding value j:
// QuantizeBlockQ4's rule exactly (d = the first value of largest magnitude
// / -8; q = min(15, trunc(x * (1/d) + 8.5)) with the product rounded on its
// own; NaN stored as q = 8), so a row is the bytes the CPU pool stores.
__device__ __forceinline__ void StoreKvRowQ4(unsigned char* tile, int32_t r, int32_t head_dim, const float* x,
                                             int32_t lane) {
  unsigned char* row = tile + static_cast<int64_t>(r) * (head_dim / 32) * kQ4BlockBytes;
  for (int32_t b = 0; b < head_dim / 32; ++b) {
    const float v = x[b * 32 + lane], a = fabsf(v);
    const float amax = WarpMax(a);  // NaN lanes drop out (fmaxf), as the CPU's `amax < |x|` skips them
    const uint32_t first = __ffs(__ballot_sync(0xffffffffu, a == amax)) - 1;  // lowest lane: the first on a tie
    const float vm = __shfl_sync(0xffffffffu, v, first & 31u);
    const float m = amax > 0.0f ? vm : 0.0f;  // an all-zero (or all-NaN) block: the CPU's m = +0
    const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const float t = __fmul_rn(v, id) + 8.5f;  // __fmul_rn: never fused into the add
    const uint32_t q = static_cast<uint32_t>(t >= 15.0f ? 15.0f : t >= 0.0f ? t : t == t ? 0.0f : 8.0f);
    const uint32_t hi = __shfl_down_sync(0xffffffffu, q, 16);
    unsigned char* blk = row + b * kQ4BlockBytes;
    if (lane < 16) blk[2 + lane] = static_cast<unsigned char>(q | (hi << 4));
    if (lane == 0) *reinterpret_cast<uint16_t*>(blk) = static_cast<uint16_t>(FloatToHalfBits(d));
  }
}

// One warp quantizes row x[0 .. head_dim) (head_dim % 32 == 0) into row r
// of an FP8 tile, one 32-value block per pass, lane j holding value j:
// QuantizeBlockFp8's rule exactly (s = max|x| / 448 over the finite
// values, e4m3 = F32ToE4m3Bits(x * (1/s)) with the product rounded on its
// own), so a row is the bytes the host's quantizer makes.
__device__ __forceinline__ void StoreKvRowFp8(unsigned char* tile, int32_t r, int32_t head_dim, const float* x,
                                              int32_t lane) {
  unsigned char* row = tile + static_cast<int64_t>(r) * (head_dim / 32) * kFp8BlockBytes;
  for (int32_t b = 0; b < head_dim / 32; ++b) {
    const float v = x[b * 32 + lane];
    const float amax = WarpMax(isfinite(v) ? fabsf(v) : 0.0f);
    const float s = amax / 448.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
    unsigned char* blk = row + b * kFp8BlockBytes;
    blk[4 + lane] = static_cast<unsigned char>(F32ToE4m3Bits(__fmul_rn(v, inv)));
    if (lane == 0) memcpy(blk, &s, 4);
  }
}

// x[0 .. len) <- H_n x chunk by chunk, by one warp, in place in shared
// memory (n a power of two dividing len, at most 256; n <= 1 leaves x): the
// butterflies of backend/kv_rotation.h HadamardRotate, then the scale
// 1/sqrt(n) (applied as the last stage's values are written: the same two
// roundings), so the rotated values are the CPU's bit for bit. Each stage
// reads its pairs into registers and writes them after a __syncwarp, so no
// lane overwrites a value another lane reads in the same interval.
__device__ __forceinline__ void HadamardRowWarp(float* x, int32_t len, int32_t n, int32_t lane) {
  if (n <= 1) return;
  constexpr int kMaxPairs = 4;  // n / 2 / 32 for n = 256
  const float scale = 1.0f / sqrtf(static_cast<float>(n));
  for (int32_t c = 0; c < len; c += n) {
    float* v = x + c;
    for (int32_t h = 1; h < n; h *= 2) {
      const bool last = 2 * h == n;
      float a[kMaxPairs] = {}, b[kMaxPairs] = {};
#pragma unroll
      for (int k = 0; k < kMaxPairs; ++k) {
        const int32_t p = lane + 32 * k;
        if (p < n / 2) {
          const int32_t i = (p / h) * 2 * h + p % h;
          a[k] = v[i];
          b[k] = v[i + h];
        }
      }
      __syncwarp();
#pragma unroll
      for (int k = 0; k < kMaxPairs; ++k) {
        const int32_t p = lane + 32 * k;
        if (p < n / 2) {
          const int32_t i = (p / h) * 2 * h + p % h;
          const float s = a[k] + b[k], d = a[k] - b[k];
          v[i] = last ? s * scale : s;
          v[i + h] = last ? d * scale : d;
        }
      }
      __syncwarp();
    }
  }
}

}  // namespace llm::cuda::dev
