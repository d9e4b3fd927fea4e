// The AMX-BF16 GEMM of embedding steps (src/backend/cpu/embed_matmul_amx.h)
// called directly: against a double-precision product on shapes that are
// not multiples of the tiles (16 tokens, 32 rows, 32 k) and cross its token
// chunks (256) and row groups (256); bitwise the same however tokens and
// rows are grouped; F16 weights split exactly into BF16 hi + lo. Skipped
// where the CPU has no AMX-BF16 or Linux refuses the tiles (or
// LLM_CPU_AMX=0 / LLM_CPU_ISA is set).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/amx.h"
#include "backend/cpu/embed_matmul_amx.h"
#include "util/fp16.h"

namespace llm {
namespace {

float Bf16ToF32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Problem {
  int64_t rows, k, n_tok;
  bool bf16;
  std::vector<uint16_t> w;
  std::vector<float> x;
  double W(int64_t r, int64_t k_) const { return bf16 ? Bf16ToF32(w[r * k + k_]) : F16ToF32(w[r * k + k_]); }
};

Problem Make(int64_t rows, int64_t k, int64_t n_tok, bool bf16, unsigned seed) {
  Problem p{rows, k, n_tok, bf16, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-12, 3);  // spread the magnitudes
  p.w.resize(rows * k);
  for (uint16_t& v : p.w) {
    const float f = std::ldexp(u(rng), e(rng));
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = bf16 ? static_cast<uint16_t>(bits >> 16) : F32ToF16(f);
  }
  p.x.resize(n_tok * k);
  for (float& v : p.x) v = std::ldexp(u(rng), e(rng));
  return p;
}

void Gemm(const Problem& p, int64_t t0, int64_t n, int64_t r0, int64_t r1, float* y, bool acc) {
  cpu::AmxGemmArgs a;
  a.w = p.w.data();
  a.w_row_bytes = static_cast<size_t>(p.k) * 2;
  a.w_bf16 = p.bf16;
  a.k = p.k;
  a.x = p.x.data() + t0 * p.k;
  a.ld_x = p.k;
  a.n_tok = n;
  a.y = y + t0 * p.rows;
  a.ld_y = p.rows;
  a.row_begin = r0;
  a.row_end = r1;
  a.accumulate = acc;
  std::vector<uint8_t> scratch(cpu::AmxGemmScratchBytes(a) + 64);
  const auto addr = reinterpret_cast<uintptr_t>(scratch.data());
  cpu::AmxGemm(a, scratch.data() + (64 - addr % 64) % 64);
}

bool SkipWithoutAmx() {
  if (!cpu::AmxGemmCompiled()) return true;
  return !cpu::AmxBf16Usable();
}

#define SKIP_WITHOUT_AMX()                                                                                   \
  if (SkipWithoutAmx())                                                                                      \
  GTEST_SKIP() << "AMX-BF16 not usable here (no AMX-TILE/AMX-BF16/AVX512_BF16, tiles refused by Linux, "  \
                  "LLM_CPU_AMX=0 or LLM_CPU_ISA set, or built without the AMX flags)"

TEST(AmxGemm, MatchesDoubleProductOnOddShapes) {
  SKIP_WITHOUT_AMX();
  // 291 tokens: a chunk of 256 + 35 (two 16-token tiles + 3); 270 rows: a
  // group of 256 + 14; K = 133: four blocks of 32 + 5. Then small ones.
  const int64_t shapes[][3] = {{270, 133, 291}, {17, 31, 1}, {45, 1, 7}, {33, 65, 16}};
  for (bool bf16 : {false, true}) {
    for (const auto& s : shapes) {
      const Problem p = Make(s[0], s[1], s[2], bf16, 11);
      std::vector<float> y(p.n_tok * p.rows, -7.0f);
      Gemm(p, 0, p.n_tok, 0, p.rows, y.data(), false);
      // Per product, |x_lo·w_lo| <= 2^-18 |x·w| and x's dropped part <=
      // 2^-17 |x|; with F32 sums over these K, within 2^-16 of Σ|x·w| (the
      // magnitudes above are spread over 2^15, so one product can carry a
      // sum). The mean is far smaller; F16 activations (llama.cpp) give 2^-12.
      const double bound = std::ldexp(1.0, -16);
      double worst = 0.0, sum = 0.0;
      for (int64_t t = 0; t < p.n_tok; ++t)
        for (int64_t r = 0; r < p.rows; ++r) {
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < p.k; ++k) {
            const double v = static_cast<double>(p.x[t * p.k + k]) * p.W(r, k);
            ref += v;
            mag += std::fabs(v);
          }
          const double err = std::fabs(y[t * p.rows + r] - ref) / (mag > 0 ? mag : 1.0);
          worst = std::max(worst, err);
          sum += err;
          ASSERT_LE(err, bound) << "bf16 " << bf16 << " shape " << s[0] << "x" << s[1] << "x" << s[2] << " t " << t
                                << " r " << r << " y " << y[t * p.rows + r] << " ref " << ref;
        }
      EXPECT_LT(sum / static_cast<double>(p.n_tok * p.rows), 2e-6) << "bf16 " << bf16 << " worst " << worst;
    }
  }
}

// x = unit vectors: y[t][r] = W[r][t], exactly, for every finite F16
// magnitude (hi + lo reproduce an F16 weight bit for bit).
TEST(AmxGemm, SplitsF16WeightsExactly) {
  SKIP_WITHOUT_AMX();
  const int64_t rows = 67, k = 99;
  Problem p = Make(rows, k, k, false, 3);
  std::mt19937 rng(9);
  for (uint16_t& v : p.w) {
    do v = static_cast<uint16_t>(rng()); while ((v & 0x7C00) == 0x7C00);  // no inf / NaN
  }
  std::fill(p.x.begin(), p.x.end(), 0.0f);
  for (int64_t t = 0; t < k; ++t) p.x[t * k + t] = 1.0f;
  std::vector<float> y(k * rows);
  Gemm(p, 0, k, 0, rows, y.data(), false);
  for (int64_t t = 0; t < k; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float w = F16ToF32(p.w[r * k + t]);
      // AMX flushes F32 results below 2^-126 to zero: F16's are all above.
      ASSERT_EQ(y[t * rows + r], w) << "t " << t << " r " << r << " w bits " << p.w[r * k + t];
    }
}

TEST(AmxGemm, IsBitwiseInvariantToGrouping) {
  SKIP_WITHOUT_AMX();
  for (bool bf16 : {false, true}) {
    const Problem p = Make(270, 133, 300, bf16, 21);
    std::vector<float> all(p.n_tok * p.rows, -7.0f);
    Gemm(p, 0, p.n_tok, 0, p.rows, all.data(), false);
    // Tokens one at a time and in uneven groups (1 .. 40), rows split at
    // uneven points (one group crossing the 256-row boundary).
    std::vector<float> parts(all.size(), 3.0f);
    for (int64_t t = 0; t < p.n_tok;) {
      const int64_t n = std::min<int64_t>(p.n_tok - t, 1 + (t * 7) % 40);
      Gemm(p, t, n, 0, 5, parts.data(), false);
      Gemm(p, t, n, 5, 200, parts.data(), false);
      Gemm(p, t, n, 200, 270, parts.data(), false);
      t += n;
    }
    EXPECT_EQ(0, std::memcmp(all.data(), parts.data(), all.size() * sizeof(float))) << "bf16 " << bf16;
    // accumulate: y + (the same sum), rows outside the range untouched.
    std::vector<float> acc(all.size(), 0.5f), acc_parts(all.size(), 0.5f);
    Gemm(p, 0, p.n_tok, 3, 250, acc.data(), true);
    for (int64_t t = 0; t < p.n_tok; t += 13)
      for (int64_t r = 0; r < p.rows; ++r)
        ASSERT_EQ(acc[t * p.rows + r], r < 3 || r >= 250 ? 0.5f : 0.5f + all[t * p.rows + r]) << t << " " << r;
    for (int64_t t = 0; t < p.n_tok;) {
      const int64_t n = std::min<int64_t>(p.n_tok - t, 1 + (t * 5) % 33);
      Gemm(p, t, n, 3, 36, acc_parts.data(), true);
      Gemm(p, t, n, 36, 250, acc_parts.data(), true);
      t += n;
    }
    EXPECT_EQ(0, std::memcmp(acc.data(), acc_parts.data(), acc.size() * sizeof(float))) << "bf16 " << bf16;
  }
}

}  // namespace
}  // namespace llm
