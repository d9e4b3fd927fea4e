// The packed tile of Q2_K and Q3_K (PackedQ2K, PackedQ3K: quant_pack_k23.h).
// Not a normal header: quant_packed_x86.h includes it inside its anonymous
// namespace, after PrefetchBlock, LoadScales, Bcast4 and (VNNI) DotAdd, so
// it is compiled once per LLM_PACKED_VNNI as the other tiles are.
//
// Per sub-block (32 weights, 8 rows) and token, with D_h the dot product of
// the unsigned quants u of half h (quants 16h..16h+15) with the activations
// x and S_h = Σ x over that half (exact int32):
//
//   Q2_K (u = q):      isum = sc_0·D_0 + sc_1·D_1        corr = m_0·S_0 + m_1·S_1
//                      acc  = fma(d·d_x, isum, acc);  acc = fma(-dmin·d_x, corr, acc)
//   Q3_K (u = q + 4):  isum = sc_0·D_0 + sc_1·D_1 - (4·sc_0·S_0 + 4·sc_1·S_1)
//                      acc  = fma(d·d_x, isum, acc)
//
// isum is Σ sc·q·x of the row-major dot exactly (Q3_K: Σ sc·(u - 4)·x), so
// the float steps are the portable DotQ2_K<true> / DotQ3_K<true>'s, in their order.
//
// AVX2: u·x by maddubs (u ≤ 7, |x| ≤ 128: a pair sum ≤ 1792), the four
// vectors of a half summed in int16 (≤ 7168 < 2^15), then one madd with the
// row's scale in both int16 lanes of the row: the scale and the widening to
// int32 in one instruction. VNNI: D_h straight into int32 lanes, scaled by
// a 32-bit multiply. Either way the corrections are one madd of the int16
// pairs (lane 2r + h: m_h or 4·sc_h of row r) with the token's pair
// (S_0, S_1) broadcast (|S_h| ≤ 16·128, 4·|sc| ≤ 128: int16).
//
// Measured on the 2-vCPU EPYC (Zen 3, AVX2), one thread, thread CPU time,
// 8192x2048 and 2048x2048 matrices, against the row-major MatMulT of the
// same build: Q2_K 3.5-5.0x at 1 token, 3.6-3.8x at 128; Q3_K 5.8x and
// 3.5-3.9x: about the packed Q4_K's GMAC/s (Q2_K 46-61 GMAC/s at 128 tokens,
// Q3_K 50-57, Q4_K 56-83, under a load of 12-19).

template <class B>
inline constexpr bool kK23 = std::is_same_v<B, PackedQ2K> || std::is_same_v<B, PackedQ3K>;

// The activation sums (ActSums: S_0, S_1 of each block) as the int16 pairs
// the tile's madd takes: s[2i] = S_0 | S_1 << 16 (|S_h| ≤ 16·128 fits),
// made once per token and block, not per row group.
inline void PackSumPairs(int32_t* s, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i)
    s[2 * i] = static_cast<int32_t>(static_cast<uint16_t>(s[2 * i]) | static_cast<uint32_t>(s[2 * i + 1]) << 16);
}

// xs: token t's pair of block b at xs[t][2b] (PackSumPairs).
template <class B, int T>
inline void PackedK23Tile(const B* w, const B* next, int64_t nb, const BlockQ8Act* const* xq,
                          const int32_t* const* xs, __m256* acc) {
  constexpr bool kQ3 = std::is_same_v<B, PackedQ3K>;
  const __m256i three = _mm256_set1_epi8(3);
  [[maybe_unused]] const __m256i four = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < nb; ++b) {
    if (b % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(next[b / 8].d), _MM_HINT_T0);
    PrefetchBlock<sizeof(next->sub[0])>(&next[b / 8].sub[b % 8]);
    const B& s = w[b / 8];
    const auto& p = s.sub[b % 8];
    const __m256i* ql = reinterpret_cast<const __m256i*>(p.ql);
    __m256i h3 = _mm256_setzero_si256();  // Q3_K: the third bits
    if constexpr (kQ3) h3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.qh));
    __m256i d0[T], d1[T];  // [t]: half 0's and half 1's sums (AVX2: int16 pairs; VNNI: int32)
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      const int k = v % 4;
      __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256(ql + v / 4), 2 * k), three);
      if constexpr (kQ3) {
        // bit v of each byte to bit 2 (16-bit shifts: what crosses a byte falls outside the mask)
        const __m256i hv = v <= 2 ? _mm256_slli_epi16(h3, 2 - v) : _mm256_srli_epi16(h3, v - 2);
        u = _mm256_or_si256(u, _mm256_and_si256(hv, four));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256i& dh = v < 4 ? d0[t] : d1[t];
        const __m256i x = Bcast4(xq[t][b].qs + 4 * v);
#if LLM_PACKED_VNNI
        DotAdd(k == 0, dh, u, x);
#else
        const __m256i m = _mm256_maddubs_epi16(u, x);
        dh = k == 0 ? m : _mm256_add_epi16(dh, m);
        __asm__("" : "+x"(dh));  // keep the sums in order (no reassociation into a tree)
#endif
      }
    }
    // int16 lane 2r + h: row r's scale (and Q2_K: minimum) of half h
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.sc));
    __m256i sc, corr;
    if constexpr (kQ3) {
      sc = _mm256_cvtepi8_epi16(sc8);
      corr = _mm256_slli_epi16(sc, 2);  // 4·sc
    } else {
      const __m256i sm = _mm256_cvtepu8_epi16(sc8);
      sc = _mm256_and_si256(sm, _mm256_set1_epi16(0x0F));
      corr = _mm256_srli_epi16(sm, 4);
    }
#if LLM_PACKED_VNNI
    // int32 lane r: row r's scale of half 0 (sign-extended low half) and of half 1
    const __m256i sc0 = _mm256_srai_epi32(_mm256_slli_epi32(sc, 16), 16), sc1 = _mm256_srai_epi32(sc, 16);
#else
    // both int16 lanes of row r: its scale of half 0, of half 1
    const __m256i sc0 = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sc, 0xA0), 0xA0);
    const __m256i sc1 = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sc, 0xF5), 0xF5);
#endif
    const __m256 dw = LoadScales(s.d);
    __m256 ndm = _mm256_setzero_ps();
    if constexpr (!kQ3) ndm = _mm256_xor_ps(LoadScales(s.dmin), _mm256_set1_ps(-0.0f));  // -dmin
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#if LLM_PACKED_VNNI
      __m256i isum = _mm256_add_epi32(_mm256_mullo_epi32(d0[t], sc0), _mm256_mullo_epi32(d1[t], sc1));
#else
      __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(d0[t], sc0), _mm256_madd_epi16(d1[t], sc1));
#endif
      const __m256i c = _mm256_madd_epi16(corr, _mm256_set1_epi32(xs[t][2 * b]));
      const __m256 xd = _mm256_set1_ps(xq[t][b].d);
      if constexpr (kQ3) isum = _mm256_sub_epi32(isum, c);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(isum), acc[t]);
      if constexpr (!kQ3) acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(ndm, xd), _mm256_cvtepi32_ps(c), acc[t]);
    }
  }
}
