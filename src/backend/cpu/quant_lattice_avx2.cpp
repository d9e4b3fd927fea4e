// AVX2 matmul of the lattice types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S: tensor_type.h). Compiled for AVX2/FMA/F16C by a target
// pragma and called from quant_avx2.cpp's dispatch.
//
// A lattice weight cannot be repacked without widening it (an 8- or 9-bit
// grid index stands for 4 or 8 bytes), so it stays in the file's layout and
// is decoded at matmul time, 8 rows at a time:
//
//   few tokens (n_tok < kScratchMinTokens: decode)   the 8 rows' sub-blocks
//     are decoded into registers in weight order and meet the token's
//     activations directly; Fold8 turns the 8 rows' partial sums into one
//     vector, lane r = row r (quant_lattice_decode_x86.h: each row's fields
//     taken apart per super-block with 256-bit ops, then per sub-block
//     table loads, a sign mask by shuffle and compare, maddubs, madd).
//   many tokens (prefill)   the rows are decoded ONCE per block of
//     kTokBlock tokens into a scratch in the R8 layout of quant_pack.h
//     (DecodedSub: vector v = weights 4v .. 4v+3 of the 8 rows, as PackedQ8),
//     with each sub-block's odd multipliers 2s + 1 as int16 madd operands
//     and the corrections of Group (IQ3_XXS: the weights halved, the
//     multipliers doubled; HalvedWeights); the tile (16 rows x 2 tokens)
//     then meets every token of the block (its activations made unsigned
//     once, x + 128) with broadcast activations (4 per multiply, each for
//     two groups of 8 rows) and no horizontal reduction, a chunk of
//     kChunk super-blocks at a time.
//
// Both give, for row r and token t, the exact integer sum per 32-weight
// sub-block j of super-block s (the multipliers applied in int32)
//
//   isum = m0 · Σ_{i<16} w_i x_i + m1 · Σ_{i>=16} w_i x_i
//
// and then the same float steps in the same order, sub-blocks in order:
//
//   acc = fma((d · unit) · d_x, float(isum), acc)      d · unit exact in F32
//
// which is also the portable reference's order (quant_generic.cpp's
// DotIQLattice), so decode, prefill and the reference agree bitwise whatever
// the batch, the row split or the tile.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/quant.h"
#include "model/quant_tables.h"
#include "model/tensor_type.h"

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

// Below this many tokens a matmul decodes per token (no scratch).
constexpr int64_t kScratchMinTokens = 2;
// Tokens met by one decoded scratch: the decode is about a fifth of the
// prefill time at 128 tokens, so one block takes a whole prompt batch of
// usual size. Their unsigned activations (40 bytes per 32 columns a token:
// 655 KB at 2048 columns) stream from L2 / L3, at 36 bytes per 256
// multiply-adds of a tile. (64 here: 10% slower at 128 tokens, 2048 x 2048
// and 2048 x 8192, bench_quant IQ3_XXS.)
constexpr int64_t kTokBlock = 256;
// The prefill tile: 16 rows (two groups of 8, each broadcast activation
// feeding two maddubs) x 2 tokens; a last group of 8 rows takes 4 tokens.
// Measured against 8 rows x 4 tokens (bench_quant --cpu, 2048 x 2048, 128
// tokens): 16 x 2 the best of 16 x 1 (load bound), 16 x 2 and 16 x 4.
constexpr int kTileTokens16 = 2;
// Super-blocks per chunk: the tile meets every token of the block with a
// chunk of the scratch (2 x 2 x 3.6 KB, in L1) before the next, keeping the
// running sums of each row and token in memory in between (the scratch of
// a whole 2048-column row pair, 58 KB, would stream from L2 per token pair).
constexpr int64_t kChunk = 2;

inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <TensorType kT>
constexpr float Unit() {
  if constexpr (kT == TensorType::IQ3_XXS) return kIQ3Unit;
  if constexpr (kT == TensorType::IQ3_S) return kIQ3SUnit;
  return kIQ2Unit;
}

// Row r's d · unit (exact: a power of two times an F16) for the super-block at b.
template <TensorType kT>
inline float RowScale(const uint8_t* b) {
  return _cvtsh_ss(IQLatticeScaleBits(kT, b)) * Unit<kT>();
}

#include "backend/cpu/quant_fold_x86.h"  // Pair32, Pair64, Fold8

// A group of up to 8 consecutive rows of one matrix.
struct Rows {
  const uint8_t* w;  // the first row
  size_t row_bytes;
  int n;             // rows in the group (1..8)
  int64_t nsb;       // super-blocks per row
  int64_t bb;        // bytes per super-block
};

// Requests the bytes [off, off + len) of p into L1 (whole lines).
inline void Prefetch(const uint8_t* p, int64_t off, int64_t len) {
  for (int64_t o = off & ~int64_t{63}; o < off + len; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

// ---------------------------------------------------------------- decode

#include "backend/cpu/quant_lattice_decode_x86.h"

// ---------------------------------------------------------------- scratch (prefill)

// The largest weight magnitude of a type's lattice (IQ1: |8g +- 1|).
template <TensorType kT>
constexpr int MaxMagnitude() {
  int m = 0;
  auto bytes = [&m](uint64_t v, int n) {
    for (int k = 0; k < n; ++k) m = std::max(m, static_cast<int>(v >> (8 * k) & 0xFF));
  };
  if constexpr (kT == TensorType::IQ2_XXS) {
    for (uint64_t v : kIQ2XXSGrid) bytes(v, 8);
  } else if constexpr (kT == TensorType::IQ2_XS) {
    for (uint64_t v : kIQ2XSGrid) bytes(v, 8);
  } else if constexpr (kT == TensorType::IQ2_S) {
    for (uint64_t v : kIQ2SGrid) bytes(v, 8);
  } else if constexpr (kT == TensorType::IQ3_XXS) {
    for (uint32_t v : kIQ3XXSGrid) bytes(v, 4);
  } else if constexpr (kT == TensorType::IQ3_S) {
    for (uint32_t v : kIQ3SGrid) bytes(v, 4);
  } else {
    for (uint64_t v : kIQ1SGrid)
      for (int k = 0; k < 8; ++k) {
        const int g = 8 * static_cast<int8_t>(v >> (8 * k) & 0xFF);
        m = std::max({m, g + 1 < 0 ? -(g + 1) : g + 1, g - 1 < 0 ? -(g - 1) : g - 1});
      }
  }
  return m;
}

// Whether the scratch holds the weights halved (and the multipliers doubled):
// IQ3_XXS's grid points are all even (4 .. 62), and at half their size
// (largest 31) four vectors' products fit in one int16 group instead of two
// (Group), which halves the group steps of the tile (the subtraction of the
// correction, the madd and the int32 add). w · m = (w / 2) · (2m) exactly.
template <TensorType kT>
constexpr bool HalvedWeights() {
  if constexpr (kT == TensorType::IQ3_XXS) {
    for (uint32_t v : kIQ3XXSGrid)
      for (int k = 0; k < 4; ++k)
        if ((v >> (8 * k) & 1) != 0) return false;
    return true;
  }
  return false;
}
static_assert(HalvedWeights<TensorType::IQ3_XXS>(), "IQ3_XXS's grid points are even");

// The largest magnitude of a weight in the scratch.
template <TensorType kT>
constexpr int ScratchMagnitude() {
  return HalvedWeights<kT>() ? MaxMagnitude<kT>() / 2 : MaxMagnitude<kT>();
}

// Whether a sub-block's two halves share one multiplier.
template <TensorType kT>
constexpr bool OneMultiplier() {
  return kT == TensorType::IQ2_XXS || kT == TensorType::IQ3_XXS || kT == TensorType::IQ3_S || kT == TensorType::IQ1_S;
}

// Whether the scratch and the activations interleave a sub-block's halves:
// vector v holds weights 2v, 2v + 1, 16 + 2v, 17 + 2v of each row (and the
// broadcast activations the same), so a maddubs's even int16 lanes are
// products of the first half and its odd lanes of the second, and one madd
// operand (m0, m1) applies both multipliers: a group of vectors may then
// cross the halves (IQ2_XS, IQ2_S: groups of 3, 3, 2 vectors).
template <TensorType kT>
constexpr bool Interleaved() {
  return kT == TensorType::IQ2_XS || kT == TensorType::IQ2_S;
}

// The largest number of vectors k whose int16 sum of true products,
// 2 · k per lane of at most m · xmax each, fits in int16 (k in 8, 4, 3, 2;
// 8 and 3 only where a group may cross the halves).
template <TensorType kT>
constexpr int GroupFor(int xmax) {
  constexpr int m = ScratchMagnitude<kT>();
  constexpr bool cross = OneMultiplier<kT>() || Interleaved<kT>();
  if (cross && 2 * 8 * xmax * m <= 32767) return 8;
  if (2 * 4 * xmax * m <= 32767) return 4;
  if (cross && 2 * 3 * xmax * m <= 32767) return 3;
  return 2;
}

// Whether the group size relies on the activations lying in [-127, 127]
// (every activation rounding of act_rounding.cpp: q = round(x · 127 /
// max|x|), clamped to 127): the IQ2 types (largest weight 43: 6 products of
// 43 · 127 = 32766 fit, of 43 · 128 not). A token block with a -128 takes
// the decode path instead (LatticeMatMulT).
template <TensorType kT>
constexpr bool Needs127() {
  return GroupFor<kT>(127) > GroupFor<kT>(128);
}

// The prefill tile meets the signed weights w with the activations made
// unsigned, xu = x + 128 (x ^ 0x80), in maddubs, and takes 128 · Σ w back
// out: Σ w x = Σ w xu - 128 · Σ w. It sums a group of up to kGroup vectors'
// maddubs in int16 (wrapping adds), subtracts the group's correction (the
// same wrapping sum of maddubs(128, w), decoded once with the weights) and
// then applies the multipliers in the madd. Exact: a maddubs pair sum
// |w| · 2 · 255 does not saturate, and the group's true value Σ w x over
// 2 · kGroup products per int16 lane, |w| · |x| each, fits in int16, so
// the wrapped result is that value. A group lies in one half unless the
// halves share a multiplier or are interleaved. Groups: vectors kGroup · g
// .. min(8, kGroup · (g + 1)) - 1.
template <TensorType kT>
constexpr int Group() {
  constexpr int m = ScratchMagnitude<kT>();
  static_assert(2 * 255 * m <= 32767, "a maddubs pair sum must not saturate");
  static_assert(2 * 2 * 128 * m <= 32767, "a group of two vectors must fit in int16");
  return GroupFor<kT>(Needs127<kT>() ? 127 : 128);
}
template <TensorType kT>
constexpr int NumGroups() {
  return (8 + Group<kT>() - 1) / Group<kT>();
}
static_assert(Group<TensorType::IQ2_XS>() == 3 && NumGroups<TensorType::IQ2_XS>() == 3);
static_assert(Group<TensorType::IQ3_XXS>() == 4 && !Needs127<TensorType::IQ3_XXS>());

// 8 rows' sub-block in the R8 layout: w[v] byte 4r + i = signed weight
// 4v + i of row r; mul[h] int16 lanes 2r, 2r + 1 = row r's multiplier of
// half h (weights 16h ..); corr[g] int16 lanes 2r + p = 128 · Σ of row r's
// weights 4v + 2p, 4v + 2p + 1 over group g's vectors v (wrapped in int16
// like the tile's sums; Group). Rows past the group's end are zero.
// (Plain arrays, read and written unaligned: the scratch is a std::vector.)
struct DecodedSub {
  int8_t w[8][32];
  int16_t mul[2][16];
  int16_t corr[4][16];
};
struct DecodedSuper {
  float scale[8];  // row r's d · unit
  DecodedSub sub[8];
};

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void Store(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// v[r] (8 int32 of row r) -> v[c] (element c of the 8 rows): an 8 × 8
// transpose of 32-bit elements, so vector c holds weights 4c .. 4c+3 of
// every row.
inline void Transpose8(__m256i* v) {
  __m256i t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {  // rows 4k .. 4k+3
    u[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);      // elements 0 | 4
    u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);      // 1 | 5
    u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);  // 2 | 6
    u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);  // 3 | 7
  }
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    v[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

// Sub-block j's 32 signed weights as the scratch holds them (HalvedWeights: w / 2).
template <TensorType kT>
inline __m256i ScratchSub(const uint8_t* b, const Aux& x, int j) {
  if constexpr (HalvedWeights<kT>()) {
    __m256i q, neg, mul;
    SubParts<kT>(b, x, j, &q, &neg, &mul);
    q = _mm256_and_si256(_mm256_srli_epi16(q, 1), _mm256_set1_epi8(0x7F));  // even magnitudes: exact
    return _mm256_sub_epi8(_mm256_xor_si256(q, neg), neg);
  } else {
    return SignedSub<kT>(b, x, j);
  }
}

// The byte order of Interleaved: bytes 0..31 -> 0 1 16 17 2 3 18 19 ..
// 14 15 30 31 (weights or activations of one sub-block).
inline __m256i InterleaveHalves(__m256i v) {
  const __m256i idx = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,  //
                                       0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  return _mm256_shuffle_epi8(_mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0)), idx);
}

// Decodes a group of rows into out (g.nsb super-blocks): each row's fields
// taken apart per super-block as the decode path does (Prep), then its
// signed weights per sub-block (SignedSub) transposed to the R8 layout.
template <TensorType kT, bool kFull>
void DecodeRows(const Rows& g, DecodedSuper* out) {
  Aux aux[8];
  constexpr int kG = Group<kT>();
  const __m256i k128 = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t s = 0; s < g.nsb; ++s) {
    alignas(32) float sc[8] = {};
    __m256i mm[8];
    for (int r = 0; r < 8; ++r) {
      if (kFull || r < g.n) {
        const uint8_t* b = g.w + r * g.row_bytes + s * g.bb;
        sc[r] = RowScale<kT>(b);
        Prep<kT>(b, aux[r]);
        mm[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(aux[r].mul));
      } else {
        mm[r] = _mm256_setzero_si256();
      }
    }
    std::memcpy(out[s].scale, sc, sizeof(sc));
    Transpose8(mm);  // mm[j] lane r: row r's m0 | m1 << 16 of sub-block j
    if constexpr (HalvedWeights<kT>())
      for (int j = 0; j < 8; ++j) mm[j] = _mm256_slli_epi16(mm[j], 1);  // 2m <= 62
    for (int j = 0; j < 8; ++j) {
      __m256i w[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r)
        w[r] = kFull || r < g.n ? ScratchSub<kT>(g.w + r * g.row_bytes + s * g.bb, aux[r], j) : _mm256_setzero_si256();
      if constexpr (Interleaved<kT>())
        for (int r = 0; r < 8; ++r) w[r] = InterleaveHalves(w[r]);
      Transpose8(w);
      DecodedSub& o = out[s].sub[j];
      for (int v = 0; v < 8; ++v) Store(o.w[v], w[v]);
      for (int gi = 0; gi < NumGroups<kT>(); ++gi) {
        __m256i c = _mm256_maddubs_epi16(k128, w[kG * gi]);
        for (int v = kG * gi + 1; v < std::min(8, kG * (gi + 1)); ++v)
          c = _mm256_add_epi16(c, _mm256_maddubs_epi16(k128, w[v]));
        Store(o.corr[gi], c);
      }
      if constexpr (Interleaved<kT>()) {  // int16 lanes 2r, 2r + 1: m0, m1 of row r
        Store(o.mul[0], mm[j]);
        continue;
      }
      Store(o.mul[0],
            _mm256_or_si256(_mm256_and_si256(mm[j], _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(mm[j], 16)));
      Store(o.mul[1], _mm256_or_si256(_mm256_srli_epi32(mm[j], 16),
                                      _mm256_and_si256(mm[j], _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)))));
    }
  }
}

inline __m256i Bcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// T tokens against G decoded groups of 8 rows (d[h]: group h's scratch):
// acc[G · t + h] lane r = row 8h + r's dot product with token t. xu[t]:
// token t's activations as xu = x + 128 (Group: a maddubs of xu with the
// signed weights per vector, kGroup of them summed in int16, the group's
// correction taken off, the multipliers in the madd, exact in int32). With
// two groups each broadcast activation feeds two maddubs.
template <TensorType kT, int T, int G>
inline void DecodedTile(const DecodedSuper* const* d, int64_t nsb, const BlockQ8Act* const* xu, int64_t xs,
                        __m256* acc_out) {
  constexpr int kG = Group<kT>(), kNG = NumGroups<kT>();
  __m256 acc[G * T];  // a local copy: kept in registers
  for (int i = 0; i < G * T; ++i) acc[i] = acc_out[i];
  for (int64_t s = 0; s < nsb; ++s) {
    for (int j = 0; j < 8; ++j) {
      const int64_t b = xs * s + j;
      __m256i is[G * T];
#pragma GCC unroll 4
      for (int gi = 0; gi < kNG; ++gi) {
        __m256i s16[G * T];
#pragma GCC unroll 8
        for (int v = 0; v < kG; ++v) {
          if (kG * gi + v >= 8) break;  // the last group of 3, 3, 2
          __m256i w[G];
#pragma GCC unroll 2
          for (int h = 0; h < G; ++h) {
            w[h] = Load(d[h][s].sub[j].w[kG * gi + v]);
            if constexpr (T > 1) __asm__("" : "+x"(w[h]));  // one load for the T tokens
          }
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i x = Bcast4(xu[t][b].qs + 4 * (kG * gi + v));
#pragma GCC unroll 2
            for (int h = 0; h < G; ++h) {
              const __m256i p = _mm256_maddubs_epi16(x, w[h]);
              s16[G * t + h] = v == 0 ? p : _mm256_add_epi16(s16[G * t + h], p);
              if constexpr (G * T > 1) __asm__("" : "+x"(s16[G * t + h]));  // a chain, not a tree: fewer registers
            }
          }
        }
#pragma GCC unroll 2
        for (int h = 0; h < G; ++h) {
          const DecodedSub& p = d[h][s].sub[j];
          const __m256i mul = Load(p.mul[Interleaved<kT>() ? 0 : gi * kG / 4]);
          const __m256i corr = Load(p.corr[gi]);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i s32 = _mm256_madd_epi16(_mm256_sub_epi16(s16[G * t + h], corr), mul);
            is[G * t + h] = gi == 0 ? s32 : _mm256_add_epi32(is[G * t + h], s32);
            __asm__("" : "+x"(is[G * t + h]));  // keep the sums in order (no reassociation into a tree)
          }
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < G; ++h) {
        const __m256 scale = _mm256_loadu_ps(d[h][s].scale);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          acc[G * t + h] = _mm256_fmadd_ps(_mm256_mul_ps(scale, _mm256_set1_ps(xu[t][b].d)),
                                           _mm256_cvtepi32_ps(is[G * t + h]), acc[G * t + h]);
      }
    }
  }
  for (int i = 0; i < G * T; ++i) acc_out[i] = acc[i];
}

// Stores n rows of one token's outputs at y.
inline void StoreRows(const float* v, int n, bool accumulate, float* y) {
  for (int r = 0; r < n; ++r) y[r] = accumulate ? y[r] + v[r] : v[r];
}

// Tokens t .. t + T - 1 of the block (nt tokens) against super-blocks s0 ..
// s0 + ns - 1 of G decoded groups: acc[16 t + 8 h + r] is row 8h + r's
// running sum for token t, kept between the chunks of super-blocks in the
// order of the sub-blocks (s0 = 0 starts it). xu: the block's unsigned
// activations, super-block major (xu[(s · nt + t) · 8 + j]).
template <TensorType kT, int T, int G>
inline void RunChunk(const DecodedSuper* const* d, int64_t s0, int64_t ns, const BlockQ8Act* xu, int64_t nt, int64_t t,
                     float* acc_buf) {
  __m256 acc[G * T];
  const BlockQ8Act* xt[T];
  const DecodedSuper* dd[G];
  for (int i = 0; i < T; ++i) {
    xt[i] = xu + (s0 * nt + t + i) * 8;
    for (int h = 0; h < G; ++h)
      acc[G * i + h] = s0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(acc_buf + 16 * (t + i) + 8 * h);
  }
  for (int h = 0; h < G; ++h) dd[h] = d[h] + s0;
  DecodedTile<kT, T, G>(dd, ns, xt, 8 * nt, acc);
  for (int i = 0; i < T; ++i)
    for (int h = 0; h < G; ++h) _mm256_storeu_ps(acc_buf + 16 * (t + i) + 8 * h, acc[G * i + h]);
}

// All the tokens tb .. te of a block against G decoded groups of rows from
// r0 (n rows in all), kChunk super-blocks at a time: the chunk's scratch
// (G · kChunk · 3.6 KB) stays in L1 while every token meets it.
template <TensorType kT, int G>
inline void RunBlock(const MatMulArgs& a, const DecodedSuper* const* d, int64_t nsb, int64_t r0, int n,
                     const BlockQ8Act* xu, int64_t tb, int64_t te, float* acc_buf) {
  constexpr int kT4 = G == 1 ? 4 : kTileTokens16;
  const int64_t nt = te - tb;
  for (int64_t s0 = 0; s0 < nsb; s0 += kChunk) {
    const int64_t ns = std::min<int64_t>(kChunk, nsb - s0);
    int64_t t = 0;
    for (; t + kT4 <= nt; t += kT4) RunChunk<kT, kT4, G>(d, s0, ns, xu, nt, t, acc_buf);
    if constexpr (kT4 > 2) {
      if (t + 2 <= nt) {
        RunChunk<kT, 2, G>(d, s0, ns, xu, nt, t, acc_buf);
        t += 2;
      }
    }
    if (t < nt) RunChunk<kT, 1, G>(d, s0, ns, xu, nt, t, acc_buf);
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int h = 0; h < G; ++h)
      StoreRows(acc_buf + 16 * t + 8 * h, std::min(8, n - 8 * h), a.accumulate, a.y + (tb + t) * a.ld_y + r0 + 8 * h);
}

template <TensorType kT>
void LatticeMatMulT(const MatMulArgs& a) {
  int64_t be = 0, bb = 0;
  TensorTypeLayout(kT, &be, &bb);
  const int64_t nsb = a.w->cols / 256;
  const size_t rb = a.w->row_bytes;
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  auto rows_at = [&](int64_t r0) {
    const int n = static_cast<int>(std::min<int64_t>(8, a.row_end - r0));
    return Rows{base + r0 * rb, rb, n, nsb, bb};
  };
  // tokens t0 .. t1 - 1 one at a time (the decode path)
  auto direct = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const BlockQ8Act* x = a.xq + t * a.ld_xq;
      for (int64_t r0 = a.row_begin; r0 < a.row_end; r0 += 8) {
        const Rows g = rows_at(r0);
        const uint8_t* next = r0 + 16 <= a.row_end ? g.w + 8 * rb : nullptr;
        alignas(32) float v[8];
        if (g.n == 8) {
          DirectGroup<kT, true>(g, next, x, v);
        } else {
          DirectGroup<kT, false>(g, next, x, v);
        }
        StoreRows(v, g.n, a.accumulate, a.y + t * a.ld_y + r0);
      }
    }
  };
  if (a.n_tok < kScratchMinTokens) {
    direct(0, a.n_tok);
    return;
  }
  thread_local std::vector<DecodedSuper> scratch;
  thread_local std::vector<BlockQ8Act> xu;  // the token block's activations + 128, super-block major
  thread_local std::vector<float> acc_buf;  // 16 rows' running sums per token of the block
  acc_buf.resize(static_cast<size_t>(16 * std::min(kTokBlock, a.n_tok)));
  scratch.resize(static_cast<size_t>(2 * nsb));
  const DecodedSuper* const d[2] = {scratch.data(), scratch.data() + nsb};
  const int64_t nb = 8 * nsb;
  xu.resize(static_cast<size_t>(std::min(kTokBlock, a.n_tok) * nb));
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = std::min(tb + kTokBlock, a.n_tok);
    const int64_t nt = te - tb;
    const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i m128 = _mm256_setzero_si256();  // where an activation is -128
    for (int64_t t = tb; t < te; ++t) {
      for (int64_t i = 0; i < nb; ++i) {  // block i of token t to xu[((i / 8) · nt + t - tb) · 8 + i % 8]
        const BlockQ8Act& x = a.xq[t * a.ld_xq + i];
        BlockQ8Act& u = xu[static_cast<size_t>(((i / 8) * nt + (t - tb)) * 8 + i % 8)];
        u.d = x.d;
        u.s = x.s;
        __m256i q = Load(x.qs);
        if constexpr (Needs127<kT>()) m128 = _mm256_or_si256(m128, _mm256_cmpeq_epi8(q, k80));
        if constexpr (Interleaved<kT>()) q = InterleaveHalves(q);
        Store(u.qs, _mm256_xor_si256(q, k80));
      }
    }
    if (Needs127<kT>() && !_mm256_testz_si256(m128, m128)) {  // outside the groups' bound (Needs127)
      direct(tb, te);
      continue;
    }
    int64_t r0 = a.row_begin;
    for (; r0 + 8 < a.row_end; r0 += 16) {  // two groups, the second maybe partial
      const Rows g0 = rows_at(r0), g1 = rows_at(r0 + 8);
      DecodeRows<kT, true>(g0, scratch.data());
      if (g1.n == 8) {
        DecodeRows<kT, true>(g1, scratch.data() + nsb);
      } else {
        DecodeRows<kT, false>(g1, scratch.data() + nsb);
      }
      RunBlock<kT, 2>(a, d, nsb, r0, 8 + g1.n, xu.data(), tb, te, acc_buf.data());
    }
    for (; r0 < a.row_end; r0 += 8) {  // a last group of up to 8 rows
      const Rows g = rows_at(r0);
      if (g.n == 8) {
        DecodeRows<kT, true>(g, scratch.data());
      } else {
        DecodeRows<kT, false>(g, scratch.data());
      }
      RunBlock<kT, 1>(a, d, nsb, r0, g.n, xu.data(), tb, te, acc_buf.data());
    }
  }
}

// One row against one token: the decode path's group of one row.
template <TensorType kT>
float LatticeDotT(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  int64_t be = 0, bb = 0;
  TensorTypeLayout(kT, &be, &bb);
  alignas(32) float v[8];
  DirectGroup<kT, false>(Rows{w, 0, 1, nb / 8, bb}, nullptr, x, v);
  return v[0];
}

}  // namespace

bool LatticeMatMul(const MatMulArgs& a) {
  switch (a.w->type) {
    case TensorType::IQ2_XXS: LatticeMatMulT<TensorType::IQ2_XXS>(a); return true;
    case TensorType::IQ2_XS: LatticeMatMulT<TensorType::IQ2_XS>(a); return true;
    case TensorType::IQ2_S: LatticeMatMulT<TensorType::IQ2_S>(a); return true;
    case TensorType::IQ3_XXS: LatticeMatMulT<TensorType::IQ3_XXS>(a); return true;
    case TensorType::IQ3_S: LatticeMatMulT<TensorType::IQ3_S>(a); return true;
    case TensorType::IQ1_S: LatticeMatMulT<TensorType::IQ1_S>(a); return true;
    case TensorType::IQ1_M: LatticeMatMulT<TensorType::IQ1_M>(a); return true;
    default: return false;
  }
}

QuantDotFn LatticeDot(TensorType type) {
  switch (type) {
    case TensorType::IQ2_XXS: return LatticeDotT<TensorType::IQ2_XXS>;
    case TensorType::IQ2_XS: return LatticeDotT<TensorType::IQ2_XS>;
    case TensorType::IQ2_S: return LatticeDotT<TensorType::IQ2_S>;
    case TensorType::IQ3_XXS: return LatticeDotT<TensorType::IQ3_XXS>;
    case TensorType::IQ3_S: return LatticeDotT<TensorType::IQ3_S>;
    case TensorType::IQ1_S: return LatticeDotT<TensorType::IQ1_S>;
    case TensorType::IQ1_M: return LatticeDotT<TensorType::IQ1_M>;
    default: return nullptr;
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
