// The decode (one token) path of the lattice matmul. Not a normal header:
// quant_lattice_avx2.cpp includes it inside its anonymous namespace, under
// its AVX2 target pragma, after U32, RowScale, Fold8, Rows and Prefetch
// (the prefill path's scratch is decoded by the same Prep and SubParts /
// IQ1Values: SignedSub).
//
// A group of 8 rows meets the token sub-block by sub-block: for sub-block j
// each row's 32 weights are decoded in registers and multiplied with the
// token's activations, and Fold8 turns the 8 rows' int32 partial sums into
// one vector (lane r = row r), so each row takes one fma per sub-block in
// order, as the portable DotIQLattice does (bitwise the same outputs).
//
// The decode of a sub-block is split in two:
//
//   Prep    once per row and super-block: the fields of all 8 sub-blocks
//           (grid indices, sign bytes, multipliers) taken apart with 256-bit
//           shifts, masks and shuffles into a small aligned Aux, one
//           super-block ahead of its use (so the sub-blocks' narrow loads
//           find the 256-bit stores committed: measured faster);
//   SubDot  per sub-block: the grid points loaded at Aux's indices (or
//           straight from the block where they are whole bytes) and put
//           together by vpinsr (measured faster on Zen 3 than gathers and
//           than broadcasts + blends), the 32 sign bits expanded to a byte
//           mask by one shuffle and one compare, the activations negated
//           where the mask is set (one blend with the token's -x), then
//           maddubs and madd with the sub-block's multipliers.
//
//   type      grid indices        sign bits (per 8 weights)      multipliers
//   IQ2_XXS   block bytes         Aux::sg (7-bit index, parity)  Aux::mul
//   IQ2_XS    Aux::idx (9 bits)   Aux::sg (7-bit index, parity)  Aux::mul (2)
//   IQ2_S     Aux::idx (10 bits)  block bytes (8 explicit bits)  Aux::mul (2)
//   IQ3_XXS   block bytes         Aux::sg (7-bit index, parity)  Aux::mul
//   IQ3_S     Aux::idx (9 bits)   block bytes (8 explicit bits)  Aux::mul
//   IQ1_S     Aux::idx (11 bits)  none: weights 8g + delta8      Aux::mul
//   IQ1_M     Aux::idx (11 bits)  none: weights 8g + delta8      Aux::mul (2)
//
// (IQ1: g in {-1, 0, 1} the int8 grid bytes, delta8 = +-1 per sub-block
// (IQ1_S) or per 8 weights (IQ1_M) in Aux::sg; a weight is never 0, so
// |v| · sign(x, v) needs no sign bits.)
//
// Measured against the previous path, which took each field apart with
// scalar shifts, masks and table loads (bench_quant -n 1 --cpu, one thread,
// 2048x2048, 8192x2048 and 2048x8192, 2-vCPU EPYC Zen 3 under a load of
// 7-9; best of 5 x 15 repetitions): IQ2_XS 1.9x, IQ2_S 1.8x, IQ3_S 2.0x,
// IQ2_XXS 1.4x, IQ3_XXS 1.4x (the XXS types' indices were already whole
// bytes; IQ3_XXS's 8 grid loads and their vpinsr per sub-block dominate),
// IQ1_S and IQ1_M about 20x (they were unpacked byte by byte).

// One row's super-block, its fields taken apart (only those its type keeps here).
struct alignas(32) Aux {
  uint16_t idx[64];  // grid indices in weight order (IQ2_XS, IQ2_S, IQ1_*: 32; IQ3_S: 64)
  uint8_t sg[32];    // sign bits of weights 8k .. 8k+7 (bit i: weight 8k + i); IQ1_*:
                     // the delta 8 · (+-1/8) of weights 8k .. 8k+7 (IQ1_S: per sub-block)
  uint32_t mul[8];   // sub-block j's multipliers m0 | m1 << 16 (weights 0..15, 16..31)
};

inline __m256i LoadU(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i LoadU128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void StoreA(void* p, __m256i v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }

// 32 bytes of 7-bit sign indices -> their kIQ2Signs bytes: bit 7 = the
// parity of bits 0..6 (each nibble's parity by a byte shuffle).
inline __m256i WithParity(__m256i s) {
  const __m256i lut = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,  //
                                       0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i p = _mm256_xor_si256(_mm256_shuffle_epi8(lut, _mm256_and_si256(s, nib)),
                                     _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(s, 4), nib)));
  return _mm256_or_si256(s, p);
}

// Multipliers 2s + 1 of 4-bit scales s (int32 lanes) as the pair m | m << 16.
inline __m256i OddPair(__m256i s) {
  const __m256i m = _mm256_or_si256(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1));
  return _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
}

// The XXS types' u32 per sub-block (lane j): four 7-bit sign indices at
// bits 0, 7, 14, 21 and the 4-bit scale at bit 28.
inline void PrepSignWords(__m256i a, Aux& x) {
  __m256i s = _mm256_and_si256(a, _mm256_set1_epi32(0x7F));  // index k: from bit 7k to byte k
  s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7F00)));
  s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7F0000)));
  s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7F000000)));
  StoreA(x.sg, WithParity(s));
  StoreA(x.mul, OddPair(_mm256_srli_epi32(a, 28)));
}

// 8 scale bytes (low nibble: weights 0..15 of the sub-block, high: 16..31) -> Aux::mul.
inline void PrepNibblePairs(const uint8_t* sc, Aux& x) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i m0 = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xF)), 1), one);
  const __m256i m1 = _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(v, 4), 1), one);
  StoreA(x.mul, _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16)));
}

// 16 consecutive 9- or 10-bit indices: the low bytes qs[0..16) widened, or
// the high bits taken from qh (its 8 bytes in each 128-bit lane): `pick`
// selects per u16 lane the qh byte of the index's sub-block, the multiply
// by `shl` (a power of two per lane) moves the index's bits to bit 8 up,
// `mask` keeps them.
inline __m256i HighIdx(const uint8_t* qs, __m256i qh, __m256i pick, __m256i shl, __m256i mask) {
  const __m256i h = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), shl), mask);
  return _mm256_or_si256(_mm256_cvtepu8_epi16(LoadU128(qs)), h);
}

// A `pick` operand: u16 lanes 0..7 take qh byte a, lanes 8..15 byte b.
inline __m256i PickBytes(char a, char b) {
  const char z = -128;
  return _mm256_setr_epi8(a, z, a, z, a, z, a, z, a, z, a, z, a, z, a, z,  //
                          b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z);
}

inline __m256i Qh(const uint8_t* p) {
  int64_t h;
  std::memcpy(&h, p, 8);
  return _mm256_set1_epi64x(h);
}

template <TensorType kT>
inline void Prep(const uint8_t* b, Aux& x) {
  if constexpr (kT == TensorType::IQ2_XXS) {
    // per sub-block two u32: 4 grid index bytes, then the sign word (the odd dwords)
    const __m256 lo = _mm256_castsi256_ps(LoadU(b + 2)), hi = _mm256_castsi256_ps(LoadU(b + 34));
    const __m256i a = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));  // 0 1 4 5 | 2 3 6 7
    PrepSignWords(_mm256_permute4x64_epi64(a, _MM_SHUFFLE(3, 1, 2, 0)), x);
  } else if constexpr (kT == TensorType::IQ3_XXS) {
    PrepSignWords(LoadU(b + 2 + 64), x);
  } else if constexpr (kT == TensorType::IQ2_XS) {
    const __m256i q0 = LoadU(b + 2), q1 = LoadU(b + 34);  // u16: grid index | sign index << 9
    const __m256i m9 = _mm256_set1_epi16(511);
    StoreA(x.idx, _mm256_and_si256(q0, m9));
    StoreA(x.idx + 16, _mm256_and_si256(q1, m9));
    const __m256i s = _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9));  // 0 2 | 1 3 (8 each)
    StoreA(x.sg, WithParity(_mm256_permute4x64_epi64(s, _MM_SHUFFLE(3, 1, 2, 0))));
    PrepNibblePairs(b + offsetof(BlockIQ2_XS, scales), x);
  } else if constexpr (kT == TensorType::IQ2_S) {
    // index 4j + l = qs[4j + l] | (qh[j] >> 2l & 3) << 8 = qs[4j + l] | (qh[j] << (8 - 2l) & 0x300)
    const __m256i qh = Qh(b + offsetof(BlockIQ2_S, qh));
    const __m256i shl = _mm256_set1_epi64x(0x0004001000400100);  // 256, 64, 16, 4
    const __m256i mask = _mm256_set1_epi16(0x300);
    const __m256i pick = _mm256_setr_epi8(0, -128, 0, -128, 0, -128, 0, -128, 1, -128, 1, -128, 1, -128, 1, -128,  //
                                          2, -128, 2, -128, 2, -128, 2, -128, 3, -128, 3, -128, 3, -128, 3, -128);
    const uint8_t* qs = b + offsetof(BlockIQ2_S, qs);
    StoreA(x.idx, HighIdx(qs, qh, pick, shl, mask));
    StoreA(x.idx + 16, HighIdx(qs + 16, qh, _mm256_add_epi16(pick, _mm256_set1_epi16(4)), shl, mask));
    PrepNibblePairs(b + offsetof(BlockIQ2_S, scales), x);
  } else if constexpr (kT == TensorType::IQ1_S) {
    // u16 qh[j]: bits 3l .. 3l+2 the high bits of index 4j + l, 12 .. 14 the
    // scale, 15 the delta's sign. (qh >> 3l & 7) << 8: qh · 2^(8 - 3l) for
    // l < 3 (mullo), qh · 2^15 >> 16 for l = 3 (mulhi), masked.
    const __m128i qh16 = LoadU128(b + offsetof(BlockIQ1_S, qh));
    const __m256i qh = _mm256_broadcastsi128_si256(qh16);
    const __m256i lo = _mm256_setr_epi16(256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0);
    const __m256i hi = _mm256_setr_epi16(0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768);
    const __m256i mask = _mm256_set1_epi16(0x700);
    const uint8_t* qs = b + offsetof(BlockIQ1_S, qs);
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {  // sub-blocks 4i .. 4i+3: u16 lane 4j' + l takes qh[4i + j']
      const char c = static_cast<char>(8 * i);
      const __m256i pick = _mm256_setr_epi8(c, c + 1, c, c + 1, c, c + 1, c, c + 1, c + 2, c + 3, c + 2, c + 3, c + 2,
                                            c + 3, c + 2, c + 3, c + 4, c + 5, c + 4, c + 5, c + 4, c + 5, c + 4, c + 5,
                                            c + 6, c + 7, c + 6, c + 7, c + 6, c + 7, c + 6, c + 7);
      const __m256i q = _mm256_shuffle_epi8(qh, pick);
      const __m256i h = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(q, lo), _mm256_mulhi_epu16(q, hi)), mask);
      StoreA(x.idx + 16 * i, _mm256_or_si256(_mm256_cvtepu8_epi16(LoadU128(qs + 16 * i)), h));
    }
    const __m256i v = _mm256_cvtepu16_epi32(qh16);  // lane j: qh[j]
    StoreA(x.mul, OddPair(_mm256_and_si256(_mm256_srli_epi32(v, 12), _mm256_set1_epi32(7))));
    const __m256i neg = _mm256_srai_epi32(_mm256_slli_epi32(v, 16), 31);  // -1 where the delta is -1/8
    StoreA(x.sg, _mm256_or_si256(neg, _mm256_set1_epi32(0x01010101)));
  } else if constexpr (kT == TensorType::IQ1_M) {
    // group k (8 weights): nibble k % 2 of qh[k / 2], bits 0..2 the index's
    // high bits, bit 3 the delta's sign.
    const __m128i qh16 = LoadU128(b + offsetof(BlockIQ1_M, qh));
    const __m256i qh = _mm256_broadcastsi128_si256(qh16);
    const __m256i nib = _mm256_set1_epi32(0x00100100);  // u16 lanes 256, 16: nibble 0 or 1 to bit 8
    const __m256i mask = _mm256_set1_epi16(0x700);
    const uint8_t* qs = b + offsetof(BlockIQ1_M, qs);
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {  // groups 16i .. 16i+15: u16 lane k takes qh byte 8i + k / 2
      const char c = static_cast<char>(8 * i), z = -128;
      const __m256i pick = _mm256_setr_epi8(c, z, c, z, c + 1, z, c + 1, z, c + 2, z, c + 2, z, c + 3, z, c + 3, z,  //
                                            c + 4, z, c + 4, z, c + 5, z, c + 5, z, c + 6, z, c + 6, z, c + 7, z,
                                            c + 7, z);
      const __m256i h = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), nib), mask);
      StoreA(x.idx + 16 * i, _mm256_or_si256(_mm256_cvtepu8_epi16(LoadU128(qs + 16 * i)), h));
    }
    // byte k of the deltas: bit 3 (k even) or 7 (k odd) of qh[k / 2]
    const __m256i t = _mm256_cvtepu8_epi16(qh16);
    const __m256i bit = _mm256_set1_epi16(static_cast<int16_t>(0x8008));
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_or_si256(t, _mm256_slli_epi16(t, 8)), bit), bit);
    StoreA(x.sg, _mm256_or_si256(neg, _mm256_set1_epi8(1)));
    // sub-block j: u16 scales[j / 2], bits 6 (j % 2) .. +2 and +3 .. +5 the halves' scales
    const __m256i sc = _mm256_permutevar8x32_epi32(
        _mm256_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(BlockIQ1_M, scales)))),
        _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    const __m256i v = _mm256_srlv_epi32(sc, _mm256_setr_epi32(0, 6, 0, 6, 0, 6, 0, 6));
    const __m256i seven = _mm256_set1_epi32(7), one = _mm256_set1_epi32(1);
    const __m256i m0 = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(v, seven), 1), one);
    const __m256i m1 = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v, 3), seven), 1), one);
    StoreA(x.mul, _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16)));
  } else if constexpr (kT == TensorType::IQ3_S) {
    // index 8j + k = qs[8j + k] | (qh[j] >> k & 1) << 8 = qs[8j + k] | (qh[j] << (8 - k) & 0x100)
    const __m256i qh = Qh(b + offsetof(BlockIQ3_S, qh));
    const __m256i shl = _mm256_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2, 256, 128, 64, 32, 16, 8, 4, 2);
    const __m256i mask = _mm256_set1_epi16(0x100);
    const uint8_t* qs = b + offsetof(BlockIQ3_S, qs);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256i pick = PickBytes(static_cast<char>(2 * i), static_cast<char>(2 * i + 1));
      StoreA(x.idx + 16 * i, HighIdx(qs + 16 * i, qh, pick, shl, mask));
    }
    // nibble j of the u32 `scales`: sub-block j's scale
    const __m256i sc = _mm256_set1_epi32(static_cast<int>(U32(b + offsetof(BlockIQ3_S, scales))));
    const __m256i v = _mm256_srlv_epi32(sc, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    StoreA(x.mul, OddPair(_mm256_and_si256(v, _mm256_set1_epi32(0xF))));
  }
}

// The sign mask of 32 weights from their 32 sign bits: byte i = -1 where bit i is set.
inline __m256i SignMask(uint32_t bits) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  return _mm256_cmpeq_epi8(_mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),  // all bits but bit i of byte i
                           _mm256_set1_epi64x(-1));
}

// The madd operand of multipliers m0 | m1 << 16: m0 on weights 0..15, m1 on 16..31.
inline __m256i MulOf(uint32_t m) {
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)), spread);
}

// The 8 indices of an IQ3 sub-block taken from one 64-bit load by shifts
// (fewer loads: the grid points and the broadcasts keep the load ports
// busy; measured 9% faster; the IQ2 types' 4 indices are not).
inline uint64_t U64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t Byte(uint64_t v, int k) { return static_cast<uint32_t>(v >> (8 * k) & 0xFF); }
inline uint32_t Half(uint64_t v, int k) { return static_cast<uint32_t>(v >> (16 * k) & 0xFFFF); }

// 8 grid points of 4 bytes (4 of 8 bytes) as one vector: chains of vpinsr
// (GCC's own _mm256_setr_epi32 adds unpacks: measured slower).
inline __m128i Ins4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  __m128i v = _mm_cvtsi32_si128(static_cast<int>(a));
  v = _mm_insert_epi32(v, static_cast<int>(b), 1);
  v = _mm_insert_epi32(v, static_cast<int>(c), 2);
  return _mm_insert_epi32(v, static_cast<int>(d), 3);
}
inline __m256i Points8(const uint32_t* tab, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3, uint32_t i4,
                       uint32_t i5, uint32_t i6, uint32_t i7) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(Ins4(tab[i0], tab[i1], tab[i2], tab[i3])),
                                 Ins4(tab[i4], tab[i5], tab[i6], tab[i7]), 1);
}

inline __m128i Ins2(uint64_t a, uint64_t b) {
  return _mm_insert_epi64(_mm_cvtsi64_si128(static_cast<int64_t>(a)), static_cast<int64_t>(b), 1);
}
inline __m256i Points4(const uint64_t* tab, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(Ins2(tab[i0], tab[i1])), Ins2(tab[i2], tab[i3]), 1);
}

// Sub-block j of the super-block at b (its Aux x): the magnitudes q of its
// 32 weights, their sign mask neg (-1 where negative) and the madd operand
// of its multipliers. (Not the IQ1 types: IQ1Values.)
template <TensorType kT>
inline void SubParts(const uint8_t* b, const Aux& x, int j, __m256i* q, __m256i* neg, __m256i* mul) {
  if constexpr (kT == TensorType::IQ2_XXS) {
    const uint8_t* g = b + 2 + 8 * j;
    *q = Points4(kIQ2XXSGrid, g[0], g[1], g[2], g[3]);
    *neg = SignMask(U32(x.sg + 4 * j));
    *mul = _mm256_set1_epi32(static_cast<int>(x.mul[j]));
  } else if constexpr (kT == TensorType::IQ3_XXS) {
    const uint8_t* g = b + 2 + 8 * j;
    const uint64_t v = U64(g);
    *q = Points8(kIQ3XXSGrid, Byte(v, 0), Byte(v, 1), Byte(v, 2), Byte(v, 3), Byte(v, 4), Byte(v, 5), Byte(v, 6),
                 Byte(v, 7));
    *neg = SignMask(U32(x.sg + 4 * j));
    *mul = _mm256_set1_epi32(static_cast<int>(x.mul[j]));
  } else if constexpr (kT == TensorType::IQ2_XS) {
    const uint16_t* i = x.idx + 4 * j;
    *q = Points4(kIQ2XSGrid, i[0], i[1], i[2], i[3]);
    *neg = SignMask(U32(x.sg + 4 * j));
    *mul = MulOf(x.mul[j]);
  } else if constexpr (kT == TensorType::IQ2_S) {
    const uint16_t* i = x.idx + 4 * j;
    *q = Points4(kIQ2SGrid, i[0], i[1], i[2], i[3]);
    *neg = SignMask(U32(b + offsetof(BlockIQ2_S, qs) + 32 + 4 * j));
    *mul = MulOf(x.mul[j]);
  } else {
    static_assert(kT == TensorType::IQ3_S);
    const uint64_t v = U64(x.idx + 8 * j), w = U64(x.idx + 8 * j + 4);
    *q = Points8(kIQ3SGrid, Half(v, 0), Half(v, 1), Half(v, 2), Half(v, 3), Half(w, 0), Half(w, 1), Half(w, 2),
                 Half(w, 3));
    *neg = SignMask(U32(b + offsetof(BlockIQ3_S, signs) + 4 * j));
    *mul = _mm256_set1_epi32(static_cast<int>(x.mul[j]));
  }
}

// Sub-block j's 32 signed weights 8g + delta8 of an IQ1 type: g in {-1, 0,
// 1}, delta8 = +-1 per sub-block (IQ1_S) or per 8 weights (IQ1_M), so never 0.
template <TensorType kT>
inline __m256i IQ1Values(const Aux& x, int j) {
  const uint16_t* i = x.idx + 4 * j;
  const __m256i g = Points4(kIQ1SGrid, i[0], i[1], i[2], i[3]);
  __m256i delta = _mm256_set1_epi32(static_cast<int>(U32(x.sg + 4 * j)));
  if constexpr (kT == TensorType::IQ1_M) {  // its 4 bytes spread 8 each
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    delta = _mm256_shuffle_epi8(delta, spread);
  }
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
}

// Sub-block j of the super-block at b (its Aux x) against the token's
// activations xv (nxv = -xv): int32 partial sums whose total is isum.
template <TensorType kT>
inline __m256i SubDot(const uint8_t* b, const Aux& x, int j, __m256i xv, __m256i nxv) {
  if constexpr (kT == TensorType::IQ1_S || kT == TensorType::IQ1_M) {
    // the signs are the weights' own: |v| · sign(x, v)
    const __m256i v = IQ1Values<kT>(x, j);
    const __m256i mul =
        kT == TensorType::IQ1_S ? _mm256_set1_epi32(static_cast<int>(x.mul[j])) : MulOf(x.mul[j]);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(xv, v)), mul);
  } else {
    __m256i q, neg, mul;
    SubParts<kT>(b, x, j, &q, &neg, &mul);
    // |w| · (±x): a pair sum of maddubs is at most 2 · 62 · 128 < 2^15
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_blendv_epi8(xv, nxv, neg)), mul);
  }
}

// Sub-block j's 32 signed weights (the prefill path's scratch).
template <TensorType kT>
inline __m256i SignedSub(const uint8_t* b, const Aux& x, int j) {
  if constexpr (kT == TensorType::IQ1_S || kT == TensorType::IQ1_M) {
    return IQ1Values<kT>(x, j);
  } else {
    __m256i q, neg, mul;
    SubParts<kT>(b, x, j, &q, &neg, &mul);
    return _mm256_sub_epi8(_mm256_xor_si256(q, neg), neg);
  }
}

// Prep of super-block s of a group's rows into aux[0 .. 8).
template <TensorType kT, bool kFull>
inline void PrepRows(const Rows& g, int64_t s, Aux* aux) {
  for (int r = 0; r < 8; ++r)
    if (kFull || r < g.n) Prep<kT>(g.w + r * g.row_bytes + s * g.bb, aux[r]);
}

// One token against a group of rows: out[r] = row r's dot product (r < g.n).
// `next`: the group whose bytes to prefetch meanwhile (the rows are
// contiguous: a group is one run of 8 · row_bytes bytes).
template <TensorType kT, bool kFull>
void DirectGroup(const Rows& g, const uint8_t* next, const BlockQ8Act* x, float* out) {
  const int64_t span = 8 * static_cast<int64_t>(g.row_bytes);
  const int64_t step = (span + g.nsb - 1) / g.nsb;
  __m256 acc = _mm256_setzero_ps();
  Aux aux[2][8];  // super-block s's in aux[s % 2]
  PrepRows<kT, kFull>(g, 0, aux[0]);
  for (int64_t s = 0; s < g.nsb; ++s) {
    if (next != nullptr) Prefetch(next, s * step, step);
    if (s + 1 < g.nsb) PrepRows<kT, kFull>(g, s + 1, aux[(s + 1) & 1]);
    const Aux* ax = aux[s & 1];
    alignas(32) float sc[8] = {};
    for (int r = 0; r < 8; ++r)
      if (kFull || r < g.n) sc[r] = RowScale<kT>(g.w + r * g.row_bytes + s * g.bb);
    const __m256 scale = _mm256_load_ps(sc);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8Act& xb = x[8 * s + j];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      const __m256i nxv = _mm256_sub_epi8(_mm256_setzero_si256(), xv);  // -128 stays -128, as in sign_epi8
      __m256i is[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        if (kFull || r < g.n) {
          is[r] = SubDot<kT>(g.w + r * g.row_bytes + s * g.bb, ax[r], j, xv, nxv);
        } else {
          is[r] = _mm256_setzero_si256();
        }
      }
      acc = _mm256_fmadd_ps(_mm256_mul_ps(scale, _mm256_set1_ps(xb.d)), _mm256_cvtepi32_ps(Fold8(is)), acc);
    }
  }
  _mm256_storeu_ps(out, acc);
}
