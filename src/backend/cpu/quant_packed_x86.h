// The packed-row tiles and their matmul (weights packed 8 rows at a time,
// quant_pack.h), written once and compiled twice:
//
//   quant_avx2_packed.cpp   LLM_PACKED_VNNI 0   AVX2/FMA/F16C
//   quant_vnni_packed.cpp   LLM_PACKED_VNNI 1   the same plus AVX-512 VNNI on
//                                               256-bit vectors (vpdpbusd)
//
// Each .cpp includes this file inside its own namespace, under its target
// pragma. The two differ only in how a tile forms its exact int32 dot
// products: AVX2 multiplies unsigned by signed bytes into int16 pairs
// (maddubs) and widens them (madd); VNNI multiplies and adds four byte pairs
// straight into an int32 lane. Integer sums are exact either way, and the
// floating-point operations after them are the same ones in the same order,
// so the two give bitwise the same outputs (test_quant checks it).
//
// Needs, before inclusion: <immintrin.h>, <cstdint>, <cstring>,
// <type_traits>, <vector>, quant.h, quant_pack.h, and LLM_PACKED_VNNI.
#pragma once

#if !defined(LLM_PACKED_VNNI)
#error "define LLM_PACKED_VNNI (0 or 1) before including quant_packed_x86.h"
#endif

namespace {

// ---------------------------------------------------------------- packed rows
//
// Weights repacked 8 rows at a time (quant_pack.h). For one row group and one
// token, block b adds
//
//   acc = fma(d_w · d_x, float(isum), acc)     lane r = row r
//   acc = fma(m_w, s_x, acc)                   [the formats with a minimum]
//
// where isum (8 exact int32 dot products, one per row) comes from 8
// multiply-adds of 8-row weight vectors with 4 activations broadcast to every
// 32-bit lane (AVX2: summed in int16 or int32, then widened; VNNI: straight
// into int32): lane r is row r's sum with no horizontal reduction. A row's
// output is its lane after the last block: the same operations in the same
// order whatever the tile, the row range or the batch, so results do not
// depend on them.
//
// The sums are kept in order by an empty asm that pins each partial sum to a
// register: left alone, GCC reassociates the integer adds into trees whose
// many live terms spill to the stack (measured: a third slower).

// Requests `bytes` bytes at p into L1. The tiles call it for the next row
// group's block while they work on this one: the model's matrices stream
// from memory every step and the hardware prefetcher alone leaves the
// multiplies waiting (measured on the 2-vCPU EPYC: single-sequence decode
// +8%, the Q8_0 classifier at 8 tokens +15-25%).
template <int64_t kBytes>
inline void PrefetchBlock(const void* p) {
  const char* c = static_cast<const char*>(p);
#pragma GCC unroll 8
  for (int64_t off = 0; off < kBytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// A packed block's 8 row scales (or minimums), F16.
inline __m256 LoadScales(const uint16_t* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}
// 8 bytes as F32.
inline __m256 LoadU8(const uint8_t* u) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
}

// The nibble layouts (4-bit quants, and 5-bit ones as nibbles plus a vector
// of fifth bits) seen block by block: block b of a row group (w: the
// group's first element) gives its quants, its 8 rows' scales dw and
// minimums mw as F32, and the bytes to prefetch. PackedQ4, PackedQ4_0,
// PackedQ5_0 and PackedQ5_1 are one element per block; PackedQ4K and
// PackedQ5K one per 8 blocks (kSub), their header of d and dmin shared.
template <class B>
inline constexpr int64_t kSub = std::is_same_v<B, PackedQ4K> || std::is_same_v<B, PackedQ5K> ? 8 : 1;
template <class B>
inline constexpr bool kFiveBit =
    std::is_same_v<B, PackedQ5_0> || std::is_same_v<B, PackedQ5_1> || std::is_same_v<B, PackedQ5K>;

// Block b's quants: the element itself, or its sub-block.
template <class B>
inline const auto& NibbleBlock(const B* w, int64_t b) {
  if constexpr (kSub<B> == 8) {
    return w[b / 8].sub[b % 8];
  } else {
    return w[b];
  }
}

// A block's 8 row minimums; dw: its scales. PackedQ4_0 and PackedQ5_0 store
// none: Q4_0's d · (q - 8) is d · q + (-8 · d), Q5_0's d · (q - 16) is
// d · q + (-16 · d), and those minimums are exact in F32.
template <class B>
inline __m256 LoadMins(const B& p, __m256 dw) {
  if constexpr (std::is_same_v<B, PackedQ4_0>) {
    return _mm256_mul_ps(dw, _mm256_set1_ps(-8.0f));
  } else if constexpr (std::is_same_v<B, PackedQ5_0>) {
    return _mm256_mul_ps(dw, _mm256_set1_ps(-16.0f));
  } else {
    return LoadScales(p.m);
  }
}

template <class B>
inline void Q4ScalesMins(const B* w, int64_t b, __m256* dw, __m256* mw) {
  if constexpr (kSub<B> == 8) {
    const B& s = w[b / 8];
    const auto& p = s.sub[b % 8];
    *dw = _mm256_mul_ps(LoadScales(s.d), LoadU8(p.sc));
    // -(dmin · m), negated by its sign bit: exactly the portable order's value
    *mw = _mm256_xor_ps(_mm256_mul_ps(LoadScales(s.dmin), LoadU8(p.m)), _mm256_set1_ps(-0.0f));
  } else {
    *dw = LoadScales(w[b].d);
    *mw = LoadMins(w[b], *dw);
  }
}

template <class B>
inline void Q4Prefetch(const B* next, int64_t b) {
  if constexpr (kSub<B> == 8) {
    if (b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(next[b / 8].d), _MM_HINT_T0);
    PrefetchBlock<sizeof(next->sub[0])>(&next[b / 8].sub[b % 8]);
  } else {
    PrefetchBlock<sizeof(B)>(next + b);
  }
}

// Vector v (0..3) of a block's quants qs as unsigned bytes: quants 4v + i of
// each row (lo) and 4v + 16 + i (hi). h: a 5-bit block's fifth bits (its qh
// vector), whose bits v and 4 + v of each byte go to bit 4 (16-bit shifts:
// the bits that cross into the next byte land outside the mask).
template <class B>
inline void NibbleQuants(const uint8_t* qs, [[maybe_unused]] __m256i h, int v, __m256i* lo, __m256i* hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs) + v);
  *lo = _mm256_and_si256(pv, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(pv, 4), low4);
  if constexpr (kFiveBit<B>) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(h, 4 - v), bit4));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_srli_epi16(h, v), bit4));
  }
}

// A 5-bit block's fifth bits (zero for a 4-bit one).
template <class B>
inline __m256i FifthBits(const B* w, int64_t b) {
  if constexpr (kFiveBit<B>) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(NibbleBlock(w, b).qh));
  } else {
    return _mm256_setzero_si256();
  }
}

// 4 bytes of x, broadcast to all 8 32-bit lanes.
inline __m256i Bcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

#if LLM_PACKED_VNNI
// Adds to each 32-bit lane of acc the sum of its four products u8(u) ·
// s8(x), or sets it to that sum when `first` (acc not read): exact, no
// int16 step, no saturation.
inline void DotAdd(bool first, __m256i& acc, __m256i u, __m256i x) {
  acc = _mm256_dpbusd_epi32(first ? _mm256_setzero_si256() : acc, u, x);
}

// A nibble tile's vector v against activations xl (quants 4v..) and xh
// (4v + 16..): int32 lane r of sa gains row r's four low products, of sb its
// four high ones. Two chains, not one: a single sequence of eight dependent
// vpdpbusd per block is latency-bound at one token (batch-1 decode).
template <class B>
inline void NibbleDot(int v, __m256i lo, __m256i hi, __m256i xl, __m256i xh, __m256i& sa, __m256i& sb) {
  DotAdd(v == 0, sa, lo, xl);
  DotAdd(v == 0, sb, hi, xh);
}
// Row r's block sum, in int32 lane r.
inline __m256i NibbleSum(__m256i sa, __m256i sb) { return _mm256_add_epi32(sa, sb); }
#else
// The same in AVX2: unsigned-by-signed byte pairs summed in int16 lanes
// (2r, 2r + 1: row r), widened into int32 lane r by a multiply-add with 1.
// 4-bit quants: a vector's pair sums are at most 2 · 2·15·127 = 7620, so
// all four vectors add up in int16 (30480 < 2^15) and widen once; 5-bit
// ones reach 2 · 2·31·127 = 15748 per vector, so they widen after every
// second vector.
template <class B>
inline void NibbleDot(int v, __m256i lo, __m256i hi, __m256i xl, __m256i xh, __m256i& s16, __m256i& s32) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i u = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
  if constexpr (kFiveBit<B>) {
    if (v % 2 == 0) {
      s16 = u;
    } else {
      const __m256i w = _mm256_madd_epi16(_mm256_add_epi16(s16, u), ones);
      s32 = v == 1 ? w : _mm256_add_epi32(s32, w);
    }
  } else {
    s16 = v == 0 ? u : _mm256_add_epi16(s16, u);
    if (v == 3) s32 = _mm256_madd_epi16(s16, ones);
  }
  __asm__("" : "+x"(s16));  // keep the sums in order (no reassociation into a tree)
}
// Row r's block sum, in int32 lane r.
inline __m256i NibbleSum(__m256i s16, __m256i s32) {
  (void)s16;
  return s32;
}
#endif

// T tokens against one row group; xq[t]: token t's activation blocks.
// B: a nibble layout (PackedQ4, PackedQ4_0, PackedQ4K, PackedQ5_0,
// PackedQ5_1, PackedQ5K).
template <class B, int T>
inline void PackedQ4Tile(const B* w, const B* next, int64_t nb, const BlockQ8Act* const* xq, __m256* acc) {
  for (int64_t b = 0; b < nb; ++b) {
    Q4Prefetch(next, b);
    const uint8_t* q = NibbleBlock(w, b).qs;
    const __m256i h = FifthBits(w, b);
    __m256i s16[T], s32[T];  // NibbleDot's running sums
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m256i lo, hi;
      NibbleQuants<B>(q, h, v, &lo, &hi);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* x = xq[t][b].qs;
        NibbleDot<B>(v, lo, hi, Bcast4(x + 4 * v), Bcast4(x + 4 * v + 16), s16[t], s32[t]);
      }
    }
    __m256 dw, mw;
    Q4ScalesMins(w, b, &dw, &mw);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8Act& xv = xq[t][b];
      const __m256i isum = NibbleSum(s16[t], s32[t]);  // lane r: row r
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xv.d)), _mm256_cvtepi32_ps(isum), acc[t]);
      acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xv.s), acc[t]);
    }
  }
}

// Four tokens against two row groups (w0 and the next group w0 + nb): each
// broadcast activation meets 16 rows. The loop is bound by vector uops and
// a broadcast from memory costs one, so sharing them across two groups pays
// (measured on the 2-vCPU EPYC, matrices in cache, 8-16 tokens: +15-35%).
// Per row and token the operations and their order are those of
// PackedQ4Tile.
template <class B>
inline void PackedQ4Tile2x4(const B* w0, const B* next0, const B* next1, int64_t nb, const BlockQ8Act* const* xq,
                            __m256* acc) {
  const B* w1 = w0 + nb / kSub<B>;
  for (int64_t b = 0; b < nb; ++b) {
    Q4Prefetch(next0, b);
    Q4Prefetch(next1, b);
    const uint8_t* q0 = NibbleBlock(w0, b).qs;
    const uint8_t* q1 = NibbleBlock(w1, b).qs;
    const __m256i h0 = FifthBits(w0, b), h1 = FifthBits(w1, b);
    __m256i a16[4], a32[4], b16[4], b32[4];  // NibbleDot's sums; a: group 0, b: group 1; [t]: token t
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m256i lo0, hi0, lo1, hi1;
      NibbleQuants<B>(q0, h0, v, &lo0, &hi0);
      NibbleQuants<B>(q1, h1, v, &lo1, &hi1);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const int8_t* x = xq[t][b].qs;
        const __m256i xl = Bcast4(x + 4 * v), xh = Bcast4(x + 4 * v + 16);
        NibbleDot<B>(v, lo0, hi0, xl, xh, a16[t], a32[t]);
        NibbleDot<B>(v, lo1, hi1, xl, xh, b16[t], b32[t]);
      }
    }
    __m256 dw0, mw0, dw1, mw1;
    Q4ScalesMins(w0, b, &dw0, &mw0);
    Q4ScalesMins(w1, b, &dw1, &mw1);
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const BlockQ8Act& xv = xq[t][b];
      const __m256 xd = _mm256_set1_ps(xv.d), xs = _mm256_set1_ps(xv.s);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw0, xd), _mm256_cvtepi32_ps(NibbleSum(a16[t], a32[t])), acc[t]);
      acc[t] = _mm256_fmadd_ps(mw0, xs, acc[t]);
      acc[4 + t] = _mm256_fmadd_ps(_mm256_mul_ps(dw1, xd), _mm256_cvtepi32_ps(NibbleSum(b16[t], b32[t])), acc[4 + t]);
      acc[4 + t] = _mm256_fmadd_ps(mw1, xs, acc[4 + t]);
    }
  }
}

//
// VNNI: the signed quants q flipped to q + 128 (an xor of the sign bit,
// once per vector for all tokens) meet the activations as unsigned bytes in
// one vpdpbusd; Σ (q + 128)·x - 128·Σ x is Σ q·x, with Σ x of the block's
// 32 activations summed once per token and block (xs: token t's halves at
// xs[t][2b] and xs[t][2b + 1], as for Q6_K).
template <int T>
inline void PackedQ8Tile(const PackedQ8* w, const PackedQ8* next, int64_t nb, const BlockQ8Act* const* xq,
                         [[maybe_unused]] const int32_t* const* xs, __m256* acc) {
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlock<sizeof(PackedQ8)>(next + b);
    const PackedQ8& p = w[b];
    const __m256i* q = reinterpret_cast<const __m256i*>(p.qs);  // q[j]: quants 4j .. 4j+3 of rows 0..7
    __m256i is[T];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i wj = _mm256_loadu_si256(q + j);
#if LLM_PACKED_VNNI
      const __m256i uj = _mm256_xor_si256(wj, _mm256_set1_epi8(-128));  // q + 128, unsigned
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) DotAdd(j == 0, is[t], uj, Bcast4(xq[t][b].qs + 4 * j));
#else
      const __m256i uj = _mm256_abs_epi8(wj);  // |q| (as unsigned: -128 becomes 128)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        // |q| · sign(x, q) = q · x; a pair sum is at most 2·128·127 < 2^15
        const __m256i xsg = _mm256_sign_epi8(Bcast4(xq[t][b].qs + 4 * j), wj);
        const __m256i i32 = _mm256_madd_epi16(_mm256_maddubs_epi16(uj, xsg), _mm256_set1_epi16(1));
        is[t] = j == 0 ? i32 : _mm256_add_epi32(is[t], i32);
        __asm__("" : "+x"(is[t]));  // keep the sums in order (no reassociation into a tree)
      }
#endif
    }
    const __m256 dw = LoadScales(p.d);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#if LLM_PACKED_VNNI
      is[t] = _mm256_sub_epi32(is[t], _mm256_set1_epi32(128 * (xs[t][2 * b] + xs[t][2 * b + 1])));
#endif
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xq[t][b].d)), _mm256_cvtepi32_ps(is[t]), acc[t]);
    }
  }
}

// Q6_K (PackedQ6K): each sub-block's unsigned 6-bit quants q are rebuilt
// from the nibbles and the 2-bit planes (an and, a shift and an or per
// vector) and meet the activations as unsigned bytes (a pair sum is at most
// 2·63·128 < 2^15); Σ (q - 32)·x is then Σ q·x minus 32·Σ x of the 16
// activations, which the matmul sums once per token and block (xs: token
// t's pairs of them, quants 0..15 and 16..31, at xs[t][2b]) rather than once
// per row group. The products of quants 0..15 and 16..31 are summed apart and
// scaled by their int8 scales in int32: exactly the integer sum of the
// row-major Q6_K dot (so results are those of the earlier 8-bit layout); then
// one fma per block as for Q8_0.
template <int T>
inline void PackedQ6KTile(const PackedQ6K* w, const PackedQ6K* next, int64_t nb, const BlockQ8Act* const* xq,
                          const int32_t* const* xs, __m256* acc) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), high2 = _mm256_set1_epi8(0x30);
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    if (b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(next[b / 8].d), _MM_HINT_T0);
    PrefetchBlock<sizeof(PackedQ6KSub)>(&next[b / 8].sub[b % 8]);
    const PackedQ6K& s = w[b / 8];
    const PackedQ6KSub& p = s.sub[b % 8];
    const __m256i* ql = reinterpret_cast<const __m256i*>(p.ql);
    const __m256i* qh = reinterpret_cast<const __m256i*>(p.qh);
    __m256i ia[T], ib[T];  // quants 0..15, 16..31
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i l = _mm256_loadu_si256(ql + v), h = _mm256_loadu_si256(qh + v / 2);
      // the high bits of this vector's low and high nibbles to bits 4-5 of
      // each byte (16-bit shifts: bits crossing a byte fall outside the mask)
      const __m256i ha = v % 2 == 0 ? _mm256_slli_epi16(h, 4) : h;
      const __m256i hb = v % 2 == 0 ? _mm256_slli_epi16(h, 2) : _mm256_srli_epi16(h, 2);
      const __m256i qa = _mm256_or_si256(_mm256_and_si256(l, low4), _mm256_and_si256(ha, high2));
      const __m256i qb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), low4), _mm256_and_si256(hb, high2));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* x = xq[t][b].qs;
#if LLM_PACKED_VNNI
        DotAdd(v == 0, ia[t], qa, Bcast4(x + 4 * v));
        DotAdd(v == 0, ib[t], qb, Bcast4(x + 16 + 4 * v));
#else
        const __m256i pa = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, Bcast4(x + 4 * v)), ones);
        const __m256i pb = _mm256_madd_epi16(_mm256_maddubs_epi16(qb, Bcast4(x + 16 + 4 * v)), ones);
        ia[t] = v == 0 ? pa : _mm256_add_epi32(ia[t], pa);
        ib[t] = v == 0 ? pb : _mm256_add_epi32(ib[t], pb);
        __asm__("" : "+x"(ia[t]), "+x"(ib[t]));  // keep the sums in order (no reassociation into a tree)
#endif
      }
    }
    const __m256i sa = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p.sc[0])));
    const __m256i sb = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p.sc[1])));
    const __m256 dw = LoadScales(s.d);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i da = _mm256_sub_epi32(ia[t], _mm256_set1_epi32(32 * xs[t][2 * b]));
      const __m256i db = _mm256_sub_epi32(ib[t], _mm256_set1_epi32(32 * xs[t][2 * b + 1]));
      const __m256i isum = _mm256_add_epi32(_mm256_mullo_epi32(da, sa), _mm256_mullo_epi32(db, sb));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xq[t][b].d)), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
}

#include "backend/cpu/quant_packed_k23_x86.h"  // PackedK23Tile: Q2_K, Q3_K

// The activation sums PackedQ6KTile (and VNNI's PackedQ8 and IQ4 tiles) take: for
// tokens [t0, t1), block b, Σ of quants 0..15 and of 16..31 at
// out[2·(nb·(t - t0) + b)] and the next.
inline void ActSums(const MatMulArgs& a, int64_t nb, int64_t t0, int64_t t1, int32_t* out) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* x = a.xq[t * a.ld_xq + b].qs;
      int32_t lo = 0, hi = 0;
      for (int i = 0; i < 16; ++i) {
        lo += x[i];
        hi += x[16 + i];
      }
      out[2 * (nb * (t - t0) + b)] = lo;
      out[2 * (nb * (t - t0) + b) + 1] = hi;
    }
}

#include "backend/cpu/quant_packed_iq4_x86.h"  // IQ4_NL, IQ4_XS, MXFP4: PackedIQ4Tile

// The group whose blocks a tile prefetches: `next` when the matrix has it,
// else `self` (already loaded; no pointer past the packed copy).
inline int64_t NextGroup(const MatMulArgs& a, int64_t next, int64_t self) {
  return next < (a.w->rows + kPackRows - 1) / kPackRows ? next : self;
}

// Stores tokens t0 .. t0+T-1 of row group g (acc[t]: token t), the rows of
// the group that fall in [row_begin, row_end).
template <int T>
inline void StoreGroup(const MatMulArgs& a, int64_t g, int64_t t0, const __m256* acc) {
  const int64_t r0 = g * kPackRows;
  const int64_t lo = a.row_begin > r0 ? a.row_begin : r0;
  const int64_t hi = a.row_end < r0 + kPackRows ? a.row_end : r0 + kPackRows;
  for (int t = 0; t < T; ++t) {
    float* y = a.y + (t0 + t) * a.ld_y + r0;
    if (lo == r0 && hi == r0 + kPackRows) {
      _mm256_storeu_ps(y, a.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), acc[t]) : acc[t]);
    } else {
      alignas(32) float v[8];
      _mm256_store_ps(v, acc[t]);
      for (int64_t r = lo; r < hi; ++r) y[r - r0] = a.accumulate ? y[r - r0] + v[r - r0] : v[r - r0];
    }
  }
}

// Tokens t0 .. t0+T-1 against row group g (B: PackedQ4, PackedQ4_0, PackedQ4K,
// PackedQ5_0, PackedQ5_1, PackedQ5K, PackedQ6K, PackedQ2K, PackedQ3K, PackedQ8,
// PackedIQ4NL, PackedIQ4XS or PackedMXFP4). xs: the activation sums of tokens
// from t0 on (ActSums) for PackedQ6K and VNNI's PackedQ8 and IQ4 tiles, else
// unused.
// xa: PackedK23Tile's activations of tokens from t0 (MakeK23Act), else unused.
template <class B, int T>
inline void RunPacked(const MatMulArgs& a, int64_t nb, int64_t g, int64_t t0, const int32_t* xs,
                      [[maybe_unused]] const K23Act* xa) {
  __m256 acc[T];
  const BlockQ8Act* xq[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    xq[t] = a.xq + (t0 + t) * a.ld_xq;
  }
  const auto* w = static_cast<const B*>(a.w->packed);
  if constexpr (std::is_same_v<B, PackedQ8>) {
    const int32_t* xst[T];
    for (int t = 0; t < T; ++t) xst[t] = xs != nullptr ? xs + 2 * nb * t : nullptr;
    PackedQ8Tile<T>(w + g * nb, w + NextGroup(a, g + 1, g) * nb, nb, xq, xst, acc);
  } else if constexpr (kIQ4<B>) {
    const int64_t stride = nb / kIQ4Sub<B>;  // elements of B per row group
    const int32_t* xst[T];
    for (int t = 0; t < T; ++t) xst[t] = xs != nullptr ? xs + 2 * nb * t : nullptr;
    PackedIQ4Tile<B, T>(w + g * stride, w + NextGroup(a, g + 1, g) * stride, nb, xq, xst, acc);
  } else if constexpr (std::is_same_v<B, PackedQ6K>) {
    const int64_t stride = nb / 8;  // super-blocks per row group
    const int32_t* xst[T];
    for (int t = 0; t < T; ++t) xst[t] = xs + 2 * nb * t;
    PackedQ6KTile<T>(w + g * stride, w + NextGroup(a, g + 1, g) * stride, nb, xq, xst, acc);
  } else if constexpr (kK23<B>) {
    const int64_t stride = nb / 8;  // super-blocks per row group
    const K23Act* xat[T];
    for (int t = 0; t < T; ++t) xat[t] = xa + nb * t;
    PackedK23Tile<B, T>(w + g * stride, w + NextGroup(a, g + 1, g) * stride, nb, xat, acc);
  } else {
    const int64_t stride = nb / kSub<B>;  // elements of B per row group
    PackedQ4Tile<B, T>(w + g * stride, w + NextGroup(a, g + 1, g) * stride, nb, xq, acc);
  }
  StoreGroup<T>(a, g, t0, acc);
}

// Tokens t0 .. t0+3 against nibble-layout row groups g and g + 1.
template <class B>
inline void RunPackedQ4Pair(const MatMulArgs& a, int64_t nb, int64_t g, int64_t t0) {
  // Zeros the compiler cannot see as zeros: acc lives on the stack (the
  // tile's 16 live sums take every register), and GCC turns a loop of zero
  // stores into `rep stos`, whose start-up cost is ~3% of a call.
  __m256 zero = _mm256_setzero_ps();
  __asm__("" : "+x"(zero));
  __m256 acc[8];
  const BlockQ8Act* xq[4];
  for (int t = 0; t < 8; ++t) acc[t] = zero;
  for (int t = 0; t < 4; ++t) xq[t] = a.xq + (t0 + t) * a.ld_xq;
  const auto* w = static_cast<const B*>(a.w->packed);
  const int64_t stride = nb / kSub<B>;  // elements of B per row group
  PackedQ4Tile2x4<B>(w + g * stride, w + NextGroup(a, g + 2, g) * stride, w + NextGroup(a, g + 3, g + 1) * stride,
                     nb, xq, acc);
  StoreGroup<4>(a, g, t0, acc);
  StoreGroup<4>(a, g + 1, t0, acc + 4);
}

// Tokens [u, te) against row group g in tiles of 4, 2 and 1 (xs_at, xp_at:
// a token's activation sums and K23 activations, as RunPacked takes them).
template <class B, class XsAt, class XpAt>
inline void RunPackedRest(const MatMulArgs& a, int64_t nb, int64_t g, int64_t u, int64_t te, XsAt xs_at, XpAt xp_at) {
  for (; u + 4 <= te; u += 4) RunPacked<B, 4>(a, nb, g, u, xs_at(u), xp_at(u));
  if (u + 2 <= te) {
    RunPacked<B, 2>(a, nb, g, u, xs_at(u), xp_at(u));
    u += 2;
  }
  if (u < te) RunPacked<B, 1>(a, nb, g, u, xs_at(u), xp_at(u));
}

#if !LLM_PACKED_VNNI
// IQ4_XS with at least kIQ4XS16MinTok tokens: the int16 weights of
// DecodeIQ4XS16 (quant_packed_iq4_x86.h). Tokens in blocks of
// kIQ4XS16TokBlock, their activations widened to int16 once; each pair of
// row groups decoded once per token block (2 · 512 bytes per block: in
// L2), then met by the block's tokens 4 at a time (IQ4XS16Tile2: each
// broadcast activation pair serves 16 rows; measured on the 2-vCPU EPYC,
// tile alone, 1B shapes: ~8.5-9.5 TSC ticks per 8 rows x 32 weights and token
// against PackedIQ4Tile's ~11.5-13, where one group of 4 tokens took ~10-12).
constexpr int64_t kIQ4XS16MinTok = 24;  // fewer: the decoding is not amortized (8: slower, 16: even)
constexpr int64_t kIQ4XS16TokBlock = 64;

// Tokens t0 .. t0+T-1 against row group g (pair: and g + 1), decoded in d
// (g + 1 at d + nb); x16: the token block's int16 activations from token tb.
template <int T, bool kPair>
inline void RunIQ4XS16(const MatMulArgs& a, int64_t nb, const IQ4XS16Block* d, int64_t g, int64_t t0, int64_t tb,
                       const int16_t* x16) {
  // zeros the compiler cannot see as zeros (see RunPackedQ4Pair)
  __m256 zero = _mm256_setzero_ps();
  __asm__("" : "+x"(zero));
  __m256 acc[2 * T];
  const BlockQ8Act* xq[T];
  const int16_t* xt[T];
  for (int t = 0; t < 2 * T; ++t) acc[t] = zero;
  for (int t = 0; t < T; ++t) {
    xq[t] = a.xq + (t0 + t) * a.ld_xq;
    xt[t] = x16 + (t0 + t - tb) * nb * 32;
  }
  const auto* w = static_cast<const PackedIQ4XS*>(a.w->packed);
  const int64_t stride = nb / 8;  // super-blocks per row group
  if constexpr (kPair) {
    IQ4XS16Tile2<T>(d, d + nb, w + g * stride, w + (g + 1) * stride, nb, xt, xq, acc);
    StoreGroup<T>(a, g, t0, acc);
    StoreGroup<T>(a, g + 1, t0, acc + T);
  } else {
    IQ4XS16Tile<T>(d, w + g * stride, nb, xt, xq, acc);
    StoreGroup<T>(a, g, t0, acc);
  }
}

// Tokens [t, te) against group g (pair: g and g + 1) in tiles of 4, 2, 1.
template <bool kPair>
inline void RunIQ4XS16Tokens(const MatMulArgs& a, int64_t nb, const IQ4XS16Block* d, int64_t g, int64_t t, int64_t te,
                             int64_t tb, const int16_t* x16) {
  for (; t + 4 <= te; t += 4) RunIQ4XS16<4, kPair>(a, nb, d, g, t, tb, x16);
  if (t + 2 <= te) {
    RunIQ4XS16<2, kPair>(a, nb, d, g, t, tb, x16);
    t += 2;
  }
  if (t < te) RunIQ4XS16<1, kPair>(a, nb, d, g, t, tb, x16);
}

inline void IQ4XS16MatMul(const MatMulArgs& a) {
  const int64_t nb = a.w->cols / 32;
  const int64_t g0 = a.row_begin / kPackRows, g1 = (a.row_end + kPackRows - 1) / kPackRows;
  const auto* w = static_cast<const PackedIQ4XS*>(a.w->packed);
  // two row groups' decoded blocks, 32-byte aligned by hand (an over-aligned
  // vector element relies on the aligned operator new, which an allocator
  // that replaces operator new may not honour)
  thread_local std::vector<char> dec_bytes;
  thread_local std::vector<int16_t> x16;  // the token block's activations
  dec_bytes.resize(static_cast<size_t>(2 * nb) * sizeof(IQ4XS16Block) + 32);
  auto* dec_ptr = reinterpret_cast<IQ4XS16Block*>((reinterpret_cast<uintptr_t>(dec_bytes.data()) + 31) & ~uintptr_t{31});
  x16.resize(static_cast<size_t>(32 * nb * (a.n_tok < kIQ4XS16TokBlock ? a.n_tok : kIQ4XS16TokBlock)));
  for (int64_t tb = 0; tb < a.n_tok; tb += kIQ4XS16TokBlock) {
    const int64_t te = tb + kIQ4XS16TokBlock < a.n_tok ? tb + kIQ4XS16TokBlock : a.n_tok;
    for (int64_t t = tb; t < te; ++t)
      for (int64_t b = 0; b < nb; ++b) WidenActs(a.xq[t * a.ld_xq + b], x16.data() + 32 * (nb * (t - tb) + b));
    for (int64_t g = g0; g < g1; g += 2) {
      DecodeIQ4XS16(w + g * (nb / 8), nb, dec_ptr);
      if (g + 1 < g1) {
        DecodeIQ4XS16(w + (g + 1) * (nb / 8), nb, dec_ptr + nb);
        RunIQ4XS16Tokens<true>(a, nb, dec_ptr, g, tb, te, tb, x16.data());
      } else {
        RunIQ4XS16Tokens<false>(a, nb, dec_ptr, g, tb, te, tb, x16.data());
      }
    }
  }
}
#endif  // !LLM_PACKED_VNNI

// Tokens in blocks of 32 (their activation blocks stay in L1/L2 while the
// row groups sweep them); inside, each row group (nibble layouts: each pair of
// groups) meets the block's tokens 4 at a time. Q2_K and Q3_K: 8 at a time,
// and the row groups in chunks of 16 (at most 16 · 912 bytes per 256
// columns, in L2), each chunk swept by one tile of 8 tokens after another:
// those tokens' activations stay in L1 over the chunk (measured +4%).
// IQ4_XS in the AVX2 build with kIQ4XS16MinTok tokens or more: IQ4XS16MatMul.
template <class B>
void PackedMatMul(const MatMulArgs& a) {
  constexpr bool kQ8 = std::is_same_v<B, PackedQ8> || std::is_same_v<B, PackedQ6K> || kIQ4<B> || kK23<B>;  // not a nibble layout
  constexpr int64_t kTokBlock = 32;
  [[maybe_unused]] constexpr int kK23Tok = 8;      // PackedK23Tile's tokens per tile
  [[maybe_unused]] constexpr int64_t kK23Chunk = 16;  // and row groups per chunk
  const int64_t nb = a.w->cols / 32;
#if !LLM_PACKED_VNNI
  if constexpr (std::is_same_v<B, PackedIQ4XS>) {
    if (a.n_tok >= kIQ4XS16MinTok) {
      IQ4XS16MatMul(a);
      return;
    }
  }
#endif
  const int64_t g0 = a.row_begin / kPackRows, g1 = (a.row_end + kPackRows - 1) / kPackRows;
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    const int32_t* xs = nullptr;  // this token block's activation sums, for the tiles that take them
    if constexpr (std::is_same_v<B, PackedQ6K> ||
                  (LLM_PACKED_VNNI && (std::is_same_v<B, PackedQ8> || kIQ4<B>))) {
      thread_local std::vector<int32_t> sums;
      sums.resize(static_cast<size_t>(2 * nb * (te - tb)));
      ActSums(a, nb, tb, te, sums.data());
      xs = sums.data();
    }
    const K23Act* xp = nullptr;  // K23: this token block's activations as its tile reads them
    if constexpr (kK23<B>) {
      thread_local std::vector<K23Act> k23;
      k23.resize(static_cast<size_t>(nb * (te - tb)));
      for (int64_t t = tb; t < te; ++t)
        for (int64_t b = 0; b < nb; ++b) MakeK23Act(a.xq[t * a.ld_xq + b], &k23[static_cast<size_t>(nb * (t - tb) + b)]);
      xp = k23.data();
    }
    auto xs_at = [&](int64_t t) { return xs != nullptr ? xs + 2 * nb * (t - tb) : nullptr; };
    auto xp_at = [&](int64_t t) { return xp != nullptr ? xp + nb * (t - tb) : nullptr; };
    if constexpr (kK23<B>) {
      for (int64_t gc = g0; gc < g1; gc += kK23Chunk) {
        const int64_t gce = gc + kK23Chunk < g1 ? gc + kK23Chunk : g1;
        int64_t t = tb;
        for (; t + kK23Tok <= te; t += kK23Tok)
          for (int64_t g = gc; g < gce; ++g) RunPacked<B, kK23Tok>(a, nb, g, t, xs_at(t), xp_at(t));
        for (int64_t g = gc; g < gce; ++g) RunPackedRest<B>(a, nb, g, t, te, xs_at, xp_at);
      }
      continue;
    }
    for (int64_t g = g0; g < g1;) {
      // Q8 pairs measured no faster (the Q8 tile has fewer broadcasts per
      // multiply and two groups of four tokens spill).
      const bool pair = !kQ8 && g + 1 < g1 && te - tb >= 4;
      int64_t t = tb;
      if (pair) {
        if constexpr (!kQ8)
          for (; t + 4 <= te; t += 4) RunPackedQ4Pair<B>(a, nb, g, t);
      } else {
        for (; t + 4 <= te; t += 4) RunPacked<B, 4>(a, nb, g, t, xs_at(t), xp_at(t));
      }
      // (fewer than 4 tokens are left)
      for (int64_t gg = g; gg < g + (pair ? 2 : 1); ++gg) RunPackedRest<B>(a, nb, gg, t, te, xs_at, xp_at);
      g += pair ? 2 : 1;
    }
  }
}

}  // namespace

void PackedQuantMatMul(const MatMulArgs& a) {
  if (PacksAsQ8(a.w->type)) {
    PackedMatMul<PackedQ8>(a);
  } else if (a.w->type == TensorType::Q5_0) {
    PackedMatMul<PackedQ5_0>(a);
  } else if (a.w->type == TensorType::Q5_1) {
    PackedMatMul<PackedQ5_1>(a);
  } else if (a.w->type == TensorType::Q5_K) {
    PackedMatMul<PackedQ5K>(a);
  } else if (a.w->type == TensorType::Q4_K) {
    PackedMatMul<PackedQ4K>(a);
  } else if (a.w->type == TensorType::Q6_K) {
    PackedMatMul<PackedQ6K>(a);
  } else if (a.w->type == TensorType::Q2_K) {
    PackedMatMul<PackedQ2K>(a);
  } else if (a.w->type == TensorType::Q3_K) {
    PackedMatMul<PackedQ3K>(a);
  } else if (a.w->type == TensorType::Q4_0) {
    PackedMatMul<PackedQ4_0>(a);
  } else if (a.w->type == TensorType::IQ4_NL) {
    PackedMatMul<PackedIQ4NL>(a);
  } else if (a.w->type == TensorType::IQ4_XS) {
    PackedMatMul<PackedIQ4XS>(a);
  } else if (a.w->type == TensorType::MXFP4) {
    PackedMatMul<PackedMXFP4>(a);
  } else {
    PackedMatMul<PackedQ4>(a);
  }
}

