// AVX2 block-quantized kernels (quant.h). Compiled for AVX2/FMA/F16C by a
// target pragma (like kernels_avx2.cpp) and called only after the CPU check
// in BestKernels().
//
// Each 32-weight block is unpacked to 32 int8 lanes in weight order, then
//   unsigned weights (Q4_1, Q5_1, Q4_K, Q5_K): maddubs(w, x)
//   signed weights (Q4_0, Q5_0, Q8_0, Q6_K):   maddubs(|w|, sign(x, w))
// gives 16 exact int16 pair sums (|w| <= 63 or 127 · |x| <= 127 · 2 fits), a
// madd widens them to 8 int32 lanes, and one FMA adds them, scaled by
// d_w · d_x, to a float accumulator. Blocks alternate between two
// accumulators (the FMA latency, not the integer work, would bound one);
// the m · s terms of the formats with a minimum go to a scalar sum.
#include <cstdint>
#include <cstring>

#include "backend/cpu/quant.h"

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

inline __m256i DotU8I8(__m256i w, __m256i x) {  // 8 int32 lanes; w unsigned
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}
inline __m256i DotI8I8(__m256i w, __m256i x) {  // 8 int32 lanes; w signed, w != -128
  return DotU8I8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

inline __m256i LoadX(const BlockQ8Act& x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)); }

inline float HSum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 Fma(float scale, __m256i isum, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(isum), acc);
}

// ---------------------------------------------------------------- 32-weight formats
//
// Unpack(block) -> int8 lanes; kSigned picks the product; kMin adds m · s.

struct Q4_0 {
  using B = BlockQ4_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i Unpack(const B& b) { return _mm256_sub_epi8(Nibbles(b.qs), _mm256_set1_epi8(8)); }
};
struct Q4_1 {
  using B = BlockQ4_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i Unpack(const B& b) { return Nibbles(b.qs); }
};
struct Q5_0 {
  using B = BlockQ5_0;
  static constexpr bool kSigned = true, kMin = false;
  // q - 16 = nibble when the fifth bit is set, else nibble | 0xF0 (nibble - 16 as int8).
  static __m256i Unpack(const B& b) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const __m256i hi = _mm256_andnot_si256(BitsToBytes(qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(Nibbles(b.qs), hi);
  }
};
struct Q5_1 {
  using B = BlockQ5_1;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i Unpack(const B& b) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    return _mm256_or_si256(Nibbles(b.qs), _mm256_and_si256(BitsToBytes(qh), _mm256_set1_epi8(0x10)));
  }
};
struct Q8_0 {
  using B = BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i Unpack(const B& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
};

template <class F>
inline __m256 Block(const typename F::B& b, const BlockQ8Act& x, __m256 acc, float* mins) {
  const __m256i w = F::Unpack(b);
  const __m256i p = F::kSigned ? DotI8I8(w, LoadX(x)) : DotU8I8(w, LoadX(x));
  if constexpr (F::kMin) *mins += H2F(b.m) * x.s;
  return Fma(H2F(b.d) * x.d, p, acc);
}

template <class F>
float Dot32(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const typename F::B*>(w);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float mins = 0.0f;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    acc0 = Block<F>(b[i], x[i], acc0, &mins);
    acc1 = Block<F>(b[i + 1], x[i + 1], acc1, &mins);
  }
  if (i < nb) acc0 = Block<F>(b[i], x[i], acc0, &mins);
  return HSum(_mm256_add_ps(acc0, acc1)) + mins;
}

// ---------------------------------------------------------------- K-quants

inline void ScalesMinsK4(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

template <bool kQ5>
float DotK(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const size_t bytes = kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int64_t i = 0; i < nb / 8; ++i) {
    const uint8_t* blk = w + i * bytes;
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    const float d = H2F(dh), dmin = H2F(mh);
    uint8_t sc[8], m[8];
    ScalesMinsK4(blk + 4, sc, m);
    const uint8_t* qs = blk + (kQ5 ? 48 : 16);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    const BlockQ8Act* xb = x + 8 * i;
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
      const int j = 2 * c;
      acc0 = Fma(d * static_cast<float>(sc[j]) * xb[j].d, DotU8I8(lo, LoadX(xb[j])), acc0);
      acc1 = Fma(d * static_cast<float>(sc[j + 1]) * xb[j + 1].d, DotU8I8(hi, LoadX(xb[j + 1])), acc1);
      mins += dmin * static_cast<float>(m[j]) * xb[j].s;
      mins += dmin * static_cast<float>(m[j + 1]) * xb[j + 1].s;
    }
  }
  return HSum(_mm256_add_ps(acc0, acc1)) - mins;
}

// Q6_K (layout in tensor_type.h): four 32-weight pieces per half, each with
// two 16-weight scales applied to the int16 pair sums by one madd.
float DotQ6_K(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(w);
  const __m256i low4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = H2F(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
      for (int k = 0; k < 4; ++k) {
        const BlockQ8Act& xb = x[8 * i + 4 * h + k];
        const __m256i wq = _mm256_sub_epi8(q[k], k32);
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(LoadX(xb), wq));
        const __m256i sc = Combine(_mm_set1_epi16(b[i].scales[8 * h + 2 * k]),
                                   _mm_set1_epi16(b[i].scales[8 * h + 2 * k + 1]));
        const __m256i p = _mm256_madd_epi16(p16, sc);
        if (k & 1) {
          acc1 = Fma(d * xb.d, p, acc1);
        } else {
          acc0 = Fma(d * xb.d, p, acc0);
        }
      }
    }
  }
  return HSum(_mm256_add_ps(acc0, acc1));
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
  switch (type) {
    case TensorType::Q4_0: return Dot32<Q4_0>;
    case TensorType::Q4_1: return Dot32<Q4_1>;
    case TensorType::Q5_0: return Dot32<Q5_0>;
    case TensorType::Q5_1: return Dot32<Q5_1>;
    case TensorType::Q8_0: return Dot32<Q8_0>;
    case TensorType::Q4_K: return DotK<false>;
    case TensorType::Q5_K: return DotK<true>;
    case TensorType::Q6_K: return DotQ6_K;
    default: return nullptr;
  }
}

#include "backend/cpu/quant_matmul_impl.h"

}  // namespace avx2
}  // namespace llm::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
