// AVX2 block-quantized kernels (quant.h). Compiled for AVX2/FMA/F16C by a
// target pragma (like kernels_avx2.cpp) and called only after the CPU check
// in BestKernels().
//
// Each 32-weight (sub-)block is unpacked to 32 int8 lanes in weight order,
// then
//   unsigned weights (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K): maddubs(w, x)
//   signed weights (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4,
//                   TQ1_0, TQ2_0):
//                                              maddubs(|w|, sign(x, w))
// gives 16 exact int16 pair sums (|w| <= 63 or 127 · |x| <= 127 · 2 fits), a
// madd widens them to 8 int32 lanes, and one FMA adds them, scaled by
// d_w · d_x, to a float accumulator (per group of 8 blocks: see "groups"
// below). The matmul meets each unpacked weight group with several tokens, so
// a block is unpacked once per 4 tokens, not per token. The lattice types
// (IQ1_S .. IQ3_S) have their own matmul, decoded 8 rows at a time:
// quant_lattice_avx2.cpp.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_pack.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace llm::cpu {
namespace avx2 {
namespace {

inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i Combine(__m128i lo, __m128i hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

// 16 nibble bytes -> 32 bytes: low nibbles (weights 0..15), then high (16..31).
inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(Combine(b, _mm_srli_epi16(b, 4)), _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0xFF where bit i of `bits` is set.
inline __m256i BitsToBytes(uint32_t bits) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit i of byte i
  return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

inline __m256i LoadX(const BlockQ8Act& x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)); }

inline float HSum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---------------------------------------------------------------- groups
//
// The matmul works on groups of 8 sub-blocks of 32 weights (one K-quant
// super-block, or 8 consecutive 32-weight blocks). A format's PrepareGroup
// unpacks a group of one weight row once into a Group: the int8 quants of
// each sub-block, the int16 multipliers of the pair sums (ones, or Q6_K's
// 16-weight scales), and, one lane per sub-block, its float scale and (for
// the formats with a minimum) the coefficient of the activation sum s_x. The
// tile loop then meets the group with several tokens. For one token it
// computes the 8 sub-blocks' exact integer dot products, folds them into one
// vector with lane g = sub-block g (integer adds: exact in any order), and
// does three vector float ops per group instead of per sub-block:
//
//   acc  = fma(scale_w · d_x, float(isum), acc)     lane g: sub-blocks g, g+8, ..
//   accm = fma(min_w, s_x, accm)                     [formats with a minimum]
//   y    = hsum(acc) + hsum(accm)
//
// The same operations in the same order for an output whatever the tile it
// falls in, so results do not depend on the thread split or the batch.

struct Group {
  __m256i q[8];    // unsigned formats: the quants; signed: |w|
  __m256i sg[8];   // signed formats: w (the sign source of sign(x, w))
  __m256i mul[8];  // Q6_K, Q3_K, Q2_K: int16 multipliers of the pair sums
  __m256i mmul[8]; // Q2_K: int16 multipliers (16-weight minimums) of the activations' pair sums
  __m256 scale;    // lane g: scale of sub-block g (0 past the row's end)
  __m256 min;      // lane g: coefficient of s_x (formats with a minimum);
                   // Q2_K: of d_x times the minimums' integer sum
};

// Q2_K's minimums change every 16 weights, finer than the activations' sum
// s_x (per 32): its format sets kMin16 and the tile meets them with the
// activations' own integer pair sums instead.
template <class F>
constexpr bool Min16() {
  if constexpr (requires { F::kMin16; }) {
    return F::kMin16;
  } else {
    return false;
  }
}

inline void SetSigned(__m256i w, __m256i* q, __m256i* sg) {
  *q = _mm256_sign_epi8(w, w);
  *sg = w;
}

// v with 16-bit lane g set to h (g a constant after unrolling).
inline __m128i InsertHalf(__m128i v, uint16_t h, int g) {
  switch (g) {
    case 0: return _mm_insert_epi16(v, h, 0);
    case 1: return _mm_insert_epi16(v, h, 1);
    case 2: return _mm_insert_epi16(v, h, 2);
    case 3: return _mm_insert_epi16(v, h, 3);
    case 4: return _mm_insert_epi16(v, h, 4);
    case 5: return _mm_insert_epi16(v, h, 5);
    case 6: return _mm_insert_epi16(v, h, 6);
    default: return _mm_insert_epi16(v, h, 7);
  }
}

// The 32-weight formats: up to 8 blocks per group; Unpack(block) gives the
// int8 lanes (signed or not, as kSigned says).
template <class B, bool kSignedT, bool kMinT, class Unpack>
struct Fmt32 {
  static constexpr bool kSigned = kSignedT, kMin = kMinT, kMul = false;
  static constexpr int64_t kBlocksPerGroup = 8;
  // n: blocks of this group (8, or fewer at the end of a row).
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int n, Group* o) {
    const B* b = reinterpret_cast<const B*>(row) + 8 * group;
    __m128i d = _mm_setzero_si128(), m = _mm_setzero_si128();
    for (int g = 0; g < 8; ++g) {
      if (kFull || g < n) {
        const __m256i w = Unpack()(b[g]);
        if constexpr (kSigned) {
          SetSigned(w, &o->q[g], &o->sg[g]);
        } else {
          o->q[g] = w;
        }
        d = InsertHalf(d, b[g].d, g);
        if constexpr (kMin) m = InsertHalf(m, b[g].m, g);
      }
    }
    o->scale = _mm256_cvtph_ps(d);
    if constexpr (kMin) o->min = _mm256_cvtph_ps(m);
  }
};

struct UnpackQ4_0 {
  __m256i operator()(const BlockQ4_0& b) const { return _mm256_sub_epi8(Nibbles(b.qs), _mm256_set1_epi8(8)); }
};
struct UnpackQ4_1 {
  __m256i operator()(const BlockQ4_1& b) const { return Nibbles(b.qs); }
};
// q - 16 = nibble when the fifth bit is set, else nibble | 0xF0 (nibble - 16 as int8).
struct UnpackQ5_0 {
  __m256i operator()(const BlockQ5_0& b) const {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const __m256i hi = _mm256_andnot_si256(BitsToBytes(qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(Nibbles(b.qs), hi);
  }
};
struct UnpackQ5_1 {
  __m256i operator()(const BlockQ5_1& b) const {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    return _mm256_or_si256(Nibbles(b.qs), _mm256_and_si256(BitsToBytes(qh), _mm256_set1_epi8(0x10)));
  }
};
struct UnpackQ8_0 {
  __m256i operator()(const BlockQ8_0& b) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
};

// IQ4_NL / IQ4_XS / MXFP4: the indices looked up in a 16-entry codebook
// (kIQ4NLValues, kE2M1Values) with one shuffle.
inline __m256i IQ4Values(const uint8_t* qs, const int8_t* codebook = kIQ4NLValues) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
  return _mm256_shuffle_epi8(table, Nibbles(qs));
}
struct UnpackIQ4_NL {
  __m256i operator()(const BlockIQ4_NL& b) const { return IQ4Values(b.qs); }
};

using Q4_0 = Fmt32<BlockQ4_0, true, false, UnpackQ4_0>;
using Q4_1 = Fmt32<BlockQ4_1, false, true, UnpackQ4_1>;
using Q5_0 = Fmt32<BlockQ5_0, true, false, UnpackQ5_0>;
using Q5_1 = Fmt32<BlockQ5_1, false, true, UnpackQ5_1>;
using Q8_0 = Fmt32<BlockQ8_0, true, false, UnpackQ8_0>;
using IQ4NL = Fmt32<BlockIQ4_NL, true, false, UnpackIQ4_NL>;

// MXFP4: up to 8 blocks of 32 per group, each with its E8M0 scale as an F32
// lane and its codes looked up in kE2M1Values.
struct MXFP4 {
  static constexpr bool kSigned = true, kMin = false, kMul = false;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int n, Group* o) {
    const BlockMXFP4* b = reinterpret_cast<const BlockMXFP4*>(row) + 8 * group;
    alignas(32) float sc[8] = {};
    for (int g = 0; g < 8; ++g) {
      if (kFull || g < n) {
        sc[g] = MXFP4Scale(b[g].e);
        SetSigned(IQ4Values(b[g].qs, kE2M1Values), &o->q[g], &o->sg[g]);
      }
    }
    o->scale = _mm256_load_ps(sc);
  }
};

// IQ4_XS: a group is one super-block; sub-block j's float scale is
// d · (ls_j - 32) (exact), its quants the looked-up int8 values.
struct IQ4XS {
  static constexpr bool kSigned = true, kMin = false, kMul = false;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    const auto& b = reinterpret_cast<const BlockIQ4_XS*>(row)[group];
    alignas(32) int32_t ls[8];
    for (int j = 0; j < 8; ++j) ls[j] = IQ4XSScale(b, j);
    o->scale = _mm256_mul_ps(_mm256_set1_ps(H2F(b.d)),
                             _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ls))));
    for (int j = 0; j < 8; ++j) SetSigned(IQ4Values(b.qs + 16 * j), &o->q[j], &o->sg[j]);
  }
};

// TQ1_0, TQ2_0 (tensor_type.h): a group is one block, its codes minus 1 the
// signed quants, d the float scale of every sub-block.
template <TensorType kType>
struct TQ {
  static constexpr bool kSigned = true, kMin = false, kMul = false;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    int64_t be = 0, bb = 0;
    TensorTypeLayout(kType, &be, &bb);
    const uint8_t* b = row + group * bb;
    alignas(32) int8_t q[32];
    for (int c = 0; c < 8; ++c) {
      UnpackTQ(kType, b, c, q);
      SetSigned(_mm256_load_si256(reinterpret_cast<const __m256i*>(q)), &o->q[c], &o->sg[c]);
    }
    constexpr int off = TQScaleOffset(kType);
    o->scale = _mm256_set1_ps(H2F(static_cast<uint16_t>(b[off] | b[off + 1] << 8)));
  }
};

inline void ScalesMinsK4(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

inline __m256 BytesToFloats(const uint8_t* v) {  // 8 bytes -> 8 floats
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v))));
}

// Q4_K / Q5_K: a group is one super-block; sub-block j meets activation
// block 8i + j; its weight is d·sc_j·q - dmin·m_j.
template <bool kQ5>
struct QK {
  static constexpr bool kSigned = false, kMin = true, kMul = false;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    const uint8_t* blk = row + group * (kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    alignas(8) uint8_t sc[8], m[8];
    ScalesMinsK4(blk + 4, sc, m);
    o->scale = _mm256_mul_ps(_mm256_set1_ps(H2F(dh)), BytesToFloats(sc));
    o->min = _mm256_mul_ps(_mm256_set1_ps(-H2F(mh)), BytesToFloats(m));
    const uint8_t* qs = blk + (kQ5 ? 48 : 16);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kQ5) {
        const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m256i b1 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
        const __m256i h0 = _mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0);
        const __m256i h1 = _mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1);
        lo = _mm256_or_si256(lo, _mm256_and_si256(h0, _mm256_set1_epi8(0x10)));
        hi = _mm256_or_si256(hi, _mm256_and_si256(h1, _mm256_set1_epi8(0x10)));
      }
      o->q[2 * c] = lo;
      o->q[2 * c + 1] = hi;
    }
  }
};

// Q6_K (layout in tensor_type.h): a group is one super-block; four 32-weight
// pieces per half, each with two 16-weight scales applied to the int16 pair
// sums by the madd; the float scale is the super-block's d.
struct Q6K {
  static constexpr bool kSigned = true, kMin = false, kMul = true;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[group];
    const __m256i low4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    o->scale = _mm256_set1_ps(H2F(b.d));
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * h + k;
        SetSigned(_mm256_sub_epi8(q[k], k32), &o->q[s], &o->sg[s]);
        o->mul[s] = Combine(_mm_set1_epi16(b.scales[8 * h + 2 * k]), _mm_set1_epi16(b.scales[8 * h + 2 * k + 1]));
      }
    }
  }
};

// The 2-bit fields of Q3_K / Q2_K weights 32j .. 32j+32 (j = 4h + s), from
// the 32 bytes qs + 32h: bits 2s, 2s+1 of each (tensor_type.h).
inline __m256i TwoBits(const uint8_t* qs, int j) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (j / 4)));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (j % 4))), _mm256_set1_epi8(3));
}

// Q3_K (layout in tensor_type.h): a group is one super-block; sub-block j's
// quants the 2-bit fields minus 4 where hmask's bit j is clear, its two
// 16-weight signed scales applied by the madd; the float scale is d.
struct Q3K {
  static constexpr bool kSigned = true, kMin = false, kMul = true;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    const auto& b = reinterpret_cast<const BlockQ3_K*>(row)[group];
    o->scale = _mm256_set1_ps(H2F(b.d));
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    for (int j = 0; j < 8; ++j) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
      const __m256i high = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
      const __m256i q = _mm256_sub_epi8(TwoBits(b.qs, j), _mm256_andnot_si256(high, _mm256_set1_epi8(4)));
      SetSigned(q, &o->q[j], &o->sg[j]);
      o->mul[j] = Combine(_mm_set1_epi16(static_cast<int16_t>(Q3KScale(b.scales, 2 * j))),
                          _mm_set1_epi16(static_cast<int16_t>(Q3KScale(b.scales, 2 * j + 1))));
    }
  }
};

// Q2_K: unsigned 2-bit quants with 4-bit 16-weight scales (the madd's
// multipliers, float scale d) and 4-bit 16-weight minimums (kMin16: met by
// the activations' pair sums, coefficient -dmin).
struct Q2K {
  static constexpr bool kSigned = false, kMin = true, kMul = true, kMin16 = true;
  static constexpr int64_t kBlocksPerGroup = 8;
  template <bool kFull>
  static void PrepareGroup(const uint8_t* row, int64_t group, int /*n = 8*/, Group* o) {
    const auto& b = reinterpret_cast<const BlockQ2_K*>(row)[group];
    o->scale = _mm256_set1_ps(H2F(b.d));
    o->min = _mm256_set1_ps(-H2F(b.dmin));
    for (int j = 0; j < 8; ++j) {
      o->q[j] = TwoBits(b.qs, j);
      const uint8_t s0 = b.scales[2 * j], s1 = b.scales[2 * j + 1];
      o->mul[j] = Combine(_mm_set1_epi16(s0 & 0xF), _mm_set1_epi16(s1 & 0xF));
      o->mmul[j] = Combine(_mm_set1_epi16(s0 >> 4), _mm_set1_epi16(s1 >> 4));
    }
  }
};

// ---------------------------------------------------------------- tiles

#include "backend/cpu/quant_fold_x86.h"  // Pair32, Pair64, Fold8

// A token's activation scales d and sums s, one float per 32-weight block,
// contiguous and zero-padded to whole groups, so a group reads each as one
// vector.
struct TokenScales {
  const BlockQ8Act* xq;
  const float* d;
  const float* s;
};

// One group of one weight row met by T tokens (n: the group's blocks).
template <class F, int T, bool kFull>
inline void TileGroup(const uint8_t* w, const TokenScales* x, int64_t gi, int n, __m256* acc, __m256* accm) {
  const __m256i ones = _mm256_set1_epi16(1);
  Group p;
  if constexpr (!kFull) p = Group{};  // lanes past n stay unread; zeroed so no reader can see garbage
  F::template PrepareGroup<kFull>(w, gi, n, &p);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const BlockQ8Act* xb = x[t].xq + 8 * gi;
    __m256i isum[8], msum[8];
    for (int g = 0; g < 8; ++g) {
      if (kFull || g < n) {
        const __m256i xv = LoadX(xb[g]);
        const __m256i x8 = F::kSigned ? _mm256_sign_epi8(xv, p.sg[g]) : xv;
        isum[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(p.q[g], x8), F::kMul ? p.mul[g] : ones);
        if constexpr (Min16<F>())
          msum[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), p.mmul[g]);
      } else {
        isum[g] = _mm256_setzero_si256();
        if constexpr (Min16<F>()) msum[g] = _mm256_setzero_si256();
      }
    }
    const __m256 dx = _mm256_loadu_ps(x[t].d + 8 * gi);
    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(p.scale, dx), _mm256_cvtepi32_ps(Fold8(isum)), acc[t]);
    if constexpr (Min16<F>()) {
      accm[t] = _mm256_fmadd_ps(_mm256_mul_ps(p.min, dx), _mm256_cvtepi32_ps(Fold8(msum)), accm[t]);
    } else if constexpr (F::kMin) {
      accm[t] = _mm256_fmadd_ps(p.min, _mm256_loadu_ps(x[t].s + 8 * gi), accm[t]);
    }
  }
}

// One weight row × T tokens: each group of the row is prepared once and met
// by the T tokens, each with its own accumulators.
template <class F, int T>
inline void Tile(const uint8_t* w, const TokenScales* x, int64_t nb, float* out) {
  __m256 acc[T], accm[T];
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  const int64_t full = nb / 8;
  for (int64_t gi = 0; gi < full; ++gi) TileGroup<F, T, true>(w, x, gi, 8, acc, accm);
  if (nb % 8 != 0) TileGroup<F, T, false>(w, x, full, static_cast<int>(nb % 8), acc, accm);
  for (int t = 0; t < T; ++t) out[t] = F::kMin ? HSum(acc[t]) + HSum(accm[t]) : HSum(acc[t]);
}

// The d and s of n_tok tokens' activations (ld_xq blocks apart), nb blocks
// each, into buf: token t's d at buf[2·t·nbp], its s at buf[(2·t + 1)·nbp].
inline int64_t GatherScales(const BlockQ8Act* xq, int64_t ld_xq, int64_t n_tok, int64_t nb,
                            std::vector<float>* buf) {
  const int64_t nbp = (nb + 7) / 8 * 8;
  buf->assign(static_cast<size_t>(2 * n_tok * nbp), 0.0f);
  for (int64_t t = 0; t < n_tok; ++t) {
    float* d = buf->data() + 2 * t * nbp;
    float* s = d + nbp;
    for (int64_t b = 0; b < nb; ++b) {
      d[b] = xq[t * ld_xq + b].d;
      s[b] = xq[t * ld_xq + b].s;
    }
  }
  return nbp;
}

template <class F>
float DotOne(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  std::vector<float> buf;
  const int64_t nbp = GatherScales(x, nb, 1, nb, &buf);
  const TokenScales ts{x, buf.data(), buf.data() + nbp};
  float out;
  Tile<F, 1>(w, &ts, nb, &out);
  return out;
}

template <class F, int T>
inline void RunTile(const MatMulArgs& a, int64_t r, int64_t t0, int64_t tb, const float* scales,
                    int64_t nbp, int64_t nb) {
  const uint8_t* w = static_cast<const uint8_t*>(a.w->data) + r * static_cast<int64_t>(a.w->row_bytes);
  TokenScales x[T];
  for (int t = 0; t < T; ++t) {
    const float* d = scales + 2 * (t0 + t - tb) * nbp;
    x[t] = {a.xq + (t0 + t) * a.ld_xq, d, d + nbp};
  }
  float out[T];
  Tile<F, T>(w, x, nb, out);
  for (int t = 0; t < T; ++t) {
    float* dst = a.y + (t0 + t) * a.ld_y + r;
    *dst = a.accumulate ? *dst + out[t] : out[t];
  }
}

// Tokens in blocks of 16 (their activations stay in L1/L2 while the rows
// sweep them); inside, each row meets the block's tokens 4 at a time.
template <class F>
void MatMulT(const MatMulArgs& a) {
  constexpr int64_t kTokBlock = 32;
  const int64_t nb = a.w->cols / 32;
  thread_local std::vector<float> scales;
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    const int64_t nbp = GatherScales(a.xq + tb * a.ld_xq, a.ld_xq, te - tb, nb, &scales);
    for (int64_t r = a.row_begin; r < a.row_end; ++r) {
      int64_t t = tb;
      for (; t + 4 <= te; t += 4) RunTile<F, 4>(a, r, t, tb, scales.data(), nbp, nb);
      if (t + 2 <= te) {
        RunTile<F, 2>(a, r, t, tb, scales.data(), nbp, nb);
        t += 2;
      }
      if (t < te) RunTile<F, 1>(a, r, t, tb, scales.data(), nbp, nb);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- activations
//
// Bitwise the same blocks as generic::QuantizeActImpl: the same amax, d, 1/d
// and products, and cvtps rounds to nearest even like nearbyint.
void QuantizeActImpl(const float* x, int64_t n, BlockQ8Act* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + 32 * b;
    __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
    __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
    __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                              _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
    // packs work within 128-bit lanes; the permute restores element order
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    out[b].d = d;
    out[b].s = d * static_cast<float>(_mm_cvtsi128_si32(s4));
  }
}

QuantDotFn QuantDot(TensorType type) {
  if (QuantDotFn f = LatticeDot(type)) return f;  // quant_lattice_avx2.cpp
  switch (type) {
    case TensorType::Q4_0: return DotOne<Q4_0>;
    case TensorType::Q4_1: return DotOne<Q4_1>;
    case TensorType::Q5_0: return DotOne<Q5_0>;
    case TensorType::Q5_1: return DotOne<Q5_1>;
    case TensorType::Q8_0: return DotOne<Q8_0>;
    case TensorType::Q4_K: return DotOne<QK<false>>;
    case TensorType::Q5_K: return DotOne<QK<true>>;
    case TensorType::Q6_K: return DotOne<Q6K>;
    case TensorType::IQ4_NL: return DotOne<IQ4NL>;
    case TensorType::IQ4_XS: return DotOne<IQ4XS>;
    case TensorType::Q3_K: return DotOne<Q3K>;
    case TensorType::Q2_K: return DotOne<Q2K>;
    case TensorType::MXFP4: return DotOne<MXFP4>;
    case TensorType::TQ1_0: return DotOne<TQ<TensorType::TQ1_0>>;
    case TensorType::TQ2_0: return DotOne<TQ<TensorType::TQ2_0>>;
    default: return nullptr;
  }
}

void QuantMatMulImpl(const MatMulArgs& a) {
  if (a.w->packed != nullptr) {  // a CanPackR8 type, packed by the backend
    static const bool vnni = PackedVnniUsable();
    if (vnni) {
      vnni::PackedQuantMatMul(a);  // quant_vnni_packed.cpp
    } else {
      PackedQuantMatMul(a);        // quant_avx2_packed.cpp
    }
    return;
  }
  if (LatticeMatMul(a)) return;  // the lattice types: quant_lattice_avx2.cpp
  switch (a.w->type) {
    case TensorType::Q4_0: MatMulT<Q4_0>(a); break;
    case TensorType::Q4_1: MatMulT<Q4_1>(a); break;
    case TensorType::Q5_0: MatMulT<Q5_0>(a); break;
    case TensorType::Q5_1: MatMulT<Q5_1>(a); break;
    case TensorType::Q8_0: MatMulT<Q8_0>(a); break;
    case TensorType::Q4_K: MatMulT<QK<false>>(a); break;
    case TensorType::Q5_K: MatMulT<QK<true>>(a); break;
    case TensorType::Q6_K: MatMulT<Q6K>(a); break;
    case TensorType::IQ4_NL: MatMulT<IQ4NL>(a); break;
    case TensorType::IQ4_XS: MatMulT<IQ4XS>(a); break;
    case TensorType::Q3_K: MatMulT<Q3K>(a); break;
    case TensorType::Q2_K: MatMulT<Q2K>(a); break;
    case TensorType::MXFP4: MatMulT<MXFP4>(a); break;
    case TensorType::TQ1_0: MatMulT<TQ<TensorType::TQ1_0>>(a); break;
    case TensorType::TQ2_0: MatMulT<TQ<TensorType::TQ2_0>>(a); break;
    default: break;  // rejected at backend creation
  }
}

}  // namespace avx2
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
