// Portable block-quantized kernels (quant.h): the activations' Q8 rounding
// and the dot products, per row and in the packed tiles' order (the
// reference dequantization is quant_dequantize.cpp's). Plain scalar C++: the
// integer inner loops are simple enough for the compiler to vectorise with
// the baseline ISA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_unpack.h"

namespace llm::cpu {

using namespace unpack;  // NOLINT(google-build-using-namespace): this file's vocabulary

namespace generic {

// ================================================================ activations

void QuantizeActImpl(const float* x, int64_t n, BlockQ8Act* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fabs(v[i]) > amax ? std::fabs(v[i]) : amax;
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int32_t q = static_cast<int32_t>(std::nearbyint(v[i] * id));  // ties to even
      out[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

// ================================================================ dot products
//
// One float accumulator, blocks in order: sum += (d_w * d_x) * isum [+ m_w * s_x].

namespace {

float DotQ8_0(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(b[i].qs, x[i].qs));
  return sum;
}

float DotQ4_0(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackQ4(b[i].qs, 8, q);
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
  }
  return sum;
}

float DotQ4_1(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackQ4(b[i].qs, 0, q);
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
    sum += F16ToF32(b[i].m) * x[i].s;
  }
  return sum;
}

float DotQ5_0(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackQ5(b[i].qs, LoadU32(b[i].qh), 16, q);
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
  }
  return sum;
}

float DotQ5_1(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ5_1*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackQ5(b[i].qs, LoadU32(b[i].qh), 0, q);
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
    sum += F16ToF32(b[i].m) * x[i].s;
  }
  return sum;
}

// Q4_K / Q5_K: sub-block j of super-block i meets activation block 8i + j.
template <bool kQ5>
float DotK(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const size_t bytes = kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  float sum = 0.0f;
  int8_t lo[32], hi[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const uint8_t* blk = w + i * bytes;
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    const float d = F16ToF32(dh), dmin = F16ToF32(mh);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = kQ5 ? blk + 16 : nullptr;
    const uint8_t* qs = blk + (kQ5 ? 48 : 16);
    const BlockQ8Act* xb = x + 8 * i;
    for (int c = 0; c < 4; ++c) {
      UnpackK(qs, qh, c, lo, hi);
      for (int s = 0; s < 2; ++s) {
        const int j = 2 * c + s;
        int sc, m;
        KScaleMin(j, scales, &sc, &m);
        sum += d * static_cast<float>(sc) * xb[j].d * static_cast<float>(Dot32(s == 0 ? lo : hi, xb[j].qs));
        sum -= dmin * static_cast<float>(m) * xb[j].s;
      }
    }
  }
  return sum;
}

// Q6_K: activation block 8i + 4h + k covers weights 32k .. 32k+32 of half h,
// i.e. scales 8h + 2k and 8h + 2k + 1 (16 weights each).
// kPacked: the order of the packed path (Q6_K packs as 8-bit quants q - 32
// with the two 16-weight scales of each 32-weight block, quant_pack.h): one
// rounding per block, like the SIMD lanes; the integer sums are the same.
template <bool kPacked>
float DotQ6_K(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        const BlockQ8Act& xb = x[8 * i + 4 * h + k];
        UnpackQ6K(b[i], h, k, q);
        const int32_t isum = b[i].scales[8 * h + 2 * k] * Dot16(q, xb.qs) +
                             b[i].scales[8 * h + 2 * k + 1] * Dot16(q + 16, xb.qs + 16);
        if constexpr (kPacked) {
          sum = std::fma(d * xb.d, static_cast<float>(isum), sum);
        } else {
          sum += d * xb.d * static_cast<float>(isum);
        }
      }
    }
  }
  return sum;
}

// IQ4_NL: like Q8_0 once the indices are looked up.
float DotIQ4_NL(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockIQ4_NL*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackIQ4(b[i].qs, q);
    sum += F16ToF32(b[i].d) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
  }
  return sum;
}

// MXFP4: as IQ4_NL with its own codebook and the E8M0 scale 2^(e - 128).
float DotMXFP4(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockMXFP4*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    UnpackIQ4(b[i].qs, q, kE2M1Values);
    sum += MXFP4Scale(b[i].e) * x[i].d * static_cast<float>(Dot32(q, x[i].qs));
  }
  return sum;
}

// IQ4_XS: sub-block j of super-block i meets activation block 8i + j; its
// scale d · (ls_j - 32) is exact in F32 (an F16 times a 6-bit integer).
float DotIQ4_XS(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockIQ4_XS*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8Act& xb = x[8 * i + j];
      UnpackIQ4(b[i].qs + 16 * j, q);
      sum += d * static_cast<float>(IQ4XSScale(b[i], j)) * xb.d * static_cast<float>(Dot32(q, xb.qs));
    }
  }
  return sum;
}

// Q3_K: activation block 8i + j covers weights 32j .. 32j+32 of super-block
// i, groups 2j and 2j + 1 (16 weights each, their own signed scales).
// kPacked: the order of the packed path (quant_pack_k23.h): the same integer
// sums, one fma per block (Q2_K: and one for the minimums), as the SIMD lanes.
template <bool kPacked>
float DotQ3_K(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8Act& xb = x[8 * i + j];
      UnpackQ3K(b[i], j, q);
      const int32_t isum = Q3KScale(b[i].scales, 2 * j) * Dot16(q, xb.qs) +
                           Q3KScale(b[i].scales, 2 * j + 1) * Dot16(q + 16, xb.qs + 16);
      if constexpr (kPacked) {
        sum = std::fma(d * xb.d, static_cast<float>(isum), sum);
      } else {
        sum += d * xb.d * static_cast<float>(isum);
      }
    }
  }
  return sum;
}

// Q2_K: as Q3_K, with each group's minimum met by the sum of its 16
// activations (exact in int32): d·d_x·Σ sc q x - dmin·d_x·Σ m x.
template <bool kPacked>
float DotQ2_K(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(w);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8Act& xb = x[8 * i + j];
      UnpackQ2K(b[i], j, q);
      int32_t isum = 0, msum = 0;
      for (int h = 0; h < 2; ++h) {
        const uint8_t sm = b[i].scales[2 * j + h];
        int32_t xs = 0;
        for (int l = 0; l < 16; ++l) xs += xb.qs[16 * h + l];
        isum += (sm & 0xF) * Dot16(q + 16 * h, xb.qs + 16 * h);
        msum += (sm >> 4) * xs;
      }
      if constexpr (kPacked) {
        sum = std::fma(d * xb.d, static_cast<float>(isum), sum);
        sum = std::fma(-dmin * xb.d, static_cast<float>(msum), sum);
      } else {
        sum += d * xb.d * static_cast<float>(isum);
        sum -= dmin * xb.d * static_cast<float>(msum);
      }
    }
  }
  return sum;
}

// IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: sub-block j of super-block i meets activation
// block 8i + j; the halves' odd multipliers 2s + 1 scale the integer dots,
// d · unit the sum (tensor_type.h). One fma per sub-block, in order: the
// order of the AVX2 matmul (quant_lattice_avx2.cpp, whose lanes are rows),
// so the two agree bitwise.
template <TensorType kType>
float DotIQLattice(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  int64_t be = 0, bb = 0;
  TensorTypeLayout(kType, &be, &bb);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const uint8_t* b = w + i * bb;
    const float d = F16ToF32(IQLatticeScaleBits(kType, b));
    for (int j = 0; j < 8; ++j) {
      const BlockQ8Act& xb = x[8 * i + j];
      int mul[2];
      const float unit = UnpackIQLattice(kType, b, j, q, mul);
      const int32_t isum = mul[0] * Dot16(q, xb.qs) + mul[1] * Dot16(q + 16, xb.qs + 16);
      sum = std::fma(d * unit * xb.d, static_cast<float>(isum), sum);
    }
  }
  return sum;
}

// TQ1_0, TQ2_0: chunk c of block i meets activation block 8i + c, all
// scaled by the block's d.
template <TensorType kType>
float DotTQ(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  int64_t be = 0, bb = 0;
  TensorTypeLayout(kType, &be, &bb);
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const uint8_t* b = w + i * bb;
    const float d = F16ToF32(static_cast<uint16_t>(b[TQScaleOffset(kType)] | b[TQScaleOffset(kType) + 1] << 8));
    for (int c = 0; c < 8; ++c) {
      UnpackTQ(kType, b, c, q);
      sum += d * x[8 * i + c].d * static_cast<float>(Dot32(q, x[8 * i + c].qs));
    }
  }
  return sum;
}

}  // namespace

QuantDotFn QuantDot(TensorType type) {
  switch (type) {
    case TensorType::Q4_0: return DotQ4_0;
    case TensorType::Q4_1: return DotQ4_1;
    case TensorType::Q5_0: return DotQ5_0;
    case TensorType::Q5_1: return DotQ5_1;
    case TensorType::Q8_0: return DotQ8_0;
    case TensorType::Q4_K: return DotK<false>;
    case TensorType::Q5_K: return DotK<true>;
    case TensorType::Q6_K: return DotQ6_K<false>;
    case TensorType::IQ4_NL: return DotIQ4_NL;
    case TensorType::IQ4_XS: return DotIQ4_XS;
    case TensorType::Q3_K: return DotQ3_K<false>;
    case TensorType::Q2_K: return DotQ2_K<false>;
    case TensorType::MXFP4: return DotMXFP4;
    case TensorType::IQ2_XXS: return DotIQLattice<TensorType::IQ2_XXS>;
    case TensorType::IQ2_XS: return DotIQLattice<TensorType::IQ2_XS>;
    case TensorType::IQ3_XXS: return DotIQLattice<TensorType::IQ3_XXS>;
    case TensorType::IQ3_S: return DotIQLattice<TensorType::IQ3_S>;
    case TensorType::IQ2_S: return DotIQLattice<TensorType::IQ2_S>;
    case TensorType::IQ1_S: return DotIQLattice<TensorType::IQ1_S>;
    case TensorType::IQ1_M: return DotIQLattice<TensorType::IQ1_M>;
    case TensorType::TQ1_0: return DotTQ<TensorType::TQ1_0>;
    case TensorType::TQ2_0: return DotTQ<TensorType::TQ2_0>;
    default: return nullptr;
  }
}

// The order of the SIMD kernels' row-interleaved path (quant_pack.h), used
// when the backend has packed the weight: one accumulator, blocks in order,
//   acc = fma(d_w · d_x, isum, acc)  [acc = fma(m_w, s_x, acc)]
// with Q4_0 taken as unsigned quants with m_w = -8 · d_w. Each step rounds
// once, like the SIMD lanes, so both give bitwise the same outputs.
float DotR8Q8_0(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(w);
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    acc = std::fma(F16ToF32(b[i].d) * x[i].d, static_cast<float>(Dot32(b[i].qs, x[i].qs)), acc);
  return acc;
}

// Q4_K packs as 4-bit blocks, Q5_K as 8-bit ones, both with F32 scale
// d · sc and minimum -dmin · m (quant_pack.h), sub-blocks in order.
template <bool kQ5>
float DotR8K(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  using B = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const auto* b = reinterpret_cast<const B*>(w);
  float acc = 0.0f;
  int8_t lo[32], hi[32];
  for (int64_t i = 0; i < nb / 8; ++i) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    const uint8_t* qh = nullptr;
    if constexpr (kQ5) qh = b[i].qh;
    for (int c = 0; c < 4; ++c) {
      UnpackK(b[i].qs, qh, c, lo, hi);
      for (int s = 0; s < 2; ++s) {
        const int j = 2 * c + s;
        int sc = 0, m = 0;
        KScaleMin(j, b[i].scales, &sc, &m);
        const float dj = d * static_cast<float>(sc), mj = -(dmin * static_cast<float>(m));
        const BlockQ8Act& xb = x[8 * i + j];
        acc = std::fma(dj * xb.d, static_cast<float>(Dot32(s == 0 ? lo : hi, xb.qs)), acc);
        acc = std::fma(mj, xb.s, acc);
      }
    }
  }
  return acc;
}

// The 32-weight formats with an offset or a minimum: Q4_0/Q4_1 pack as
// unsigned 4-bit quants, Q5_0/Q5_1 as unsigned 8-bit ones, each with
// weight = d · q + m (quant_pack.h; the offsets as m = -8 · d and -16 · d,
// exact).
template <class B>
float DotR8Unsigned(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  constexpr bool k5 = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>;
  constexpr bool kMin = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;
  const auto* b = reinterpret_cast<const B*>(w);
  float acc = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    float m = 0.0f;
    if constexpr (k5) {
      UnpackQ5(b[i].qs, LoadU32(b[i].qh), 0, q);
    } else {
      UnpackQ4(b[i].qs, 0, q);
    }
    if constexpr (kMin) {
      m = F16ToF32(b[i].m);
    } else {
      m = (k5 ? -16.0f : -8.0f) * d;
    }
    acc = std::fma(d * x[i].d, static_cast<float>(Dot32(q, x[i].qs)), acc);
    acc = std::fma(m, x[i].s, acc);
  }
  return acc;
}

// IQ4_NL and MXFP4 as Q8_0 once looked up; IQ4_XS with its integer scale ls_j - 32
// multiplied into the sub-block's exact sum (|ls · Σ q x| <= 32 · 32 · 127
// · 127 < 2^24: exact in F32 too), so the float step is d · d_x alone.
template <TensorType kType>
float DotR8IQ4(const uint8_t* w, const BlockQ8Act* x, int64_t nb) {
  float acc = 0.0f;
  int8_t q[32];
  for (int64_t i = 0; i < nb; ++i) {
    float d = 0.0f;
    int32_t isum = 0;
    if constexpr (kType == TensorType::IQ4_XS) {
      const auto& b = reinterpret_cast<const BlockIQ4_XS*>(w)[i / 8];
      d = F16ToF32(b.d);
      UnpackIQ4(b.qs + 16 * (i % 8), q);
      isum = IQ4XSScale(b, static_cast<int>(i % 8)) * Dot32(q, x[i].qs);
    } else if constexpr (kType == TensorType::MXFP4) {
      const auto& b = reinterpret_cast<const BlockMXFP4*>(w)[i];
      d = MXFP4Scale(b.e);
      UnpackIQ4(b.qs, q, kE2M1Values);
      isum = Dot32(q, x[i].qs);
    } else {
      const auto& b = reinterpret_cast<const BlockIQ4_NL*>(w)[i];
      d = F16ToF32(b.d);
      UnpackIQ4(b.qs, q);
      isum = Dot32(q, x[i].qs);
    }
    acc = std::fma(d * x[i].d, static_cast<float>(isum), acc);
  }
  return acc;
}

QuantDotFn PackedOrderDot(TensorType type) {
  switch (type) {
    case TensorType::Q4_0: return DotR8Unsigned<BlockQ4_0>;
    case TensorType::Q4_1: return DotR8Unsigned<BlockQ4_1>;
    case TensorType::Q5_0: return DotR8Unsigned<BlockQ5_0>;
    case TensorType::Q8_0: return DotR8Q8_0;
    case TensorType::Q5_1: return DotR8Unsigned<BlockQ5_1>;
    case TensorType::Q4_K: return DotR8K<false>;
    case TensorType::Q5_K: return DotR8K<true>;
    case TensorType::Q6_K: return DotQ6_K<true>;
    case TensorType::IQ4_NL: return DotR8IQ4<TensorType::IQ4_NL>;
    case TensorType::IQ4_XS: return DotR8IQ4<TensorType::IQ4_XS>;
    case TensorType::MXFP4: return DotR8IQ4<TensorType::MXFP4>;
    case TensorType::Q2_K: return DotQ2_K<true>;
    case TensorType::Q3_K: return DotQ3_K<true>;
    default: return nullptr;
  }
}

#include "backend/cpu/quant_matmul_impl.h"

}  // namespace generic
}  // namespace llm::cpu
