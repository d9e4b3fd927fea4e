// The lattice types' matmul (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S): the AVX2 kernel (quant_lattice_avx2.cpp: a per-token decode path
// for few tokens, a scratch path decoded once per token block for many)
// against the portable reference (quant_generic.cpp), bitwise, and against
// the dequantized weights in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/act_rounding.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/quant_pack.h"
#include "model/quant_tables.h"
#include "model/tensor_type.h"

namespace llm {
namespace {

using cpu::BlockQ8Act;

const TensorType kLatticeTypes[] = {TensorType::IQ3_XXS, TensorType::IQ2_XS, TensorType::IQ2_XXS,
                                    TensorType::IQ2_S,   TensorType::IQ3_S,  TensorType::IQ1_S,
                                    TensorType::IQ1_M};

bool HaveAvx2() { return std::string(cpu::BestKernels().name) != "generic"; }

// F16 bits of a random value in [0.002, 0.05) with a random sign.
uint16_t RandomHalf(std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(0.002f, 0.05f);
  int e = 0;
  const float m = std::frexp(mag(rng), &e);
  return static_cast<uint16_t>((rng() & 1) << 15 | (e - 1 + 15) << 10 | (static_cast<int>((m * 2 - 1) * 1024) & 0x3ff));
}

// `rows` rows of `cols` weights: random bytes, sane random d.
std::vector<uint8_t> RandomMatrix(TensorType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  int64_t be = 0, bb = 0;
  EXPECT_TRUE(TensorTypeLayout(t, &be, &bb));
  std::vector<uint8_t> m(static_cast<size_t>(rows * cols / be * bb));
  for (uint8_t& b : m) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < m.size(); off += bb) {
    const uint16_t h = RandomHalf(rng);
    if (t == TensorType::IQ1_M) {  // d in the top nibbles of its four u16 scales (bytes 49, 51, 53, 55)
      for (int i = 0; i < 4; ++i) {
        uint8_t& hi = m[off + 49 + 2 * i];
        hi = static_cast<uint8_t>((hi & 0x0F) | ((h >> (4 * i)) & 0xF) << 4);
      }
    } else {
      std::memcpy(&m[off], &h, 2);
    }
  }
  return m;
}

// Activations of n_tok tokens rounded as llama.cpp's Q8_K (one d per 256,
// as the backend does for these types) or, q8k false, per 32-block.
std::vector<BlockQ8Act> Activations(const std::vector<float>& x, int64_t n_tok, int64_t cols, bool q8k) {
  std::vector<BlockQ8Act> xq(static_cast<size_t>(n_tok * cols / 32));
  for (int64_t t = 0; t < n_tok; ++t) {
    if (q8k) {
      cpu::QuantizeRowAsQ8_K(x.data() + t * cols, cols, xq.data() + t * cols / 32);
    } else {
      cpu::GenericKernels().quantize_act(x.data() + t * cols, cols, xq.data() + t * cols / 32);
    }
  }
  return xq;
}

struct Case {
  WeightView w;
  cpu::MatMulArgs a;
};

Case MakeCase(TensorType t, const std::vector<uint8_t>& m, int64_t rows, int64_t cols,
              const std::vector<BlockQ8Act>& xq, int64_t n_tok) {
  Case c;
  c.w.type = t;
  c.w.data = m.data();
  c.w.rows = rows;
  c.w.cols = cols;
  c.w.row_bytes = TensorRowBytes(t, cols);
  c.a.xq = xq.data();
  c.a.ld_xq = cols / 32;
  c.a.n_tok = n_tok;
  c.a.ld_y = rows;
  c.a.row_begin = 0;
  c.a.row_end = rows;
  return c;
}

std::vector<float> RunMatMul(const cpu::Kernels& k, Case& c) {
  std::vector<float> y(static_cast<size_t>(c.a.n_tok * c.w.rows), -1.0f);
  c.a.w = &c.w;
  c.a.y = y.data();
  k.matmul(c.a);
  return y;
}

// Row r's product with token t's activations from the dequantized weights, in
// double, and Σ |w x| (the size of the float rounding's terms).
void Reference(const Case& c, int64_t r, int64_t t, double* ref, double* scale) {
  const int64_t cols = c.w.cols;
  std::vector<float> w(static_cast<size_t>(cols));
  cpu::DequantizeBlocks(c.w.type, static_cast<const uint8_t*>(c.w.data) + r * c.w.row_bytes, cols, w.data());
  *ref = *scale = 0;
  for (int64_t i = 0; i < cols; ++i) {
    const BlockQ8Act& b = c.a.xq[t * c.a.ld_xq + i / 32];
    const double p = static_cast<double>(w[i]) * b.d * b.qs[i % 32];
    *ref += p;
    *scale += std::fabs(p);
  }
}

// The AVX2 matmul, its decode path (one token at a time), a row split that
// cuts groups of 8, and the single-row dot all give the portable kernel's
// bits, for token counts on both sides of the scratch path's threshold
// (2), every tile remainder, and row counts not a multiple of 8 (13: one
// 16-row tile whose second group has 5 rows; 37: two whole 16-row tiles and
// a last group of 5 rows, 4-token tiles), over 1 and 3 super-blocks (a
// whole chunk of 2 and a partial one).
TEST(QuantLattice, MatchesPortableBitwise) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the portable kernel runs here";
  std::mt19937 rng(41);
  for (TensorType t : kLatticeTypes) {
    for (int64_t cols : {int64_t{256}, int64_t{768}}) {
      for (int64_t rows : {int64_t{1}, int64_t{13}, int64_t{37}}) {
        for (int64_t n_tok : {1, 2, 3, 5, 33, 100}) {
          for (bool q8k : {true, false}) {
            SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " cols " + std::to_string(cols) +
                         " rows " + std::to_string(rows) + " n_tok " + std::to_string(n_tok) + " q8k " +
                         std::to_string(q8k));
            const std::vector<uint8_t> m = RandomMatrix(t, rows, cols, rng);
            std::vector<float> x(static_cast<size_t>(n_tok * cols));
            std::normal_distribution<float> nd(0.0f, 1.0f);
            for (float& v : x) v = nd(rng);
            const std::vector<BlockQ8Act> xq = Activations(x, n_tok, cols, q8k);
            Case c = MakeCase(t, m, rows, cols, xq, n_tok);
            const std::vector<float> gen = RunMatMul(cpu::GenericKernels(), c);
            const std::vector<float> simd = RunMatMul(cpu::BestKernels(), c);
            ASSERT_EQ(std::memcmp(gen.data(), simd.data(), gen.size() * 4), 0) << "whole matmul";

            // each token alone (the decode path)
            for (int64_t tk = 0; tk < n_tok; tk += n_tok > 8 ? 7 : 1) {
              Case one = MakeCase(t, m, rows, cols, xq, 1);
              one.a.xq = xq.data() + tk * (cols / 32);
              const std::vector<float> y = RunMatMul(cpu::BestKernels(), one);
              ASSERT_EQ(std::memcmp(y.data(), gen.data() + tk * rows, rows * 4), 0) << "token " << tk << " alone";
            }
            // a row split that cuts the groups of 8, accumulating onto 1
            std::vector<float> split(gen.size(), 1.0f);
            c.a.y = split.data();
            c.a.accumulate = true;
            for (int64_t r0 = 0; r0 < rows; r0 += 5) {
              c.a.row_begin = r0;
              c.a.row_end = std::min(rows, r0 + 5);
              cpu::BestKernels().matmul(c.a);
            }
            for (size_t i = 0; i < gen.size(); ++i) ASSERT_EQ(split[i], 1.0f + gen[i]) << "split, output " << i;

            // the single-row dot, and the value against the dequantized weights
            for (int64_t r = 0; r < rows; r += 6) {
              const int64_t tk = n_tok - 1;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
              const float d = cpu::avx2::QuantDot(t)(static_cast<const uint8_t*>(c.w.data) + r * c.w.row_bytes,
                                                     xq.data() + tk * (cols / 32), cols / 32);
              ASSERT_EQ(std::memcmp(&d, &gen[tk * rows + r], 4), 0) << "QuantDot row " << r;
#endif
              double ref = 0, scale = 0;
              Reference(c, r, tk, &ref, &scale);
              EXPECT_NEAR(gen[tk * rows + r], ref, 2e-6 * scale + 1e-12) << "vs dequantized, row " << r;
            }
          }
        }
      }
    }
  }
}

// The decode path (one token) over long rows: 8 super-blocks per row, so
// each row's fields, taken apart one super-block ahead of their use
// (quant_lattice_decode_x86.h), alternate between their two buffers many
// times; 16 and 24 rows: whole groups of 8, each prefetching the next.
TEST(QuantLattice, DecodeLongRowsBitwise) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the portable kernel runs here";
  std::mt19937 rng(11);
  for (TensorType t : kLatticeTypes) {
    for (int64_t rows : {int64_t{16}, int64_t{24}}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " rows " + std::to_string(rows));
      const int64_t cols = 2048;
      const std::vector<uint8_t> m = RandomMatrix(t, rows, cols, rng);
      for (bool q8k : {true, false}) {
        std::vector<float> x(static_cast<size_t>(cols));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float& v : x) v = nd(rng);
        const std::vector<BlockQ8Act> xq = Activations(x, 1, cols, q8k);
        Case c = MakeCase(t, m, rows, cols, xq, 1);
        const std::vector<float> gen = RunMatMul(cpu::GenericKernels(), c);
        const std::vector<float> simd = RunMatMul(cpu::BestKernels(), c);
        ASSERT_EQ(std::memcmp(gen.data(), simd.data(), gen.size() * 4), 0) << "q8k " << q8k;
        for (int64_t r = 0; r < rows; r += 7) {
          double ref = 0, scale = 0;
          Reference(c, r, 0, &ref, &scale);
          EXPECT_NEAR(simd[r], ref, 2e-6 * scale + 1e-12) << "vs dequantized, row " << r;
        }
      }
    }
  }
}

// Every weight at its largest lattice point with all signs positive (or, neg,
// all negative) and the largest scale, every activation at 127 or -127: the
// sums reach their bounds (the prefill tile's maddubs of x + 128 with the
// weights, 2 · 255 · 43 for IQ2_XS, and its groups' int16 sums after the
// correction, 2 · 4 · 31 · 127 for IQ3_XXS (its weights halved),
// 2 · 3 · 43 · 127 = 32766 for IQ2_XS, 2 · 8 · 15 · 127 for IQ3_S),
// the multipliers 31. Both paths give the portable bits and the exact value;
// so do they with every activation at -128 and positive weights.
TEST(QuantLattice, LargestPointsAndScales) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the portable kernel runs here";
  for (TensorType t : {TensorType::IQ3_XXS, TensorType::IQ2_XS, TensorType::IQ2_XXS, TensorType::IQ3_S}) {
    for (bool neg : {false, true}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(t)) + (neg ? " negative" : " positive"));
      const int64_t rows = 9, cols = 512;
      int64_t be = 0, bb = 0;
      TensorTypeLayout(t, &be, &bb);
      // the index of the point with the largest magnitudes
      int best = 0, best_sum = -1;
      const int n_points = t == TensorType::IQ2_XS || t == TensorType::IQ3_S ? 512 : 256;
      for (int i = 0; i < n_points; ++i) {
        const uint64_t p = t == TensorType::IQ3_XXS ? kIQ3XXSGrid[i]
                           : t == TensorType::IQ3_S ? kIQ3SGrid[i]
                           : t == TensorType::IQ2_XS ? kIQ2XSGrid[i]
                                                     : kIQ2XXSGrid[i];
        int s = 0;
        for (int k = 0; k < 8; ++k) s += static_cast<int>(p >> (8 * k) & 0xFF);
        if (s > best_sum) best_sum = s, best = i;
      }
      ASSERT_EQ(kIQ2Signs[0], 0);     // sign index 0: all positive
      ASSERT_EQ(kIQ2Signs[127], 0xFF);  // 127: all negative
      const uint32_t sg = neg ? 0x0FFFFFFF : 0;  // four 7-bit sign indices
      std::vector<uint8_t> m(static_cast<size_t>(rows * cols / 256 * bb));
      for (size_t off = 0; off < m.size(); off += bb) {
        uint8_t* b = &m[off];
        const uint16_t d = 0x2400;  // 2^-6
        std::memcpy(b, &d, 2);
        for (int j = 0; j < 8; ++j) {
          if (t == TensorType::IQ3_XXS) {
            std::memset(b + 2 + 8 * j, best, 8);
            const uint32_t aux = 15u << 28 | sg;
            std::memcpy(b + 66 + 4 * j, &aux, 4);
          } else if (t == TensorType::IQ2_XXS) {
            std::memset(b + 2 + 8 * j, best, 4);
            const uint32_t aux = 15u << 28 | sg;
            std::memcpy(b + 6 + 8 * j, &aux, 4);
          } else if (t == TensorType::IQ3_S) {
            auto& s = *reinterpret_cast<BlockIQ3_S*>(b);
            std::memset(s.qs, best & 0xFF, sizeof(s.qs));
            std::memset(s.qh, best >> 8 ? 0xFF : 0, sizeof(s.qh));
            std::memset(s.signs, neg ? 0xFF : 0, sizeof(s.signs));
            std::memset(s.scales, 0xFF, sizeof(s.scales));
          } else {
            const uint16_t v = static_cast<uint16_t>(best | (neg ? 127 << 9 : 0));
            for (int l = 0; l < 4; ++l) std::memcpy(b + 2 + 8 * j + 2 * l, &v, 2);
            b[offsetof(BlockIQ2_XS, scales) + j] = 0xFF;
          }
        }
      }
      for (float xv : {1.0f, -1.0f}) {
        for (int64_t n_tok : {1, 6}) {
          const std::vector<float> x(static_cast<size_t>(n_tok * cols), xv);
          const std::vector<BlockQ8Act> xq = Activations(x, n_tok, cols, false);
          ASSERT_EQ(xq[0].qs[0], xv > 0 ? 127 : -127);
          Case c = MakeCase(t, m, rows, cols, xq, n_tok);
          const std::vector<float> gen = RunMatMul(cpu::GenericKernels(), c);
          const std::vector<float> simd = RunMatMul(cpu::BestKernels(), c);
          EXPECT_EQ(std::memcmp(gen.data(), simd.data(), gen.size() * 4), 0) << n_tok << " tokens, x " << xv;
          double ref = 0, scale = 0;
          Reference(c, rows - 1, n_tok - 1, &ref, &scale);
          EXPECT_EQ(ref > 0.0, (xv > 0) != neg);
          EXPECT_NEAR(simd.back(), ref, 2e-6 * scale) << n_tok << " tokens, x " << xv;
          if (!neg && xv < 0) {
            // every activation at -128 (no rounding of act_rounding.cpp gives
            // it): the IQ2 types' prefill groups of 3 vectors (6 · 43 · 128
            // > 32767) would wrap, so such a token block takes the decode path
            std::vector<BlockQ8Act> x128 = xq;
            for (BlockQ8Act& b : x128) std::memset(b.qs, 0x80, sizeof(b.qs));
            Case c128 = MakeCase(t, m, rows, cols, x128, n_tok);
            const std::vector<float> gen128 = RunMatMul(cpu::GenericKernels(), c128);
            const std::vector<float> simd128 = RunMatMul(cpu::BestKernels(), c128);
            EXPECT_EQ(std::memcmp(gen128.data(), simd128.data(), gen128.size() * 4), 0) << n_tok << " tokens, x -128";
          }
        }
      }
    }
  }
}

// The prefill path across token blocks (256 tokens each): whole blocks, a
// block and a remainder of every tile size (16 rows: 2, 1 tokens; the last
// 8 rows: 4, 2, 1), as the portable kernel's bits.
TEST(QuantLattice, PrefillAcrossTokenBlocks) {
  if (!HaveAvx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the portable kernel runs here";
  std::mt19937 rng(7);
  for (TensorType t : kLatticeTypes) {
    const int64_t rows = 11, cols = 256;
    const std::vector<uint8_t> m = RandomMatrix(t, rows, cols, rng);
    for (int64_t n_tok : {256, 263, 520}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " n_tok " + std::to_string(n_tok));
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (float& v : x) v = nd(rng);
      const std::vector<BlockQ8Act> xq = Activations(x, n_tok, cols, true);
      Case c = MakeCase(t, m, rows, cols, xq, n_tok);
      const std::vector<float> gen = RunMatMul(cpu::GenericKernels(), c);
      const std::vector<float> simd = RunMatMul(cpu::BestKernels(), c);
      ASSERT_EQ(std::memcmp(gen.data(), simd.data(), gen.size() * 4), 0);
    }
  }
}

// No widened copy: the backend packs none of these types, so a decode step
// streams the file's own bytes (the kernels read WeightView::data in place).
TEST(QuantLattice, StreamsTheFileBytes) {
  for (TensorType t : kLatticeTypes) {
    WeightView w;
    w.type = t;
    w.rows = 16;
    w.cols = 2048;
    w.row_bytes = TensorRowBytes(t, w.cols);
    EXPECT_FALSE(cpu::CanPackR8(w)) << static_cast<int>(t);
  }
}

}  // namespace
}  // namespace llm
