// The packed tile of the 4-bit codebook types, IQ4_NL, IQ4_XS and MXFP4
// (PackedIQ4NL, PackedIQ4XS, PackedMXFP4: quant_pack.h). Not a normal header:
// quant_packed_x86.h includes it inside its anonymous namespace, after the
// helpers it uses (PrefetchBlock, LoadScales, Bcast4, DotAdd), so it is
// compiled twice too, for AVX2 and for AVX-512 VNNI.
//
// A block's indices are looked up in the 16-entry codebook kIQ4NLValues
// (signed, -127..113; MXFP4: kE2M1Values, -12..12) by one byte shuffle per
// vector, shared by the tile's tokens. The int8 products then go to int32 lanes exactly:
//
//   AVX2   maddubs(|w|, sign(x, w)): |w| <= 127 and |x| <= 127, so a pair
//          sum is at most 2 · 127 · 127 = 32258 < 2^15 (the offset form
//          (w + 127) · x would reach 2 · 240 · 127 and saturate); each is
//          widened at once by madd with the int16 multiplier: 1 for IQ4_NL,
//          IQ4_XS's row scale ls - 32 (at most 2 · 32258 · 32 per lane).
//          MXFP4's |w| <= 12 lets a block's pair sums add up in int16 first.
//   VNNI   the codebook shifted by 128 (unsigned, 1..241) against x in
//          vpdpbusd, no int16 step; Σ (w + 128) x - 128 Σ x is Σ w x, with
//          Σ x per token and block from ActSums; IQ4_XS's scale then
//          multiplies the int32 sum.
//
// Either way lane r holds row r's exact Σ w x (IQ4_XS: (ls - 32) · Σ w x,
// at most 32 · 32 · 127 · 127 < 2^24), and each block adds
//
//   acc = fma(d_w · d_x, float(isum), acc)
//
// in block order (MXFP4's d_w: 2^(e - 128), made exactly from the exponent
// bits): generic::DotR8IQ4 (quant_generic.cpp) in the same order.
// Like PackedQ8Tile (the same multiplies per vector), one row group per
// tile: no pair of groups. AVX2 IQ4_XS prefill (many tokens) runs instead on
// int16 weights decoded once per token block: IQ4XS16Tile2, below.

template <class B>
inline constexpr bool kIQ4 =
    std::is_same_v<B, PackedIQ4NL> || std::is_same_v<B, PackedIQ4XS> || std::is_same_v<B, PackedMXFP4>;
// Packed elements per 32-weight block's worth: IQ4_XS holds 8 sub-blocks.
template <class B>
inline constexpr int64_t kIQ4Sub = std::is_same_v<B, PackedIQ4XS> ? 8 : 1;

// 8 E8M0 exponents e as F32 2^(e - 128), bit for bit MXFP4Scale's: the
// exponent field e - 1, or for e < 2 the subnormal 2^21 << e (times 2^-149).
inline __m256 E8M0Scales(const uint8_t* e) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

// Block b's indices (128 bytes) and the 8 row scales d_w of a group.
inline const uint8_t* IQ4Indices(const PackedIQ4NL* w, int64_t b) { return w[b].qs; }
inline const uint8_t* IQ4Indices(const PackedMXFP4* w, int64_t b) { return w[b].qs; }
inline const uint8_t* IQ4Indices(const PackedIQ4XS* w, int64_t b) { return w[b / 8].sub[b % 8].qs; }
inline __m256 IQ4Scales(const PackedIQ4NL* w, int64_t b) { return LoadScales(w[b].d); }
inline __m256 IQ4Scales(const PackedMXFP4* w, int64_t b) { return E8M0Scales(w[b].e); }
inline __m256 IQ4Scales(const PackedIQ4XS* w, int64_t b) { return LoadScales(w[b / 8].d); }

inline void IQ4Prefetch(const PackedIQ4NL* next, int64_t b) { PrefetchBlock<sizeof(PackedIQ4NL)>(next + b); }
inline void IQ4Prefetch(const PackedMXFP4* next, int64_t b) { PrefetchBlock<sizeof(PackedMXFP4)>(next + b); }
inline void IQ4Prefetch(const PackedIQ4XS* next, int64_t b) {
  if (b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(next[b / 8].d), _MM_HINT_T0);
  PrefetchBlock<sizeof(PackedIQ4XSSub)>(&next[b / 8].sub[b % 8]);
}

// IQ4_XS: block b's 8 row scales ls - 32 as int32 lanes (lane r: row r).
inline __m256i IQ4XSRowScales(const PackedIQ4XS* w, int64_t b) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w[b / 8].sub[b % 8].sc)));
}

// B's codebook in both 128-bit halves (VNNI: shifted by 128, unsigned).
template <class B>
inline __m256i IQ4Codebook() {
  const int8_t* values = std::is_same_v<B, PackedMXFP4> ? kE2M1Values : kIQ4NLValues;
  const __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
#if LLM_PACKED_VNNI
  return _mm256_xor_si256(cb, _mm256_set1_epi8(-128));  // w + 128
#else
  return cb;
#endif
}

// T tokens against one row group. xs: VNNI's activation sums (ActSums; token
// t's at xs[t][2b], xs[t][2b + 1]), else unused.
template <class B, int T>
inline void PackedIQ4Tile(const B* w, const B* next, int64_t nb, const BlockQ8Act* const* xq,
                          [[maybe_unused]] const int32_t* const* xs, __m256* acc) {
  const __m256i codebook = IQ4Codebook<B>(), low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    IQ4Prefetch(next, b);
    const uint8_t* q = IQ4Indices(w, b);
#if LLM_PACKED_VNNI
    __m256i ia[T], ib[T];  // low and high indices' sums: two chains (see NibbleDot)
#else
    __m256i mul = _mm256_set1_epi16(1);  // the pair sums' multiplier: 1, or IQ4_XS's ls - 32 in both halves
    if constexpr (std::is_same_v<B, PackedIQ4XS>) {
      const __m256i sc = IQ4XSRowScales(w, b);
      mul = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
    }
    __m256i is[T];
#endif
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i pv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q) + v);
      // weights 4v + i (lo) and 4v + 16 + i (hi) of each row
      const __m256i lo = _mm256_shuffle_epi8(codebook, _mm256_and_si256(pv, low4));
      const __m256i hi = _mm256_shuffle_epi8(codebook, _mm256_and_si256(_mm256_srli_epi16(pv, 4), low4));
#if LLM_PACKED_VNNI
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* x = xq[t][b].qs;
        DotAdd(v == 0, ia[t], lo, Bcast4(x + 4 * v));
        DotAdd(v == 0, ib[t], hi, Bcast4(x + 4 * v + 16));
      }
#else
      const __m256i ulo = _mm256_abs_epi8(lo), uhi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* x = xq[t][b].qs;
        const __m256i pl = _mm256_maddubs_epi16(ulo, _mm256_sign_epi8(Bcast4(x + 4 * v), lo));
        const __m256i ph = _mm256_maddubs_epi16(uhi, _mm256_sign_epi8(Bcast4(x + 4 * v + 16), hi));
        if constexpr (std::is_same_v<B, PackedMXFP4>) {
          // |w| <= 12: all 8 vectors' pair sums (2 · 12 · 127 each) add up
          // in int16 (at most 24384) and widen once
          const __m256i s = _mm256_add_epi16(pl, ph);
          is[t] = v == 0 ? s : _mm256_add_epi16(is[t], s);
          if (v == 3) is[t] = _mm256_madd_epi16(is[t], mul);
        } else {
          const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(pl, mul), _mm256_madd_epi16(ph, mul));
          is[t] = v == 0 ? s : _mm256_add_epi32(is[t], s);
        }
        __asm__("" : "+x"(is[t]));  // keep the sums in order (no reassociation into a tree)
      }
#endif
    }
    const __m256 dw = IQ4Scales(w, b);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#if LLM_PACKED_VNNI
      __m256i isum = _mm256_sub_epi32(_mm256_add_epi32(ia[t], ib[t]),
                                      _mm256_set1_epi32(128 * (xs[t][2 * b] + xs[t][2 * b + 1])));
      if constexpr (std::is_same_v<B, PackedIQ4XS>) isum = _mm256_mullo_epi32(isum, IQ4XSRowScales(w, b));
#else
      const __m256i isum = is[t];
#endif
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xq[t][b].d)), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
}

#if !LLM_PACKED_VNNI
// ---------------------------------------------------------------- IQ4_XS prefill: int16 weights
//
// With enough tokens (kIQ4XS16MinTok) the AVX2 IQ4_XS matmul decodes each row
// group's blocks once per token block into int16 weights with the sub-block
// scale folded in, w · (ls - 32): |w| <= 127 and |ls - 32| <= 32, so at most
// 4064, and one madd against int16 activations (|x| <= 127) forms two exact
// products per int32 lane (2 · 4064 · 127 < 2^31), no sign trick, no int16
// saturation: per token and block 16 madd + 16 add, where PackedIQ4Tile
// issues 24 ops on the two ports that madd, maddubs, sign and shuffles
// share on Zen 3. A block's int32 sum is (ls - 32) · Σ w x, the integer
// PackedIQ4Tile and generic::DotR8IQ4 form (at most 32 · 32 · 127 · 127 <
// 2^24 in any order of the adds), and the float step is theirs:
// acc = fma(d_w · d_x, float(isum), acc) in block order.
//
// Decoded block: 16 vectors; vector p, int32 lane r: row r's weights 2p and
// 2p + 1 (times its scale) as int16. Activations: a token's block as 32
// int16, so the int32 p is the pair (x_2p, x_2p+1), broadcast per madd.
struct IQ4XS16Block {
  __m256i p[16];
};

// The row group w's nb blocks into out.
inline void DecodeIQ4XS16(const PackedIQ4XS* w, int64_t nb, IQ4XS16Block* out) {
  const __m256i codebook = IQ4Codebook<PackedIQ4XS>(), low4 = _mm256_set1_epi8(0x0F);
  // each 128-bit half (rows 4h .. 4h + 3, bytes 4r + i: weight 4v + i or
  // 4v + 16 + i): the rows' bytes 0, 1 first, then 2, 3
  const __m256i pairs =
      _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* q = IQ4Indices(w, b);
    const __m256i sc = IQ4XSRowScales(w, b);
    const __m256i mul = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
    __m256i* o = out[b].p;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i pv = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q) + v), pairs);
      const __m256i lo = _mm256_shuffle_epi8(codebook, _mm256_and_si256(pv, low4));
      const __m256i hi = _mm256_shuffle_epi8(codebook, _mm256_and_si256(_mm256_srli_epi16(pv, 4), low4));
      // bytes to the high half of int16 lanes, shifted down with their sign
      auto widen = [&](__m256i u) { return _mm256_mullo_epi16(_mm256_srai_epi16(u, 8), mul); };
      _mm256_store_si256(o + 2 * v, widen(_mm256_unpacklo_epi8(zero, lo)));          // weights 4v, 4v + 1
      _mm256_store_si256(o + 2 * v + 1, widen(_mm256_unpackhi_epi8(zero, lo)));      // 4v + 2, 4v + 3
      _mm256_store_si256(o + 8 + 2 * v, widen(_mm256_unpacklo_epi8(zero, hi)));      // 4v + 16, 4v + 17
      _mm256_store_si256(o + 8 + 2 * v + 1, widen(_mm256_unpackhi_epi8(zero, hi)));  // 4v + 18, 4v + 19
    }
  }
}

// Token blocks' int8 activations as int16 (32 per block).
inline void WidenActs(const BlockQ8Act& x, int16_t* out) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out) + 1, _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
}

// T tokens against one decoded row group d (w: its packed blocks, for d_w).
// x16[t]: token t's activations as int16 (nb · 32); xq[t]: its blocks (d_x).
template <int T>
inline void IQ4XS16Tile(const IQ4XS16Block* d, const PackedIQ4XS* w, int64_t nb, const int16_t* const* x16,
                        const BlockQ8Act* const* xq, __m256* acc) {
  for (int64_t b = 0; b < nb; ++b) {
    __m256i is[T];
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      const __m256i wp = _mm256_load_si256(d[b].p + p);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t xp;
        std::memcpy(&xp, x16[t] + 32 * b + 2 * p, 4);
        const __m256i m = _mm256_madd_epi16(wp, _mm256_set1_epi32(xp));
        is[t] = p == 0 ? m : _mm256_add_epi32(is[t], m);
        __asm__("" : "+x"(is[t]));  // one running sum per token (GCC's add trees spill)
      }
    }
    const __m256 dw = IQ4Scales(w, b);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xq[t][b].d)), _mm256_cvtepi32_ps(is[t]), acc[t]);
  }
}

// T tokens against two decoded row groups d0, d1 (w0, w1: their packed
// blocks): each broadcast pair of activations meets 16 rows.
template <int T>
inline void IQ4XS16Tile2(const IQ4XS16Block* d0, const IQ4XS16Block* d1, const PackedIQ4XS* w0,
                         const PackedIQ4XS* w1, int64_t nb, const int16_t* const* x16, const BlockQ8Act* const* xq,
                         __m256* acc) {
  for (int64_t b = 0; b < nb; ++b) {
    __m256i is0[T], is1[T];
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      const __m256i wp0 = _mm256_load_si256(d0[b].p + p), wp1 = _mm256_load_si256(d1[b].p + p);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t xp;
        std::memcpy(&xp, x16[t] + 32 * b + 2 * p, 4);
        const __m256i xv = _mm256_set1_epi32(xp);
        const __m256i m0 = _mm256_madd_epi16(wp0, xv), m1 = _mm256_madd_epi16(wp1, xv);
        is0[t] = p == 0 ? m0 : _mm256_add_epi32(is0[t], m0);
        is1[t] = p == 0 ? m1 : _mm256_add_epi32(is1[t], m1);
        __asm__("" : "+x"(is0[t]), "+x"(is1[t]));  // one running sum per token and group
      }
    }
    const __m256 dw0 = IQ4Scales(w0, b), dw1 = IQ4Scales(w1, b);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(xq[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw0, xd), _mm256_cvtepi32_ps(is0[t]), acc[t]);
      acc[T + t] = _mm256_fmadd_ps(_mm256_mul_ps(dw1, xd), _mm256_cvtepi32_ps(is1[t]), acc[T + t]);
    }
  }
}
#endif  // !LLM_PACKED_VNNI
