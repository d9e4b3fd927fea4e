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
// Each vector holds two quants of either half per row (quant_pack_k23.h)
// and meets the token's activations permuted the same way (K23Act, made
// once per call), so maddubs (u <= 7, |x| <= 128: a pair sum <= 1792) puts
// half 0's pair sums in int16 lane 2r and half 1's in 2r + 1; the 8 vectors add
// up in int16 (<= 14336 < 2^15) in one running sum per token, and one madd
// with the scales (lane 2r + h: sc_h of row r) gives isum in int32 lane r.
// The corrections are one madd of the int16 pairs (lane 2r + h: m_h or
// 4·sc_h of row r) with the token's pair (S_0, S_1) broadcast (|S_h| <=
// 16·128, 4·|sc| <= 128: int16). One sum per token (not one per half) keeps
// a tile of 8 tokens in the 16 vector registers. The VNNI build runs the
// same code: vpdpbusd would add the two halves' products together.
//
// Measured on the 2-vCPU EPYC (Zen 3, AVX2), one thread, thread CPU time,
// 2048x2048: see bench/results/2026-11-28-cpu-prefill-packed.md.

template <class B>
inline constexpr bool kK23 = std::is_same_v<B, PackedQ2K> || std::is_same_v<B, PackedQ3K>;

// One token's activation block as the tile reads it, made once per call:
// its quants in the packed vectors' order (byte 4v + i: quant K23Quant(v, i),
// the 16-bit words of the two halves interleaved), the sums S_0, S_1 of its
// halves as the int16 pair the corrections' madd takes (S_0 | S_1 << 16:
// |S_h| <= 16·128 fits) and its scale. 40 bytes, against the 36 of the
// block and 8 of its sums apart: a tile's 8 tokens' worth stays in L1.
struct K23Act {
  int8_t qs[32];
  int32_t sums;
  float d;
};

inline void MakeK23Act(const BlockQ8Act& x, K23Act* out) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 16));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs), _mm_unpacklo_epi16(lo, hi));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs + 16), _mm_unpackhi_epi16(lo, hi));
  int32_t s0 = 0, s1 = 0;
  for (int i = 0; i < 16; ++i) {
    s0 += x.qs[i];
    s1 += x.qs[16 + i];
  }
  out->sums = static_cast<int32_t>(static_cast<uint16_t>(s0) | static_cast<uint32_t>(s1) << 16);
  out->d = x.d;
}

// xa[t]: token t's blocks (MakeK23Act).
template <class B, int T>
inline void PackedK23Tile(const B* w, const B* next, int64_t nb, const K23Act* const* xa, __m256* acc) {
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
    __m256i d[T];  // [t]: int16 lane 2r + h: half h's pair sums of row r
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      const int k = v % 4;
      __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256(ql + v / 4), 2 * k), three);
      if constexpr (kQ3) {
        // bit v of each byte to bit 2 (16-bit shifts: what crosses a byte falls outside the mask)
        const __m256i hv = v <= 2 ? _mm256_slli_epi16(h3, 2 - v) : _mm256_srli_epi16(h3, v - 2);
        u = _mm256_or_si256(u, _mm256_and_si256(hv, four));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i m = _mm256_maddubs_epi16(u, Bcast4(xa[t][b].qs + 4 * v));
        d[t] = v == 0 ? m : _mm256_add_epi16(d[t], m);
        __asm__("" : "+x"(d[t]));  // keep the sums in order (no reassociation into a tree)
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
    const __m256 dw = LoadScales(s.d);
    __m256 ndm = _mm256_setzero_ps();
    if constexpr (!kQ3) ndm = _mm256_xor_ps(LoadScales(s.dmin), _mm256_set1_ps(-0.0f));  // -dmin
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      __m256i isum = _mm256_madd_epi16(d[t], sc);
      const __m256i c = _mm256_madd_epi16(corr, _mm256_set1_epi32(xa[t][b].sums));
      const __m256 xd = _mm256_set1_ps(xa[t][b].d);
      if constexpr (kQ3) isum = _mm256_sub_epi32(isum, c);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(isum), acc[t]);
      if constexpr (!kQ3) acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(ndm, xd), _mm256_cvtepi32_ps(c), acc[t]);
    }
  }
}
