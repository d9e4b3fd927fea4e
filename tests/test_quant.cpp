// Block-quantized weights: dequantization against gguf-py's (an independent
// implementation; vectors from tools/gen_quant_vectors.py), quantized dot
// products against dequantize-then-dot, AVX2 against the portable kernels,
// and the matmul's independence from row split and batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/act_rounding.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/quant_pack.h"
#include "model/tensor_type.h"
#include "util/fp16.h"

// The VNNI tiles (quant_packed_x86.h with LLM_PACKED_VNNI 1, as
// quant_vnni_packed.cpp compiles them) built a third time here, for AVX2,
// with vpdpbusd replaced by an exact AVX2 equivalent: their integer logic
// (Q8_0's and IQ4's +128 offsets against the activation sums, the K-quants'
// int32 scale multiplies, the int32 chains) then runs, and is checked
// bitwise, on every x86-64 CPU with AVX2, not only where AVX-512 VNNI exists.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace llm::cpu::vnni_emulated {
// vpdpbusd: each int32 lane of acc plus the four products of its bytes,
// u unsigned by x signed, wrapping as the instruction does. The even and
// odd bytes of each 16-bit lane are multiplied apart (|u·x| <= 255·128 =
// 32640: exact in int16), then each pair of 16-bit lanes is summed into its
// 32-bit lane (madd with 1).
inline __m256i Dpbusd(__m256i acc, __m256i u, __m256i x) {
  const __m256i ue = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), uo = _mm256_srli_epi16(u, 8);
  const __m256i xe = _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8), xo = _mm256_srai_epi16(x, 8);
  const __m256i one = _mm256_set1_epi16(1);
  const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(_mm256_mullo_epi16(ue, xe), one),
                                       _mm256_madd_epi16(_mm256_mullo_epi16(uo, xo), one));
  return _mm256_add_epi32(acc, sum);
}
}  // namespace llm::cpu::vnni_emulated
#undef _mm256_dpbusd_epi32  // a macro in some compilers' headers
#define _mm256_dpbusd_epi32 ::llm::cpu::vnni_emulated::Dpbusd
namespace llm::cpu::vnni_emulated {
#define LLM_PACKED_VNNI 1
#include "backend/cpu/quant_packed_x86.h"
#undef LLM_PACKED_VNNI
}  // namespace llm::cpu::vnni_emulated
#undef _mm256_dpbusd_epi32
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#define LLM_TEST_VNNI_EMULATED 1
#endif  // x86-64

namespace llm {
namespace {

struct QuantVector {
  TensorType type;
  const char* name;
  const uint8_t* bytes;
  size_t n_bytes;
  const uint32_t* values;  // F32 bit patterns
  size_t n_values;
};
#include "data/quant_vectors.inc"

using cpu::BlockQ8Act;
using cpu::QuantDotFn;

float BitsFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

const TensorType kAllTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,
                                TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,   TensorType::Q6_K,
                                TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
                                TensorType::MXFP4, TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S,
                                TensorType::IQ3_XXS, TensorType::IQ3_S, TensorType::TQ1_0, TensorType::TQ2_0,
                                TensorType::IQ1_S, TensorType::IQ1_M};

// Byte offsets of a block's F16 scale fields.
std::vector<int> F16Fields(TensorType t) {
  switch (t) {
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K: return {0, 2};
    case TensorType::Q6_K: return {208};
    case TensorType::Q3_K: return {108};
    case TensorType::Q2_K: return {80, 82};
    case TensorType::IQ1_M: return {48, 50, 52, 54};  // its u16 scales, d in their top nibbles (RandomRow)
    case TensorType::TQ1_0: return {52};
    case TensorType::TQ2_0: return {64};
    case TensorType::MXFP4: return {0};  // byte 0, the E8M0 exponent (RandomRow: e in [110, 129])
    default: return {0};
  }
}

// A row of `cols` weights of type `t`: random bytes, sane random scales.
std::vector<uint8_t> RandomRow(TensorType t, int64_t cols, std::mt19937& rng) {
  int64_t be = 0, bb = 0;
  EXPECT_TRUE(TensorTypeLayout(t, &be, &bb));
  std::vector<uint8_t> row(cols / be * bb);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> mag(0.002f, 0.05f);
  for (int64_t blk = 0; blk < cols / be; ++blk) {
    for (int off : F16Fields(t)) {
      // F16 of a value in [0.002, 0.05) with a random sign: exponent 6..10 of 15-biased halves.
      const float v = mag(rng);
      int e = 0;
      const float m = std::frexp(v, &e);  // v = m 2^e, m in [0.5, 1)
      const uint16_t h = static_cast<uint16_t>(((byte(rng) & 1) << 15) | ((e - 1 + 15) << 10) |
                                               (static_cast<int>((m * 2 - 1) * 1024) & 0x3ff));
      std::memcpy(row.data() + blk * bb + off, &h, 2);
    }
    // IQ1_M's d: the top nibbles of its 4 u16 scales (bytes 49, 51, 53, 55)
    if (t == TensorType::IQ1_M) {
      const uint16_t h = static_cast<uint16_t>(((byte(rng) & 1) << 15) | ((5 + byte(rng) % 5) << 10) | (byte(rng) << 2));
      for (int i = 0; i < 4; ++i) {
        uint8_t& hi = row[blk * bb + 49 + 2 * i];
        hi = static_cast<uint8_t>((hi & 0x0F) | ((h >> (4 * i)) & 0xF) << 4);
      }
    }
    // MXFP4's scale is one E8M0 byte: 2^(e - 128) in 2^-18 .. 2^1
    if (t == TensorType::MXFP4) row[blk * bb] = static_cast<uint8_t>(110 + byte(rng) % 20);
  }
  return row;
}

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The SIMD table, or nullptr when this CPU/build has none.
const cpu::Kernels* Simd() {
  const cpu::Kernels& k = cpu::BestKernels();
  return std::string(k.name) == "generic" ? nullptr : &k;
}

QuantDotFn SimdDot(TensorType t) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (Simd() != nullptr) return cpu::avx2::QuantDot(t);
#endif
  (void)t;
  return nullptr;
}

// ============================================================== dequantization

TEST(Quant, LayoutTable) {
  for (const QuantVector& v : kQuantVectors) {
    int64_t be = 0, bb = 0;
    ASSERT_TRUE(TensorTypeLayout(v.type, &be, &bb)) << v.name;
    EXPECT_EQ(v.n_bytes / bb * be, v.n_values) << v.name;
    EXPECT_TRUE(IsBlockQuantized(v.type));
  }
  EXPECT_EQ(TensorRowBytes(TensorType::Q4_K, 640), 0u);  // not whole super-blocks
  EXPECT_EQ(TensorRowBytes(TensorType::Q4_K, 1024), 4 * sizeof(BlockQ4_K));
  EXPECT_EQ(TensorRowBytes(TensorType::Q4_1, 576), 18 * sizeof(BlockQ4_1));
  EXPECT_EQ(TensorRowBytes(static_cast<TensorType>(31), 256), 0u);  // a removed ggml type: not read
  EXPECT_EQ(TensorRowBytes(TensorType::IQ4_XS, 4096), 16 * sizeof(BlockIQ4_XS));
  EXPECT_EQ(TensorRowBytes(TensorType::IQ4_NL, 96), 3 * sizeof(BlockIQ4_NL));
  EXPECT_EQ(TensorRowBytes(TensorType::Q3_K, 512), 2 * sizeof(BlockQ3_K));
  EXPECT_EQ(TensorRowBytes(TensorType::Q2_K, 96), 0u);  // not whole super-blocks
  EXPECT_EQ(TensorRowBytes(TensorType::MXFP4, 2880), 90 * sizeof(BlockMXFP4));  // gpt-oss's row
  EXPECT_EQ(TensorRowBytes(TensorType::IQ2_XXS, 4096), 16u * 66);
  EXPECT_EQ(TensorRowBytes(TensorType::IQ2_XS, 2048), 8u * 74);
  EXPECT_EQ(TensorRowBytes(TensorType::IQ3_XXS, 256), 98u);
  EXPECT_EQ(TensorRowBytes(TensorType::IQ3_XXS, 128), 0u);  // not whole super-blocks
  EXPECT_EQ(TensorRowBytes(TensorType::IQ3_S, 512), 2u * 110);
  EXPECT_EQ(TensorRowBytes(TensorType::IQ2_S, 256), 82u);
  EXPECT_EQ(TensorRowBytes(TensorType::TQ1_0, 512), 2u * 54);
  EXPECT_EQ(TensorRowBytes(TensorType::TQ2_0, 256), 66u);
}

TEST(Quant, DequantizationMatchesGgufPy) {
  for (const QuantVector& v : kQuantVectors) {
    SCOPED_TRACE(v.name);
    std::vector<float> got(v.n_values);
    cpu::DequantizeBlocks(v.type, v.bytes, static_cast<int64_t>(v.n_values), got.data());
    int bad = 0;
    for (size_t i = 0; i < v.n_values && bad < 5; ++i) {
      const float want = BitsFloat(v.values[i]);
      // The same float operations as gguf-py's; allow one rounding of slack
      // for compilers that contract a*b - c into an FMA.
      // The lattice types' one product per weight has nothing to contract:
      // those must be bit-exact.
      const bool exact = IsIQLattice(v.type);
      if (exact ? std::memcmp(&got[i], &want, 4) != 0 : std::fabs(got[i] - want) > 1e-6f * std::fabs(want) + 1e-9f) {
        ADD_FAILURE() << "element " << i << ": got " << got[i] << ", gguf-py " << want;
        ++bad;
      }
    }
  }
}

// The IQ4 codebook (model/quant_tables.h, generated) is gguf-py's: every one
// of the 16 indices occurs in the random IQ4_NL vector, and each element
// gguf-py dequantized is d times the table's value for its index.
TEST(Quant, IQ4CodebookMatchesGgufPy) {
  bool seen[16] = {};
  for (const QuantVector& v : kQuantVectors) {
    if (v.type != TensorType::IQ4_NL) continue;
    for (size_t i = 0; i < v.n_values; ++i) {
      const auto& b = reinterpret_cast<const BlockIQ4_NL*>(v.bytes)[i / 32];
      const int l = static_cast<int>(i % 32);
      const int idx = l < 16 ? b.qs[l] & 0xF : b.qs[l - 16] >> 4;
      seen[idx] = true;
      EXPECT_EQ(BitsFloat(v.values[i]), cpu::F16ToF32(b.d) * static_cast<float>(kIQ4NLValues[idx]))
          << v.name << " element " << i << " index " << idx;
    }
  }
  for (int k = 0; k < 16; ++k) EXPECT_TRUE(seen[k]) << "index " << k << " not in the vectors";
}

// The MXFP4 codebook (kE2M1Values) and E8M0 scale against gguf-py: every
// code and the subnormal exponents 0 and 1 occur in the random vector, and
// each element is MXFP4Scale(e) times the table's value for its code.
// The lattice tables (kIQ2XXSGrid, kIQ2XSGrid, kIQ2SGrid, kIQ3XXSGrid,
// kIQ3SGrid, kIQ2Signs; generated) against gguf-py: the vectors hold every
// grid point (and, where signs are indices, every sign index) of each type
// (DequantizationMatchesGgufPy checks their values), and blocks llama.cpp's
// llama-quantize wrote.
TEST(Quant, LatticeVectorsCoverEveryTableEntry) {
  for (TensorType t : {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
                       TensorType::IQ3_S, TensorType::IQ1_S, TensorType::IQ1_M}) {
    SCOPED_TRACE(static_cast<int>(t));
    const bool iq1 = t == TensorType::IQ1_S || t == TensorType::IQ1_M;
    const int n_points = iq1 ? 2048 : t == TensorType::IQ2_S ? 1024 : t == TensorType::IQ2_XS || t == TensorType::IQ3_S ? 512 : 256;
    const bool sign_index = t == TensorType::IQ2_XXS || t == TensorType::IQ2_XS || t == TensorType::IQ3_XXS;
    std::vector<bool> point_seen(n_points), sign_seen(128, !sign_index);
    bool from_llama = false;
    int64_t be = 0, bb = 0;
    ASSERT_TRUE(TensorTypeLayout(t, &be, &bb));
    for (const QuantVector& v : kQuantVectors) {
      if (v.type != t) continue;
      from_llama = from_llama || std::string(v.name).find("_llama") != std::string::npos;
      for (size_t off = 0; off < v.n_bytes; off += static_cast<size_t>(bb)) {
        const uint8_t* b = v.bytes + off;
        for (int ib = 0; ib < 8; ++ib) {
          if (t == TensorType::IQ2_XS) {
            for (int l = 0; l < 4; ++l) {
              const int q = b[2 + 8 * ib + 2 * l] | b[3 + 8 * ib + 2 * l] << 8;
              point_seen[q & 511] = true, sign_seen[q >> 9] = true;
            }
          } else if (t == TensorType::IQ1_S) {  // layouts: model/tensor_type.h
            const auto& blk = *reinterpret_cast<const BlockIQ1_S*>(b);
            for (int l = 0; l < 4; ++l) point_seen[blk.qs[4 * ib + l] | ((blk.qh[ib] >> (3 * l)) & 7) << 8] = true;
          } else if (t == TensorType::IQ1_M) {
            const auto& blk = *reinterpret_cast<const BlockIQ1_M*>(b);
            for (int l = 0; l < 4; ++l)
              point_seen[blk.qs[4 * ib + l] | ((blk.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 7) << 8] = true;
          } else if (t == TensorType::IQ2_S) {
            const auto& blk = *reinterpret_cast<const BlockIQ2_S*>(b);
            for (int l = 0; l < 4; ++l) point_seen[blk.qs[4 * ib + l] | ((blk.qh[ib] >> (2 * l)) & 3) << 8] = true;
          } else if (t == TensorType::IQ3_S) {
            const auto& blk = *reinterpret_cast<const BlockIQ3_S*>(b);
            for (int k = 0; k < 8; ++k) point_seen[blk.qs[8 * ib + k] | ((blk.qh[ib] >> k) & 1) << 8] = true;
          } else {
            const uint8_t* idx = b + 2 + 8 * ib;
            const uint32_t aux = IQLoadU32(t == TensorType::IQ2_XXS ? idx + 4 : b + 66 + 4 * ib);
            for (int k = 0; k < (t == TensorType::IQ2_XXS ? 4 : 8); ++k) point_seen[idx[k]] = true;
            for (int l = 0; l < 4; ++l) sign_seen[(aux >> (7 * l)) & 127] = true;
          }
        }
      }
    }
    for (int k = 0; k < n_points; ++k) EXPECT_TRUE(point_seen[k]) << "grid point " << k << " not in the vectors";
    for (int k = 0; k < 128; ++k) EXPECT_TRUE(sign_seen[k]) << "sign index " << k << " not in the vectors";
    EXPECT_TRUE(from_llama) << "no blocks from llama-quantize (tools/gen_quant_vectors.py --llama-quantize)";
  }
  // The sign table's eighth bit: an even number of negatives.
  for (int k = 0; k < 128; ++k) EXPECT_EQ(__builtin_popcount(kIQ2Signs[k]) % 2, 0) << k;
}

// TQ1_0's base-3 digits: every byte's 5 digits (4 in qh) occur in the
// vectors' random blocks, and the llama-quantize blocks of both ternary
// types are there.
TEST(Quant, TernaryVectorsCoverEveryByte) {
  std::vector<bool> seen(256);
  bool llama1 = false, llama2 = false;
  for (const QuantVector& v : kQuantVectors) {
    llama1 = llama1 || (v.type == TensorType::TQ1_0 && std::string(v.name).find("_llama") != std::string::npos);
    llama2 = llama2 || (v.type == TensorType::TQ2_0 && std::string(v.name).find("_llama") != std::string::npos);
    if (v.type != TensorType::TQ1_0) continue;
    for (size_t off = 0; off < v.n_bytes; off += sizeof(BlockTQ1_0))
      for (int i = 0; i < 48; ++i) seen[v.bytes[off + i]] = true;
  }
  int n_seen = 0;
  for (bool s : seen) n_seen += s;
  EXPECT_EQ(n_seen, 256);
  EXPECT_TRUE(llama1 && llama2) << "no blocks from llama-quantize (tools/gen_quant_vectors.py --llama-quantize)";
}

TEST(Quant, MXFP4CodebookAndScaleMatchGgufPy) {
  bool seen[16] = {}, subnormal = false;
  for (const QuantVector& v : kQuantVectors) {
    if (v.type != TensorType::MXFP4) continue;
    for (size_t i = 0; i < v.n_values; ++i) {
      const auto& b = reinterpret_cast<const BlockMXFP4*>(v.bytes)[i / 32];
      const int l = static_cast<int>(i % 32);
      const int code = l < 16 ? b.qs[l] & 0xF : b.qs[l - 16] >> 4;
      seen[code] = true;
      subnormal = subnormal || b.e < 2;
      EXPECT_EQ(BitsFloat(v.values[i]), MXFP4Scale(b.e) * static_cast<float>(kE2M1Values[code]))
          << v.name << " element " << i << " code " << code << " e " << int{b.e};
    }
  }
  for (int k = 0; k < 16; ++k) EXPECT_TRUE(seen[k]) << "code " << k << " not in the vectors";
  EXPECT_TRUE(subnormal);
  EXPECT_EQ(MXFP4Scale(128), 1.0f);
  EXPECT_EQ(MXFP4Scale(255), 0x1p127f);
  EXPECT_EQ(MXFP4Scale(0), 0x1p-128f);
}

// DequantizeRow (embedding lookups) agrees with DequantizeBlocks on a row.
TEST(Quant, DequantizeRowOfMatrix) {
  std::mt19937 rng(5);
  for (TensorType t : kAllTypes) {
    const int64_t cols = 512, rows = 3;
    std::vector<uint8_t> m;
    for (int r = 0; r < rows; ++r) {
      std::vector<uint8_t> row = RandomRow(t, cols, rng);
      m.insert(m.end(), row.begin(), row.end());
    }
    WeightView w;
    w.type = t;
    w.data = m.data();
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = TensorRowBytes(t, cols);
    std::vector<float> a(cols), b(cols);
    cpu::DequantizeRow(w, 2, a.data());
    cpu::DequantizeBlocks(t, m.data() + 2 * w.row_bytes, cols, b.data());
    EXPECT_EQ(a, b) << static_cast<int>(t);
  }
}

// ============================================================== activations

TEST(Quant, ActivationQuantization) {
  std::mt19937 rng(7);
  std::vector<float> x = RandomFloats(256, rng);
  x[40] = 0.5f * x[41];  // nothing special, just not all normal
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block
  std::vector<BlockQ8Act> q(8);
  cpu::GenericKernels().quantize_act(x.data(), 256, q.data());
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    EXPECT_EQ(q[b].d, amax / 127.0f);
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      sum += q[b].qs[i];
      EXPECT_LE(std::fabs(q[b].d * q[b].qs[i] - x[32 * b + i]), 0.5f * q[b].d * 1.0001f + 1e-30f);
    }
    EXPECT_EQ(q[b].s, q[b].d * static_cast<float>(sum));
  }
  EXPECT_EQ(q[2].d, 0.0f);
  // The SIMD quantization is bitwise the portable one.
  if (const cpu::Kernels* k = Simd()) {
    std::vector<BlockQ8Act> s(8);
    k->quantize_act(x.data(), 256, s.data());
    EXPECT_EQ(std::memcmp(s.data(), q.data(), sizeof(BlockQ8Act) * 8), 0);
  }
}

// ============================================================== dot products

struct DotCase {
  double ref;    // dequantized weights · dequantized activations, in double
  double scale;  // Σ |w_i x_i|: the size of the rounding error's terms
};

DotCase Reference(TensorType t, const std::vector<uint8_t>& row, const std::vector<BlockQ8Act>& xq, int64_t cols) {
  std::vector<float> w(cols);
  cpu::DequantizeBlocks(t, row.data(), cols, w.data());
  DotCase c{0, 0};
  for (int64_t i = 0; i < cols; ++i) {
    const double x = static_cast<double>(xq[i / 32].d) * xq[i / 32].qs[i % 32];
    c.ref += w[i] * x;
    c.scale += std::fabs(w[i] * x);
  }
  return c;
}

// llama.cpp's Q8_K rounding (act_rounding.h) on values whose quants are
// known by hand: per 256 values, iscale = -127 / (the value of largest
// magnitude), q = min(127, round-half-even(iscale · x)), d = 1 / iscale,
// shared by the eight 32-value blocks.
TEST(Quant, PeerQ8_KRoundingByHand) {
  std::vector<float> x(512, 0.0f);
  // block 0: largest -2 -> iscale 63.5; 1 -> 63.5 (a tie: 64), 2 -> 127, 0.5 -> 31.75 (32)
  x[5] = -2.0f; x[1] = 1.0f; x[40] = 2.0f; x[255] = 0.5f; x[100] = -1.0f;
  // block 1: largest +4 (the first of two) -> iscale -31.75, d negative;
  // -4 -> 127, -1 -> 31.75 (32), 3 -> -95.25 (-95)
  x[256 + 10] = 4.0f; x[256 + 11] = -4.0f; x[256 + 200] = -1.0f; x[256 + 33] = 3.0f;
  std::vector<BlockQ8Act> q(16);
  cpu::QuantizeRowAsQ8_K(x.data(), 512, q.data());
  for (int b = 0; b < 8; ++b) {
    EXPECT_EQ(q[b].d, 1.0f / 63.5f) << b;
    EXPECT_EQ(q[8 + b].d, 1.0f / -31.75f) << b;
  }
  EXPECT_EQ(q[0].qs[5], -127);
  EXPECT_EQ(q[0].qs[1], 64);
  EXPECT_EQ(q[1].qs[8], 127);
  EXPECT_EQ(q[7].qs[31], 32);
  EXPECT_EQ(q[3].qs[4], -64);  // -1 * 63.5 = -63.5: ties to even
  EXPECT_EQ(q[8].qs[10], -127);
  EXPECT_EQ(q[8].qs[11], 127);
  EXPECT_EQ(q[14].qs[8], 32);
  EXPECT_EQ(q[9].qs[1], -95);
  EXPECT_EQ(q[0].s, q[0].d * static_cast<float>(-127 + 64));
  EXPECT_EQ(q[2].s, 0.0f);
  EXPECT_EQ(q[8].s, 0.0f);  // -127 + 127
  // an all-zero block: zero scale and quants
  std::vector<float> z(256, 0.0f);
  cpu::QuantizeRowAsQ8_K(z.data(), 256, q.data());
  for (int b = 0; b < 8; ++b) {
    EXPECT_EQ(q[b].d, 0.0f);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(q[b].qs[i], 0);
  }
}

// The AVX2 Q8_K rounding gives the portable code's bits: random rows, rows
// whose largest magnitude comes twice with opposite signs (the first
// decides d's sign), ties at .5, values past F16, zeros, an infinity, NaNs.
TEST(Quant, PeerQ8_KRoundingFastPathBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pos(0, 255);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t n = 256 * (1 + trial % 4);
    std::vector<float> x(static_cast<size_t>(n));
    const float scale = std::ldexp(1.0f, trial % 40 - 20);
    for (float& v : x) v = nd(rng) * scale;
    for (int64_t b = 0; b < n / 256; ++b) {
      float* blk = x.data() + 256 * b;
      switch ((trial + b) % 7) {
        case 0: {  // the largest magnitude twice, opposite signs
          const int i = pos(rng), k = pos(rng);
          blk[i] = 10.0f * scale;
          blk[k] = (i == k ? 1.0f : -10.0f) * scale;
          break;
        }
        case 1:  // halves: iscale 127 / 127 = -1 with m = -127, products k + 0.5
          for (int i = 0; i < 256; ++i) blk[i] = static_cast<float>(i % 64) - 31.5f;
          blk[pos(rng)] = -127.0f;
          break;
        case 2: std::fill(blk, blk + 256, 0.0f); break;
        case 3: blk[pos(rng)] = std::numeric_limits<float>::quiet_NaN(); break;
        case 4: blk[pos(rng)] = std::numeric_limits<float>::infinity(); break;
        case 5: blk[pos(rng)] = 1e30f; break;
        default: break;
      }
    }
    std::vector<BlockQ8Act> fast(static_cast<size_t>(n / 32)), ref(static_cast<size_t>(n / 32));
    cpu::QuantizeRowAsQ8_K(x.data(), n, fast.data());
    cpu::QuantizeRowAsQ8_KScalar(x.data(), n, ref.data());
    ASSERT_EQ(std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(BlockQ8Act)), 0) << "trial " << trial;
  }
}

// Q8_0 and Q8_1: llmrt's own 32-value rounding with the scale as F16 (Q8_1:
// its sum d·Σq as F16 too, from the F32 d).
TEST(Quant, PeerQ8_0AndQ8_1Rounding) {
  std::mt19937 rng(5);
  const std::vector<float> x = RandomFloats(256, rng);
  std::vector<BlockQ8Act> q0(8), q1(8);
  cpu::QuantizeRowAsQ8_0(x.data(), 256, q0.data());
  cpu::QuantizeRowAsQ8_1(x.data(), 256, q1.data());
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    EXPECT_EQ(q0[b].d, F16ToF32(F32ToF16(d)));
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(q0[b].qs[i], static_cast<int>(std::nearbyint(x[32 * b + i] * (127.0f / amax))));
      sum += q0[b].qs[i];
    }
    EXPECT_EQ(q0[b].s, q0[b].d * static_cast<float>(sum));
    EXPECT_EQ(std::memcmp(q0[b].qs, q1[b].qs, 32), 0);
    EXPECT_EQ(q1[b].d, q0[b].d);
    EXPECT_EQ(q1[b].s, F16ToF32(F32ToF16(d * static_cast<float>(sum))));
  }
}

TEST(Quant, PeerActRoundingOfEachType) {
  using cpu::ActRounding;
  EXPECT_EQ(cpu::PeerActRounding(TensorType::F32), ActRounding::kOwn);
  EXPECT_EQ(cpu::PeerActRounding(TensorType::F16), ActRounding::kOwn);
  EXPECT_EQ(cpu::PeerActRounding(TensorType::BF16), ActRounding::kOwn);
  for (TensorType t : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::IQ4_NL, TensorType::MXFP4})
    EXPECT_EQ(cpu::PeerActRounding(t), ActRounding::kQ8_0) << static_cast<int>(t);
  for (TensorType t : {TensorType::Q4_1, TensorType::Q5_1})
    EXPECT_EQ(cpu::PeerActRounding(t), ActRounding::kQ8_1) << static_cast<int>(t);
  // every type with 256-weight super-blocks
  for (TensorType t : kAllTypes) {
    int64_t be = 0, bb = 0;
    TensorTypeLayout(t, &be, &bb);
    if (be == 256) {
      EXPECT_EQ(cpu::PeerActRounding(t), ActRounding::kQ8_K) << static_cast<int>(t);
    }
  }
}

// Every 256-block type's dot products (portable, AVX2, and the packed AVX2
// and VNNI matmuls where the type packs) on Q8_K-rounded activations, whose
// scale is shared by eight blocks and negative when the largest value is
// positive: against the dequantized product; the packed AVX2 and VNNI tiles
// bitwise the portable kernel in the packed order.
TEST(Quant, DotProductsOnPeerQ8_KActivations) {
  std::mt19937 rng(23);
  for (TensorType t : kAllTypes) {
    int64_t be = 0, bb = 0;
    TensorTypeLayout(t, &be, &bb);
    if (be != 256) continue;
    SCOPED_TRACE(static_cast<int>(t));
    const int64_t rows = 12, cols = 512, n_tok = 3;
    std::vector<uint8_t> m;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<uint8_t> row = RandomRow(t, cols, rng);
      m.insert(m.end(), row.begin(), row.end());
    }
    std::vector<float> x = RandomFloats(n_tok * cols, rng);
    x[7] = 9.0f;            // token 0, block 0: the largest positive (d < 0)
    x[cols + 300] = -9.0f;  // token 1, block 1: negative (d > 0)
    std::vector<BlockQ8Act> xq(n_tok * cols / 32);
    for (int64_t tk = 0; tk < n_tok; ++tk) cpu::QuantizeRowAsQ8_K(x.data() + tk * cols, cols, xq.data() + tk * cols / 32);
    ASSERT_LT(xq[0].d, 0.0f);
    ASSERT_GT(xq[cols / 32 + 8].d, 0.0f);
    WeightView w;
    w.type = t; w.data = m.data(); w.rows = rows; w.cols = cols; w.row_bytes = TensorRowBytes(t, cols);
    cpu::MatMulArgs a;
    a.w = &w; a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
    a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
    std::vector<float> gen(n_tok * rows);
    a.y = gen.data();
    cpu::GenericKernels().matmul(a);
    for (int64_t tk = 0; tk < n_tok; ++tk) {
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> row(m.begin() + r * w.row_bytes, m.begin() + (r + 1) * w.row_bytes);
        const std::vector<BlockQ8Act> xt(xq.begin() + tk * cols / 32, xq.begin() + (tk + 1) * cols / 32);
        const DotCase c = Reference(t, row, xt, cols);
        EXPECT_NEAR(gen[tk * rows + r], c.ref, 2e-6 * c.scale + 1e-12) << "token " << tk << " row " << r;
      }
    }
    if (const cpu::Kernels* k = Simd()) {
      std::vector<float> simd(n_tok * rows, -1.0f);
      a.y = simd.data();
      k->matmul(a);
      float scale = 0;
      for (float v : gen) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < gen.size(); ++i) EXPECT_NEAR(simd[i], gen[i], 1e-5 * scale) << "SIMD matmul " << i;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      if (cpu::CanPackR8(w)) {
        std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
        ASSERT_TRUE(cpu::PackR8(w, packed.data()));
        WeightView wp = w;
        wp.packed = packed.data();
        a.w = &wp;
        // the portable kernel reads the packed view in the packed summation order
        std::vector<float> pgen(n_tok * rows), avx2(n_tok * rows, -1.0f), vnni(n_tok * rows, -1.0f);
        a.y = pgen.data();
        cpu::GenericKernels().matmul(a);
        for (size_t i = 0; i < gen.size(); ++i) EXPECT_NEAR(pgen[i], gen[i], 1e-5 * scale) << "packed order " << i;
        a.y = avx2.data();
        cpu::avx2::PackedQuantMatMul(a);
        EXPECT_EQ(std::memcmp(avx2.data(), pgen.data(), gen.size() * 4), 0) << "packed AVX2";
        if (cpu::PackedVnniUsable()) {
          a.y = vnni.data();
          cpu::vnni::PackedQuantMatMul(a);
          EXPECT_EQ(std::memcmp(vnni.data(), avx2.data(), gen.size() * 4), 0) << "packed VNNI";
        }
      }
#endif
    }
  }
}

TEST(Quant, DotProductsMatchDequantizedDot) {
  std::mt19937 rng(11);
  for (TensorType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    int64_t block_elems = 0, block_bytes = 0;
    TensorTypeLayout(t, &block_elems, &block_bytes);
    // Rows of whole groups of 8 blocks and rows with a partial group.
    for (int64_t cols : {32, 64, 96, 256, 512, 576, 1536}) {
      if (cols % block_elems != 0) continue;
      for (int trial = 0; trial < 8; ++trial) {
        const std::vector<uint8_t> row = RandomRow(t, cols, rng);
        const std::vector<float> x = RandomFloats(cols, rng, trial == 0 ? 1e-3f : 1.0f);
        std::vector<BlockQ8Act> xq(cols / 32);
        cpu::GenericKernels().quantize_act(x.data(), cols, xq.data());
        const DotCase c = Reference(t, row, xq, cols);
        const double tol = 2e-6 * c.scale + 1e-12;
        const float g = cpu::generic::QuantDot(t)(row.data(), xq.data(), cols / 32);
        EXPECT_NEAR(g, c.ref, tol) << "generic, cols " << cols;
        if (QuantDotFn s = SimdDot(t)) {
          const float v = s(row.data(), xq.data(), cols / 32);
          EXPECT_NEAR(v, c.ref, tol) << "simd, cols " << cols;
          EXPECT_NEAR(v, g, tol) << "simd vs generic, cols " << cols;
        }
        // Against the unquantized activations: only the activation rounding
        // (at most d/2 per value, d = max|x|/127 per block) separates them.
        std::vector<float> w(cols);
        cpu::DequantizeBlocks(t, row.data(), cols, w.data());
        double exact = 0, bound = 0;
        for (int64_t i = 0; i < cols; ++i) {
          exact += static_cast<double>(w[i]) * x[i];
          bound += std::fabs(w[i]) * 0.5 * xq[i / 32].d;
        }
        EXPECT_NEAR(g, exact, bound * 1.001 + tol) << "vs F32 activations, cols " << cols;
      }
    }
  }
}

// Extreme quants: every weight at the end of its range, activations at ±127.
TEST(Quant, DotProductsAtTheRangeEnds) {
  for (TensorType t : kAllTypes) {
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(t)) + " fill " + std::to_string(fill));
      const int64_t cols = 256;
      std::mt19937 rng(3);
      std::vector<uint8_t> row = RandomRow(t, cols, rng);  // for the scale fields
      int64_t be = 0, bb = 0;
      TensorTypeLayout(t, &be, &bb);
      const std::vector<int> f16 = F16Fields(t);
      for (int64_t i = 0; i < static_cast<int64_t>(row.size()); ++i) {
        const int64_t off = i % bb;
        bool is_scale = false;
        for (int f : f16) is_scale = is_scale || off == f || off == f + 1;
        if (!is_scale) row[i] = fill;
      }
      std::vector<float> x(cols);
      for (int64_t i = 0; i < cols; ++i) x[i] = i % 3 == 0 ? -1.0f : 1.0f;
      std::vector<BlockQ8Act> xq(cols / 32);
      cpu::GenericKernels().quantize_act(x.data(), cols, xq.data());
      const DotCase c = Reference(t, row, xq, cols);
      const float g = cpu::generic::QuantDot(t)(row.data(), xq.data(), cols / 32);
      EXPECT_NEAR(g, c.ref, 2e-6 * c.scale + 1e-12);
      if (QuantDotFn s = SimdDot(t)) {
        EXPECT_NEAR(s(row.data(), xq.data(), cols / 32), c.ref, 2e-6 * c.scale + 1e-12);
      }
    }
  }
}

// ============================================================== matmul

// Through the Kernels table: a split of the rows, or a token computed alone,
// gives bitwise the same outputs as one call over everything.
TEST(Quant, MatMulIndependentOfSplitAndBatch) {
  std::mt19937 rng(13);
  const int64_t rows = 37, n_tok = 21;
  std::vector<const cpu::Kernels*> tables = {&cpu::GenericKernels()};
  if (const cpu::Kernels* k = Simd()) tables.push_back(k);
  for (const cpu::Kernels* k : tables) {
    for (TensorType t : kAllTypes)
    for (int64_t cols : {int64_t{96}, int64_t{512}}) {
      int64_t block_elems = 0, block_bytes = 0;
      TensorTypeLayout(t, &block_elems, &block_bytes);
      if (cols % block_elems != 0) continue;
      SCOPED_TRACE(std::string(k->name) + " type " + std::to_string(static_cast<int>(t)));
      std::vector<uint8_t> m;
      for (int r = 0; r < rows; ++r) {
        std::vector<uint8_t> row = RandomRow(t, cols, rng);
        m.insert(m.end(), row.begin(), row.end());
      }
      WeightView w;
      w.type = t;
      w.data = m.data();
      w.rows = rows;
      w.cols = cols;
      w.row_bytes = TensorRowBytes(t, cols);
      const std::vector<float> x = RandomFloats(n_tok * cols, rng);
      std::vector<BlockQ8Act> xq(n_tok * cols / 32);
      k->quantize_act(x.data(), n_tok * cols, xq.data());  // rows of whole blocks: the same as per token

      cpu::MatMulArgs a;
      a.w = &w;
      a.x = x.data();
      a.ld_x = cols;
      a.xq = xq.data();
      a.ld_xq = cols / 32;
      a.n_tok = n_tok;
      std::vector<float> all(n_tok * rows, 0.0f);
      a.y = all.data();
      a.ld_y = rows;
      a.row_begin = 0;
      a.row_end = rows;
      k->matmul(a);

      std::vector<float> split(n_tok * rows, 0.0f);
      a.y = split.data();
      for (int64_t r0 : {0, 5, 6, 30}) {
        a.row_begin = r0;
        a.row_end = r0 == 0 ? 5 : r0 == 5 ? 6 : r0 == 6 ? 30 : rows;
        k->matmul(a);
      }
      EXPECT_EQ(std::memcmp(all.data(), split.data(), all.size() * 4), 0);

      std::vector<float> one(rows, 0.0f);
      a.n_tok = 1;
      a.row_begin = 0;
      a.row_end = rows;
      a.y = one.data();
      a.xq = xq.data() + 17 * (cols / 32);
      k->matmul(a);
      EXPECT_EQ(std::memcmp(one.data(), all.data() + 17 * rows, rows * 4), 0);

      // accumulate adds to what is there
      std::vector<float> acc(rows, 1.0f);
      a.y = acc.data();
      a.accumulate = true;
      k->matmul(a);
      for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(acc[r], 1.0f + one[r]);

      // and the output is the row dot product
      for (int64_t r = 0; r < rows; r += 9) {
        const DotCase c = Reference(t, std::vector<uint8_t>(m.begin() + r * w.row_bytes, m.begin() + (r + 1) * w.row_bytes),
                                    std::vector<BlockQ8Act>(xq.begin() + 17 * (cols / 32), xq.begin() + 18 * (cols / 32)),
                                    cols);
        EXPECT_NEAR(one[r], c.ref, 2e-6 * c.scale + 1e-12);
      }
    }
  }
}

}  // namespace
// The SIMD matmul against the portable one, whole matrices: rows with whole
// groups of 8 blocks and with a partial group, token counts that use every
// tile width (4, 2, 1) and more than one token block.
TEST(Quant, SimdMatMulMatchesPortable) {
  if (!Simd()) GTEST_SKIP() << "this CPU (or build) has no SIMD kernels: only the portable ones run here";
  std::mt19937 rng(5);
  for (TensorType t : kAllTypes) {
    int64_t be = 0, bb = 0;
    TensorTypeLayout(t, &be, &bb);
    for (int64_t cols : {int64_t{64}, int64_t{128}, int64_t{256}, int64_t{96}}) {
      if (cols % be) continue;
      for (int64_t n_tok : {1, 3, 5, 7, 30}) {
        const int64_t rows = 13;
        std::vector<uint8_t> m;
        for (int r = 0; r < rows; ++r) {
          std::vector<uint8_t> row = RandomRow(t, cols, rng);
          m.insert(m.end(), row.begin(), row.end());
        }
        WeightView w;
        w.type = t; w.data = m.data(); w.rows = rows; w.cols = cols; w.row_bytes = TensorRowBytes(t, cols);
        const std::vector<float> x = RandomFloats(n_tok * cols, rng);
        std::vector<BlockQ8Act> xq(n_tok * cols / 32);
        cpu::GenericKernels().quantize_act(x.data(), n_tok * cols, xq.data());
        cpu::MatMulArgs a;
        a.w = &w; a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
        a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
        std::vector<float> yg(n_tok * rows), ys(n_tok * rows);
        a.y = yg.data(); cpu::GenericKernels().matmul(a);
        a.y = ys.data(); Simd()->matmul(a);
        float scale = 0;
        for (float v : yg) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < yg.size(); ++i) {
          ASSERT_NEAR(yg[i], ys[i], 1e-5 * scale)
              << "type " << static_cast<int>(t) << " cols " << cols << " n_tok " << n_tok << " i " << i;
        }
      }
    }
  }
}

}  // namespace llm

namespace llm {
namespace {

// The row-interleaved (packed) path: matrices of every packed type whose row
// count is not a multiple of 8, run through the SIMD and the portable
// kernels with the packed copy set. The SIMD kernel reads the packed bytes,
// the portable one the original rows in the same summation order, so equal
// outputs also prove the packing lost nothing. Row splits that cut a group of
// 8, single tokens, every tile width and accumulate are covered; the packed
// sums agree with the row-major ones and with the exact dot product.
// Every type the backend packs (CanPackR8).
const TensorType kPackedTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,
                                   TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,   TensorType::Q6_K,
                                   TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,  TensorType::Q2_K,
                                   TensorType::Q3_K};

TEST(Quant, PackedMatMulMatchesPortableBitwise) {
  std::mt19937 rng(21);
  for (TensorType t : kPackedTypes) {
    for (int64_t cols : {int64_t{32}, int64_t{96}, int64_t{160}, int64_t{256}, int64_t{576}, int64_t{768}}) {
      int64_t be = 0, bb = 0;
      ASSERT_TRUE(TensorTypeLayout(t, &be, &bb));
      if (cols % be != 0) continue;
      for (int64_t rows : {int64_t{1}, int64_t{13}, int64_t{37}}) {
        SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " cols " + std::to_string(cols) + " rows " +
                     std::to_string(rows));
        std::vector<uint8_t> m;
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<uint8_t> row = RandomRow(t, cols, rng);
          m.insert(m.end(), row.begin(), row.end());
        }
        WeightView w;
        w.type = t;
        w.data = m.data();
        w.rows = rows;
        w.cols = cols;
        w.row_bytes = TensorRowBytes(t, cols);
        ASSERT_TRUE(cpu::CanPackR8(w));
        std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
        ASSERT_EQ(packed.size(), static_cast<size_t>((rows + 7) / 8 * (cols / 32)) *
                                     cpu::PackedBlockBytes(t));
        ASSERT_TRUE(cpu::PackR8(w, packed.data()));
        WeightView wp = w;
        wp.packed = packed.data();

        const int64_t n_tok = 11;  // tiles 4, 4, 2, 1
        const std::vector<float> x = RandomFloats(n_tok * cols, rng);
        std::vector<BlockQ8Act> xq(n_tok * cols / 32);
        cpu::GenericKernels().quantize_act(x.data(), n_tok * cols, xq.data());
        cpu::MatMulArgs a;
        a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
        a.ld_y = rows; a.row_begin = 0; a.row_end = rows;

        auto run = [&](const cpu::Kernels& k, const WeightView& view) {
          std::vector<float> y(n_tok * rows, -1.0f);
          a.w = &view;
          a.y = y.data();
          k.matmul(a);
          return y;
        };
        const std::vector<float> ref = run(cpu::GenericKernels(), w);    // row-major order
        const std::vector<float> gen = run(cpu::GenericKernels(), wp);   // packed order, portable
        float scale = 0;
        for (float v : ref) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(gen[i], ref[i], 1e-5 * scale + 1e-12) << i;
        // the exact dot product of the quantized operands
        for (int64_t r = 0; r < rows; r += 5) {
          const DotCase c = Reference(t, std::vector<uint8_t>(m.begin() + r * w.row_bytes, m.begin() + (r + 1) * w.row_bytes),
                                      std::vector<BlockQ8Act>(xq.begin() + 3 * (cols / 32), xq.begin() + 4 * (cols / 32)),
                                      cols);
          EXPECT_NEAR(gen[3 * rows + r], c.ref, 2e-6 * c.scale + 1e-12);
        }
        const cpu::Kernels* simd = Simd();
        if (simd == nullptr) continue;
        const std::vector<float> all = run(*simd, wp);
        ASSERT_EQ(std::memcmp(all.data(), gen.data(), all.size() * 4), 0);

        // row ranges that cut groups of 8, and accumulate
        std::vector<float> split(n_tok * rows, 2.0f);
        a.y = split.data();
        a.w = &wp;
        a.accumulate = true;
        int64_t lo = 0;
        for (int64_t hi : {int64_t{3}, int64_t{9}, int64_t{10}, int64_t{24}, rows}) {
          hi = std::min(hi, rows);
          if (hi <= lo) continue;
          a.row_begin = lo;
          a.row_end = hi;
          simd->matmul(a);
          lo = hi;
        }
        for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(split[i], 2.0f + all[i]) << i;

        // one token alone
        a.accumulate = false;
        a.row_begin = 0;
        a.row_end = rows;
        a.n_tok = 1;
        a.xq = xq.data() + 9 * (cols / 32);
        std::vector<float> one(rows, 0.0f);
        a.y = one.data();
        simd->matmul(a);
        ASSERT_EQ(std::memcmp(one.data(), all.data() + 9 * rows, rows * 4), 0);
      }
    }
  }
}

// Q2_K and Q3_K packed against many tokens rounded as llama.cpp's Q8_K
// (the activations their files meet): token blocks of 32, 32 and a partial
// one (the activation pairs PackSumPairs makes are kept per token block),
// a row count that leaves a partial group; the SIMD tile bitwise the
// portable packed order, which follows the row-major dot.
TEST(Quant, PackedK23ManyTokensOnPeerQ8_K) {
  std::mt19937 rng(31);
  for (TensorType t : {TensorType::Q2_K, TensorType::Q3_K}) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)));
    const int64_t rows = 21, cols = 512, n_tok = 70;
    std::vector<uint8_t> m;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<uint8_t> row = RandomRow(t, cols, rng);
      m.insert(m.end(), row.begin(), row.end());
    }
    WeightView w;
    w.type = t; w.data = m.data(); w.rows = rows; w.cols = cols; w.row_bytes = TensorRowBytes(t, cols);
    std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
    ASSERT_TRUE(cpu::PackR8(w, packed.data()));
    WeightView wp = w;
    wp.packed = packed.data();
    const std::vector<float> x = RandomFloats(n_tok * cols, rng);
    std::vector<BlockQ8Act> xq(n_tok * cols / 32);
    for (int64_t tk = 0; tk < n_tok; ++tk) cpu::QuantizeRowAsQ8_K(x.data() + tk * cols, cols, xq.data() + tk * cols / 32);
    cpu::MatMulArgs a;
    a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
    a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
    auto run = [&](const cpu::Kernels& k, const WeightView& view) {
      std::vector<float> y(n_tok * rows, -1.0f);
      a.w = &view;
      a.y = y.data();
      k.matmul(a);
      return y;
    };
    const std::vector<float> ref = run(cpu::GenericKernels(), w), gen = run(cpu::GenericKernels(), wp);
    float scale = 0;
    for (float v : ref) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(gen[i], ref[i], 1e-5 * scale) << i;
    if (const cpu::Kernels* simd = Simd()) {
      const std::vector<float> got = run(*simd, wp);
      ASSERT_EQ(std::memcmp(got.data(), gen.data(), got.size() * 4), 0);
    }
  }
}

// A random packed-weight matmul for the packed-tile tests: `rows` random
// rows of type t packed R8, n_tok tokens of activations (token `extreme`
// all at ±127), the args set for the whole row range, and gen the portable
// packed matmul's output. The args point into the object: not copied.
struct PackedProblem {
  std::vector<uint8_t> m, packed;
  WeightView w, wp;
  std::vector<float> x, gen;
  std::vector<BlockQ8Act> xq;
  cpu::MatMulArgs a;
  // prep: edits the random weights m and activations x before they are
  // packed and quantized.
  PackedProblem(TensorType t, int64_t rows, int64_t cols, int64_t n_tok, int64_t extreme, std::mt19937& rng,
                const std::function<void(PackedProblem&)>& prep = {}) {
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<uint8_t> row = RandomRow(t, cols, rng);
      m.insert(m.end(), row.begin(), row.end());
    }
    w.type = t; w.data = m.data(); w.rows = rows; w.cols = cols; w.row_bytes = TensorRowBytes(t, cols);
    x = RandomFloats(n_tok * cols, rng);
    for (int64_t i = 0; i < cols; ++i) x[extreme * cols + i] = (i % 3 == 0 ? -1.0f : 1.0f);
    if (prep) prep(*this);
    packed.resize(cpu::PackedR8Bytes(w));
    EXPECT_TRUE(cpu::PackR8(w, packed.data()));
    wp = w;
    wp.packed = packed.data();
    xq.resize(n_tok * cols / 32);
    cpu::GenericKernels().quantize_act(x.data(), n_tok * cols, xq.data());
    a.w = &wp; a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
    a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
    gen.resize(n_tok * rows);
    a.y = gen.data();
    cpu::GenericKernels().matmul(a);
  }
  PackedProblem(const PackedProblem&) = delete;
  PackedProblem& operator=(const PackedProblem&) = delete;
  // matmul's output over the whole range, bitwise gen.
  void ExpectWhole(void (*matmul)(const cpu::MatMulArgs&)) {
    std::vector<float> y(gen.size(), -1.0f);
    a.y = y.data();
    a.accumulate = false;
    a.row_begin = 0;
    a.row_end = w.rows;
    matmul(a);
    EXPECT_EQ(std::memcmp(y.data(), gen.data(), gen.size() * 4), 0);
  }
  // matmul over row ranges ending at `cuts` (the last w.rows), accumulated
  // onto 2: bitwise 2 + gen.
  void ExpectSplit(void (*matmul)(const cpu::MatMulArgs&), std::initializer_list<int64_t> cuts) {
    std::vector<float> split(gen.size(), 2.0f);
    a.y = split.data();
    a.accumulate = true;
    int64_t lo = 0;
    for (int64_t hi : cuts) {
      a.row_begin = lo;
      a.row_end = hi;
      matmul(a);
      lo = hi;
    }
    for (size_t i = 0; i < gen.size(); ++i) ASSERT_EQ(split[i], 2.0f + gen[i]) << i;
  }
};

const cpu::Kernels* g_simd = nullptr;
void SimdMatMul(const cpu::MatMulArgs& a) { g_simd->matmul(a); }

// Many tokens on the packed tiles of 8 tokens (Q2_K, Q3_K, IQ4_NL, IQ4_XS,
// MXFP4; AVX2) and their order of row groups in chunks: 18 row groups (more
// than one chunk, the last group partial), token blocks of 32 and a partial
// one of 13 (tiles of 8, 4 and 1 token), a token at ±127 (the int16 sums'
// bounds), row ranges that cut groups and chunks, accumulated: bitwise the
// portable packed matmul, for every packed type.
TEST(Quant, PackedManyTokensMatchPortableBitwise) {
  g_simd = Simd();
  if (g_simd == nullptr) GTEST_SKIP() << "no SIMD kernels on this CPU";
  std::mt19937 rng(91);
  for (TensorType t : kPackedTypes) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)));
    const int64_t rows = 8 * 17 + 5;
    PackedProblem p(t, rows, 512, 45, 37, rng);
    p.ExpectWhole(SimdMatMul);
    p.ExpectSplit(SimdMatMul, {5, 8, 100, 133, rows});
  }
}

// IQ4_XS's prefill path (AVX2: int16 weights with the sub-block scale
// folded in, decoded once per row group and token block): 135 tokens (token
// blocks 64 + 64 + 7: tiles of 4, 2 and 1), 6 row groups (the last partial),
// rows whose every index is 0 (-127) with the sub-blocks' scales ls - 32
// alternating -32 and +31 (the int16 products' bounds, 127 · 32), tokens at
// +127, -127 and alternating, row ranges cutting groups, accumulated: bitwise
// the portable packed matmul.
TEST(Quant, PackedIQ4XSManyTokensMatchPortableBitwise) {
  g_simd = Simd();
  if (g_simd == nullptr) GTEST_SKIP() << "no SIMD kernels on this CPU";
  std::mt19937 rng(123);
  const int64_t rows = 8 * 5 + 3, cols = 512, n_tok = 135;
  PackedProblem p(TensorType::IQ4_XS, rows, cols, n_tok, 70, rng, [&](PackedProblem& q) {
    for (int64_t r = 0; r < rows; r += 2) {  // even rows at the extremes, odd ones random
      auto* blk = reinterpret_cast<BlockIQ4_XS*>(q.m.data() + r * q.w.row_bytes);
      for (int64_t s = 0; s < cols / 256; ++s) {
        std::memset(blk[s].qs, 0, sizeof(blk[s].qs));  // index 0: -127
        // sub-block j: ls = 0 (-32) for even j + r / 2, else 63 (+31)
        blk[s].scales_h = 0;
        std::memset(blk[s].scales_l, 0, sizeof(blk[s].scales_l));
        for (int j = 0; j < 8; ++j)
          if ((j + r / 2) % 2 == 1) {
            blk[s].scales_h |= static_cast<uint16_t>(3 << (2 * j));
            blk[s].scales_l[j / 2] |= static_cast<uint8_t>(0xF << (4 * (j % 2)));
          }
      }
    }
    for (int64_t i = 0; i < cols; ++i) {
      q.x[3 * cols + i] = 1.0f;    // +127
      q.x[134 * cols + i] = -1.0f;  // -127
    }
  });
  const auto* b0 = reinterpret_cast<const BlockIQ4_XS*>(p.m.data());
  ASSERT_EQ(IQ4XSScale(b0[0], 0), -32);
  ASSERT_EQ(IQ4XSScale(b0[0], 1), 31);
  ASSERT_EQ(p.xq[3 * cols / 32].qs[0], 127);
  ASSERT_EQ(p.xq[134 * cols / 32].qs[5], -127);
  p.ExpectWhole(SimdMatMul);
  p.ExpectSplit(SimdMatMul, {3, 8, 21, 40, rows});
}

// The packed tiles with AVX-512 VNNI (vpdpbusd straight into int32 lanes;
// Q8_0 as q + 128 against the activations, minus 128 · their sum) give
// bitwise the outputs of the AVX2 tiles and of the portable packed matmul:
// every packed type, row groups cut by the row range, token blocks of 32
// and a partial one (the activation sums are kept per token block), and
// accumulation. Skipped where the CPU has no AVX512VL + AVX512_VNNI.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
void CheckPackedVnniBitwise(void (*vnni_matmul)(const cpu::MatMulArgs&)) {
  std::mt19937 rng(77);
  for (TensorType t : kPackedTypes) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)));
    const int64_t rows = 45;  // 6 row groups (the last partial); token blocks 32 + 9
    PackedProblem p(t, rows, 512, 41, 5, rng);
    p.ExpectWhole(cpu::avx2::PackedQuantMatMul);
    p.ExpectWhole(vnni_matmul);
    p.ExpectSplit(vnni_matmul, {5, 8, 19, 40, rows});
  }
}
#endif

TEST(Quant, PackedVnniMatchesAvx2Bitwise) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (Simd() == nullptr || !cpu::PackedVnniUsable()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  CheckPackedVnniBitwise(cpu::vnni::PackedQuantMatMul);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// The same tiles' VNNI code with vpdpbusd emulated in AVX2 (above): runs
// wherever AVX2 does, so the VNNI variant of every packed type is checked
// on machines without AVX-512 VNNI too.
TEST(Quant, PackedVnniEmulatedMatchesAvx2Bitwise) {
#if defined(LLM_TEST_VNNI_EMULATED)
  if (Simd() == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  CheckPackedVnniBitwise(cpu::vnni_emulated::PackedQuantMatMul);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// Q4_0 is packed as unsigned quants with its F16 scale alone (the kernel
// makes the minimum -8·d in F32): every scale packs, subnormal, huge and
// non-finite ones included, and the packed block is Q4_0's own 18 bytes per
// row.
TEST(Quant, PackQ4_0ScaleEdgeCases) {
  WeightView w;
  w.type = TensorType::Q4_0;
  w.rows = 1;
  w.cols = 32;
  w.row_bytes = sizeof(BlockQ4_0);
  BlockQ4_0 blk{};
  w.data = &blk;
  std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
  EXPECT_EQ(packed.size(), 8 * sizeof(BlockQ4_0));  // one group of 8 rows (7 of them zero), one block
  for (uint16_t h : {uint16_t{0x0000}, uint16_t{0x0001}, uint16_t{0x0080}, uint16_t{0x03FF}, uint16_t{0x8123},
                     uint16_t{0x2E66}, uint16_t{0x6FFF}, uint16_t{0xEFFF}, uint16_t{0x7000}, uint16_t{0x7BFF},
                     uint16_t{0x7C00}, uint16_t{0xFE00}}) {
    blk.d = h;
    ASSERT_TRUE(cpu::PackR8(w, packed.data())) << std::hex << h;
    const auto* p = reinterpret_cast<const cpu::PackedQ4_0*>(packed.data());
    EXPECT_EQ(p->d[0], h);
    EXPECT_EQ(p->d[1], 0);
  }
}


// MXFP4's packed tiles make the scale 2^(e - 128) from the exponent bits in
// SIMD: every exponent, the subnormal scales (e < 2) and those whose products
// overflow (e near 255) included, gives bitwise the portable kernel's output.
TEST(Quant, PackedMXFP4EveryExponent) {
  std::mt19937 rng(5);
  const int64_t rows = 256, cols = 64, n_tok = 3;  // row r: exponent r in both its blocks
  std::vector<uint8_t> m = RandomRow(TensorType::MXFP4, rows * cols, rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < 2; ++b) m[(2 * r + b) * sizeof(BlockMXFP4)] = static_cast<uint8_t>(r);
  WeightView w;
  w.type = TensorType::MXFP4; w.data = m.data(); w.rows = rows; w.cols = cols;
  w.row_bytes = TensorRowBytes(TensorType::MXFP4, cols);
  ASSERT_TRUE(cpu::CanPackR8(w));
  std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
  ASSERT_TRUE(cpu::PackR8(w, packed.data()));
  WeightView wp = w;
  wp.packed = packed.data();
  const std::vector<float> x = RandomFloats(n_tok * cols, rng);
  std::vector<BlockQ8Act> xq(n_tok * cols / 32);
  cpu::QuantizeRowAsQ8_0(x.data(), n_tok * cols, xq.data());
  cpu::MatMulArgs a;
  a.w = &wp; a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
  a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
  std::vector<float> gen(n_tok * rows), simd(n_tok * rows, -1.0f);
  a.y = gen.data();
  cpu::GenericKernels().matmul(a);
  EXPECT_TRUE(std::isinf(gen[255]) || std::fabs(gen[255]) > 1e30f) << gen[255];  // 2^127 · ...
  EXPECT_LT(std::fabs(gen[0]), 1e-30f);                                            // 2^-128 · ...
  const cpu::Kernels* k = Simd();
  if (k == nullptr) GTEST_SKIP() << "no SIMD kernels here";
  a.y = simd.data();
  k->matmul(a);
  for (size_t i = 0; i < gen.size(); ++i) ASSERT_EQ(std::memcmp(&simd[i], &gen[i], 4), 0) << "row " << i % rows;
}

// The lean packed layouts stream no more bytes than the file: 8 rows of
// every packed type pack to exactly their rows' bytes, but Q3_K, Q4_K, Q5_K
// and IQ4_XS, whose 6-bit scales (and minimums) pack as bytes (32, 32, 32 and
// 16 bytes more per 8 rows of a super-block: +3.6%, +2.8%, +2.3%, +1.5%).
TEST(Quant, PackedBytesMatchTheFile) {
  for (TensorType t : kPackedTypes) {
    WeightView w;
    w.type = t;
    w.rows = 16;
    w.cols = 512;
    w.row_bytes = TensorRowBytes(t, w.cols);
    const size_t file = static_cast<size_t>(w.rows) * w.row_bytes;
    // the K-quants' 6-bit scales and minimums as bytes: 32 bytes more per 8
    // rows of a super-block (Q4_K's 8 × 144 bytes, Q5_K's 8 × 176)
    // IQ4_XS's 6-bit scales too: 16 bytes more per 8 rows (8 × 136); Q3_K's
    // as int8: 32 bytes more per 8 rows (8 × 110); Q2_K's scale|min nibbles
    // stay as in the file
    const size_t expect = t == TensorType::Q4_K     ? file + file / 36
                          : t == TensorType::Q5_K   ? file + file / 44
                          : t == TensorType::IQ4_XS ? file + file / 68
                          : t == TensorType::Q3_K   ? file + file * 32 / 880
                                                    : file;
    EXPECT_EQ(cpu::PackedR8Bytes(w), expect) << static_cast<int>(t);
  }
}

// The packed kernels' integer sums at the range ends: every quant at its
// extreme (Q8_0 -128, Q4 nibbles 15, Q5 quants 31, IQ4 index 0: -127 and
// IQ4_XS's scale -32) against activations of ±127, where the int16 pair sums
// come closest to overflowing (AVX2's Q5: two vectors' pair sums in int16;
// IQ4: one pair 2 · 127 · 127; Q2_K and Q3_K: four vectors' in int16, then
// scaled by madd). Q2_K: quants 3 with scales 15 and minimums 15 or 0;
// Q3_K: quants -4 with scales -32, and 3 with 31 (rows alternate).
TEST(Quant, PackedMatMulAtTheRangeEnds) {
  for (TensorType t : kPackedTypes) {
    for (int sign : {1, -1}) {
      const int64_t rows = 16, cols = 256, n_tok = 5;  // a pair of row groups, tiles of 4 and 1
      std::vector<uint8_t> m(rows * TensorRowBytes(t, cols), 0);
      int64_t be = 0, bb = 0;
      ASSERT_TRUE(TensorTypeLayout(t, &be, &bb));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < cols / be; ++b) {
          uint8_t* blk = m.data() + r * TensorRowBytes(t, cols) + b * bb;
          const uint16_t one = 0x3C00;  // F16 1.0
          std::memcpy(blk, &one, 2);
          if (t == TensorType::Q8_0) {
            std::memset(blk + 2, 0x80, 32);  // -128
          } else if (t == TensorType::MXFP4) {
            blk[0] = 128;                    // E8M0: 2^0
            std::memset(blk + 1, 0xFF, 16);  // code 15: -12, the largest magnitude
          } else if (t == TensorType::IQ4_NL) {
            std::memset(blk + 2, 0x00, 16);  // index 0: kIQ4NLValues[0] = -127, the largest magnitude
          } else if (t == TensorType::IQ4_XS) {
            std::memset(blk + 2, 0x00, 134);  // every scale ls = 0 (ls - 32 = -32), every index 0 (-127)
          } else if (t == TensorType::Q5_0) {
            std::memset(blk + 2, 0xFF, 20);  // fifth bits and nibbles: q = 31, d·(q - 16) = 15
          } else if (t == TensorType::Q6_K) {
            // quants 0 (q - 32 = -32) and every scale -128; d (last) 1
            std::memset(blk, 0, sizeof(BlockQ6_K));
            std::memset(blk + offsetof(BlockQ6_K, scales), 0x80, 16);
            std::memcpy(blk + offsetof(BlockQ6_K, d), &one, 2);
          } else if (t == TensorType::Q2_K) {
            // quants 3, scales 15; minimums 15 (even rows: 45 - 15) or 0 (odd: 45); d, dmin (last) 1
            std::memset(blk, 0xFF, 80);
            if (r % 2 == 1) std::memset(blk, 0x0F, 16);
            std::memcpy(blk + offsetof(BlockQ2_K, d), &one, 2);
            std::memcpy(blk + offsetof(BlockQ2_K, dmin), &one, 2);
          } else if (t == TensorType::Q3_K) {
            // even rows: quants -4 and scales -32 (all bits 0); odd rows: 3 and 31
            // (all bits 1); d (last) 1
            std::memset(blk, r % 2 == 0 ? 0x00 : 0xFF, 108);
            std::memcpy(blk + offsetof(BlockQ3_K, d), &one, 2);
          } else if (t == TensorType::Q4_K || t == TensorType::Q5_K) {
            std::memcpy(blk + 2, &one, 2);  // dmin 1
            // every scale and min 63, nibbles 15 (Q5_K: every fifth bit set)
            std::memset(blk + 4, 0xFF, t == TensorType::Q4_K ? 140 : 172);
          } else if (t == TensorType::Q5_1) {
            std::memcpy(blk + 2, &one, 2);   // m 1
            std::memset(blk + 4, 0xFF, 20);  // fifth bits and nibbles: q = 31
          } else {
            const int off = t == TensorType::Q4_1 ? 4 : 2;
            if (t == TensorType::Q4_1) std::memcpy(blk + 2, &one, 2);
            std::memset(blk + off, 0xFF, 16);  // nibbles 15
          }
        }
      }
      WeightView w;
      w.type = t; w.data = m.data(); w.rows = rows; w.cols = cols; w.row_bytes = TensorRowBytes(t, cols);
      std::vector<uint8_t> packed(cpu::PackedR8Bytes(w));
      ASSERT_TRUE(cpu::PackR8(w, packed.data()));
      WeightView wp = w;
      wp.packed = packed.data();
      std::vector<float> x(n_tok * cols, 127.0f * sign);
      std::vector<BlockQ8Act> xq(n_tok * cols / 32);
      cpu::GenericKernels().quantize_act(x.data(), n_tok * cols, xq.data());
      ASSERT_EQ(xq[0].qs[0], 127 * sign);
      auto row_q = [&](int64_t r) {  // d·q (+ m) of row r
        if (t == TensorType::Q2_K) return r % 2 == 0 ? 15.0 * 3 - 15 : 15.0 * 3;
        if (t == TensorType::Q3_K) return r % 2 == 0 ? -32.0 * -4 : 31.0 * 3;
        return t == TensorType::Q8_0     ? -128.0
               : t == TensorType::IQ4_NL ? -127.0
               : t == TensorType::MXFP4  ? -12.0
               : t == TensorType::IQ4_XS ? -32.0 * -127
               : t == TensorType::Q5_0   ? 15.0
               : t == TensorType::Q4_0   ? 7.0
               : t == TensorType::Q4_K   ? 63.0 * 15 - 63
               : t == TensorType::Q5_K   ? 63.0 * 31 - 63
               : t == TensorType::Q5_1   ? 31.0 + 1
               : t == TensorType::Q6_K   ? -128.0 * -32
                                         : 16.0;
      };
      for (const cpu::Kernels* k : {&cpu::GenericKernels(), Simd()}) {
        if (k == nullptr) continue;
        std::vector<float> y(n_tok * rows, 0.0f);
        cpu::MatMulArgs a;
        a.w = &wp; a.x = x.data(); a.ld_x = cols; a.xq = xq.data(); a.ld_xq = cols / 32; a.n_tok = n_tok;
        a.y = y.data(); a.ld_y = rows; a.row_begin = 0; a.row_end = rows;
        k->matmul(a);
        for (size_t i = 0; i < y.size(); ++i)  // activation scale d_x = 1
          EXPECT_EQ(y[i], row_q(static_cast<int64_t>(i) % rows) * 127.0 * sign * cols)
              << k->name << " type " << static_cast<int>(t) << " row " << i % rows;
      }
    }
  }
}

}  // namespace
}  // namespace llm
