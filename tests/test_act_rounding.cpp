// The dense weights' activation rounding (backend/cpu/act_rounding.h): an
// F16 (BF16) weight's matmul reads its input rounded to F16 (BF16), as
// llama.cpp's CPU matmul does, from a copy; LLM_CPU_ACT=own keeps F32
// inputs (tests/test_cpu_backend.cpp, EveryWeightTypeMatchesF32, checks the
// whole backend both ways). The Q8 roundings are tested in test_quant.cpp;
// the query's Q8_0 rounding against Q4_0 / Q8_0 keys here (the rule) and in
// test_kv_q4.cpp (that attention reads it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/act_rounding.h"
#include "backend/cpu/kernels.h"
#include "backend/kv_rotation.h"
#include "util/fp16.h"

namespace llm {
namespace {

using cpu::DenseActRounding;

constexpr int64_t kRows = 8, kCols = 256, kTok = 3;

// A (kRows, kCols) weight of `type` (F16 or BF16) whose values are exact in
// both, and its values.
struct DenseWeight {
  std::vector<uint16_t> bits;
  std::vector<float> values;
  WeightView view;
};

DenseWeight MakeWeight(TensorType type) {
  DenseWeight w;
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    const float v = static_cast<float>((i * 37) % 17 + 1) / 8.0f;  // multiples of 1/8 in [1/8, 17/8]: no sum is 0
    w.values.push_back(v);
    w.bits.push_back(type == TensorType::F16 ? F32ToF16(v) : F32ToBf16(v));
  }
  w.view.type = type;
  w.view.data = w.bits.data();
  w.view.rows = kRows;
  w.view.cols = kCols;
  w.view.row_bytes = kCols * 2;
  return w;
}

// Inputs that F16 and BF16 both round down by a fixed fraction: powers of two
// times (1 + 2^-12), a quarter of F16's unit in the last place (and far below
// BF16's), so the rounded dot products differ from the exact ones by 2^-12
// relative, a thousand times F32's summation error.
std::vector<float> MakeInput() {
  std::vector<float> x;
  for (int64_t i = 0; i < kTok * kCols; ++i) x.push_back(std::ldexp(1.0f + 0x1p-12f, static_cast<int>(i % 7) - 3));
  return x;
}

std::vector<double> Reference(const DenseWeight& w, const std::vector<float>& x) {
  std::vector<double> y(kTok * kRows);
  for (int64_t t = 0; t < kTok; ++t)
    for (int64_t r = 0; r < kRows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < kCols; ++c) s += static_cast<double>(x[t * kCols + c]) * w.values[r * kCols + c];
      y[t * kRows + r] = s;
    }
  return y;
}

std::vector<float> MatMul(const DenseWeight& w, const float* x) {
  std::vector<float> y(kTok * kRows);
  cpu::MatMulArgs a;
  a.w = &w.view;
  a.x = x;
  a.ld_x = kCols;
  a.n_tok = kTok;
  a.y = y.data();
  a.ld_y = kRows;
  a.row_begin = 0;
  a.row_end = kRows;
  cpu::BestKernels().matmul(a);
  return y;
}

double WorstError(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]) / std::fabs(ref[i]));
  return worst;
}

// For each type: the input RoundDenseInput gives the matmul is a rounded
// copy, whose product equals the double product of the rounded inputs (to
// F32 summation error), not that of the inputs as given; the caller's buffer
// keeps its values. With own (LLM_CPU_ACT=own) the matmul reads x itself.
void CheckRoundedMatMul(TensorType type, DenseActRounding expect, float (*round)(float)) {
  const DenseWeight w = MakeWeight(type);
  const WeightView* ws[1] = {&w.view};
  ASSERT_EQ(cpu::PeerDenseActRounding(ws, 1), expect);
  const std::vector<float> x = MakeInput();
  const std::vector<float> x_before = x;
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> scratch;
  const float* xr = cpu::RoundDenseInput(ws, 1, x.data(), n, /*own=*/false, &scratch);
  ASSERT_NE(xr, x.data()) << "not a copy";
  EXPECT_EQ(std::memcmp(x.data(), x_before.data(), x.size() * sizeof(float)), 0) << "the input was written";
  std::vector<float> x_rounded;
  for (float v : x) x_rounded.push_back(round(v));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(FloatBits(xr[i]), FloatBits(x_rounded[i])) << i;

  const std::vector<float> got = MatMul(w, xr);
  EXPECT_LT(WorstError(got, Reference(w, x_rounded)), 1e-6);
  EXPECT_GT(WorstError(got, Reference(w, x)), 1e-4);  // 2^-12 = 2.4e-4: the rounding is there

  // LLM_CPU_ACT=own: x as given, the exact product
  std::vector<float> unused;
  const float* xo = cpu::RoundDenseInput(ws, 1, x.data(), n, /*own=*/true, &unused);
  EXPECT_EQ(xo, x.data());
  EXPECT_TRUE(unused.empty());
  EXPECT_LT(WorstError(MatMul(w, xo), Reference(w, x)), 1e-6);
}

TEST(ActRounding, F16WeightsReadF16RoundedInputs) {
  CheckRoundedMatMul(TensorType::F16, DenseActRounding::kF16, [](float v) { return F16ToF32Portable(F32ToF16Portable(v)); });
}

TEST(ActRounding, Bf16WeightsReadBf16RoundedInputs) {
  CheckRoundedMatMul(TensorType::BF16, DenseActRounding::kBF16, [](float v) { return Bf16ToF32(F32ToBf16(v)); });
}

// Nearest even at the halfway points, subnormals, F16's overflow, as ggml's
// conversions.
TEST(ActRounding, RoundsToNearestEven) {
  const float in[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-20f, 65520.0f, -65519.0f, 1.0f + 0x1p-8f,
                      1.0f + 3 * 0x1p-8f};
  float f16[7], bf16[7];
  cpu::RoundDenseAct(DenseActRounding::kF16, in, 7, f16);
  cpu::RoundDenseAct(DenseActRounding::kBF16, in, 7, bf16);
  EXPECT_EQ(f16[0], 1.0f);                   // tie: to the even 1
  EXPECT_EQ(f16[1], 1.0f + 4 * 0x1p-11f);    // tie: up to the even
  EXPECT_EQ(f16[2], 0x1p-20f);               // a subnormal F16, exact
  EXPECT_TRUE(std::isinf(f16[3]));           // past 65504 + half an ulp
  EXPECT_EQ(f16[4], -65504.0f);
  EXPECT_EQ(bf16[5], 1.0f);
  EXPECT_EQ(bf16[6], 1.0f + 4 * 0x1p-8f);
}

// Every float's rounding (random bit patterns: normals, subnormals, ties,
// overflow, NaN), on the vector path (runs of 8) and its tail, equals the
// integer conversion's.
TEST(ActRounding, EveryPathRoundsAlike) {
  std::vector<float> x;
  uint32_t s = 12345;
  for (int i = 0; i < 4099; ++i) {
    s = s * 1664525u + 1013904223u;
    uint32_t bits = s;
    if (i % 3 == 0) bits = (bits & 0x8000ffffu) | 0x3f800000u | (i % 2 ? 0x1000u : 0);  // near 1, F16 ties
    if (i % 5 == 0) bits = (bits & 0x807fffffu) | (static_cast<uint32_t>(100 + i % 30) << 23);  // F16 subnormals
    x.push_back(BitsFloat(bits));
  }
  std::vector<float> f16(x.size()), bf16(x.size());
  cpu::RoundDenseAct(DenseActRounding::kF16, x.data(), static_cast<int64_t>(x.size()), f16.data());
  cpu::RoundDenseAct(DenseActRounding::kBF16, x.data(), static_cast<int64_t>(x.size()), bf16.data());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(f16[i]) && std::isnan(bf16[i])) << i;
      continue;
    }
    ASSERT_EQ(FloatBits(f16[i]), FloatBits(F16ToF32Portable(F32ToF16Portable(x[i])))) << i << " " << x[i];
    ASSERT_EQ(FloatBits(bf16[i]), FloatBits(Bf16ToF32(F32ToBf16(x[i])))) << i << " " << x[i];
  }
}

// One call's weights share one rounding or get none.
TEST(ActRounding, OnlyWhenEveryWeightAgrees) {
  WeightView f16, bf16, f32, q8;
  f16.type = TensorType::F16;
  bf16.type = TensorType::BF16;
  f32.type = TensorType::F32;
  q8.type = TensorType::Q8_0;
  auto r = [](std::initializer_list<const WeightView*> ws) {
    return cpu::PeerDenseActRounding(ws.begin(), static_cast<int>(ws.size()));
  };
  EXPECT_EQ(r({&f16, &f16, &f16}), DenseActRounding::kF16);
  EXPECT_EQ(r({&bf16, &bf16}), DenseActRounding::kBF16);
  EXPECT_EQ(r({&f16, &bf16}), DenseActRounding::kNone);
  EXPECT_EQ(r({&f16, &f16, &q8}), DenseActRounding::kNone);
  EXPECT_EQ(r({&f32}), DenseActRounding::kNone);
  EXPECT_EQ(r({&q8}), DenseActRounding::kNone);
  EXPECT_EQ(r({}), DenseActRounding::kNone);
}


// ---------------------------------------------------------------- the query

// F16's nearest value (ties to even) by integer arithmetic on the value's
// significand (11 bits; subnormals below 2^-14 in steps of 2^-24), for
// magnitudes up to 65504: independent of util/fp16.h's conversion.
double NearestF16(double v) {
  if (v == 0) return 0;
  int e = 0;
  std::frexp(std::fabs(v), &e);           // |v| = m · 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 11, -24));
  const double k = std::fabs(v) / ulp;
  double r = std::floor(k);
  const double frac = k - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  return std::copysign(r * ulp, v);
}

// The nearest integer, halves to the even one (llama.cpp's AVX2
// _mm256_round_ps with _MM_ROUND_NEAREST; roundf would take halves away
// from zero).
double NearestEven(double v) {
  double r = std::floor(v);
  const double frac = v - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  return r;
}

// One 32-value block by the Q8_0 rule, in double where that is exact:
// amax = max|x|, d = F16(amax / 127), q = nearest-even(x · F32(127 / amax)),
// value d · q. (x · id is an F32 product in llama.cpp: it is formed in float.)
std::vector<double> Q8_0Block(const float* x) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  std::vector<double> out(32, 0.0);
  if (amax == 0) return out;
  const double d = NearestF16(static_cast<double>(amax / 127.0f));
  const float id = 127.0f / amax;
  for (int i = 0; i < 32; ++i) out[i] = d * NearestEven(static_cast<double>(x[i] * id));
  return out;
}

TEST(ActRounding, QueryAsQ8_0FollowsTheBlockRule) {
  std::vector<float> x(32 * 6);
  // block 0: amax 127, so x · id = x: the halves are ties, to the even
  // neighbour (2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.5 -> 0, -1.5 -> -2)
  const float ties[] = {127.0f, 2.5f, 3.5f, -2.5f, 0.5f, -1.5f, 126.5f, -0.5f};
  for (int i = 0; i < 32; ++i) x[i] = i < 8 ? ties[i] : static_cast<float>(i) - 16.25f;
  // block 1: all zero (d = 0, no NaN)
  // block 2: amax 100: d = 100 / 127 is not an F16, its rounding shows in
  // every value (100 itself comes back as 127 · F16(100 / 127))
  for (int i = 0; i < 32; ++i) x[64 + i] = i == 5 ? -100.0f : static_cast<float>(i) * 3.1f - 40.0f;
  // blocks 3-5: random magnitudes 2^-10 .. 2^4 (block 3's d an F16
  // subnormal)
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int b = 3; b < 6; ++b)
    for (int i = 0; i < 32; ++i) x[32 * b + i] = std::ldexp(nd(rng), 7 * b - 31);
  std::vector<float> r = x;
  cpu::RoundAsQ8_0InPlace(r.data(), static_cast<int64_t>(r.size()));
  for (int b = 0; b < 6; ++b) {
    const std::vector<double> want = Q8_0Block(x.data() + 32 * b);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(static_cast<double>(r[32 * b + i]), want[i]) << b << " " << i;
  }
  const float tie_want[] = {127.0f, 2.0f, 4.0f, -2.0f, 0.0f, -2.0f, 126.0f, 0.0f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r[i], tie_want[i]) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(FloatBits(r[i]), 0u) << i;
  const double d100 = NearestF16(100.0 / 127.0);
  EXPECT_NE(d100, 100.0 / 127.0);
  EXPECT_EQ(static_cast<double>(r[64 + 5]), -127.0 * d100);
  EXPECT_NE(r[64 + 5], -100.0f);
}

// In llama.cpp's basis: for keys llmrt keeps unrotated (its Q8_0 cache)
// where llama.cpp's are rotated, q · k equals llama.cpp's score
// Q8_0(H q) · (H k) to F32 rounding; basis 0 is RoundAsQ8_0InPlace.
TEST(ActRounding, QueryRoundedInTheKeysBasis) {
  constexpr int64_t kHd = 128, kHeads = 2, kN = kHd * kHeads;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(kN), k(kN);
  for (int64_t i = 0; i < kN; ++i) {
    q[i] = nd(rng) * (i % 16 == 3 ? 20.0f : 1.0f);  // outlier channels: a block's scale is theirs
    k[i] = nd(rng);
  }
  const int64_t basis = KvRotationK(kHd);
  ASSERT_EQ(basis, 128);
  std::vector<float> mine = q;
  cpu::RoundQueryAsQ8_0(mine.data(), kN, basis);
  std::vector<float> hq = q, hk = k;  // llama.cpp's: rotated, then q's Q8_0
  HadamardRotate(hq.data(), kN, basis);
  HadamardRotate(hk.data(), kN, basis);
  cpu::RoundAsQ8_0InPlace(hq.data(), kN);
  std::vector<float> plain = q;  // rounded in llmrt's own basis instead
  cpu::RoundAsQ8_0InPlace(plain.data(), kN);
  for (int64_t h = 0; h < kHeads; ++h) {
    double got = 0, peer = 0, other = 0, scale = 0;
    for (int64_t i = h * kHd; i < (h + 1) * kHd; ++i) {
      got += static_cast<double>(mine[i]) * k[i];
      peer += static_cast<double>(hq[i]) * hk[i];
      other += static_cast<double>(plain[i]) * k[i];
      scale += std::fabs(static_cast<double>(q[i]) * k[i]);
    }
    EXPECT_LT(std::fabs(got - peer), 1e-5 * scale) << h;
    EXPECT_GT(std::fabs(other - peer), 1e-3 * std::fabs(got - peer) + 1e-5 * scale) << h << ": the bases look alike";
  }
  std::vector<float> none = q, direct = q;
  cpu::RoundQueryAsQ8_0(none.data(), kN, 0);
  cpu::RoundAsQ8_0InPlace(direct.data(), kN);
  EXPECT_EQ(std::memcmp(none.data(), direct.data(), kN * sizeof(float)), 0);
}

// Which keys' queries are rounded: those whose llama.cpp vec_dot_type is
// Q8_0 (a Q4_0 or Q8_0 cache), head_dim a multiple of 32, not with own; in
// llama.cpp's rotated basis where llmrt's keys are not rotated and
// llama.cpp's are (head_dim a multiple of 64).
TEST(ActRounding, QueryRoundedOnlyAgainstQ8_0DotKeys) {
  auto r = [](TensorType t, int64_t hd, int64_t rot, bool own) {
    const cpu::QueryRounding q = cpu::PeerQueryRounding(t, hd, rot, own);
    return std::pair<bool, int64_t>(q.q8_0, q.basis);
  };
  using P = std::pair<bool, int64_t>;
  EXPECT_EQ(r(TensorType::Q4_0, 64, 64, false), P(true, 0));    // keys rotated alike: q already is
  EXPECT_EQ(r(TensorType::Q4_0, 128, 128, false), P(true, 0));
  EXPECT_EQ(r(TensorType::Q4_0, 32, 0, false), P(true, 0));     // neither rotates
  EXPECT_EQ(r(TensorType::Q8_0, 64, 0, false), P(true, 64));    // llmrt's Q8_0 keys unrotated
  EXPECT_EQ(r(TensorType::Q8_0, 128, 0, false), P(true, 128));
  EXPECT_EQ(r(TensorType::Q8_0, 96, 0, false), P(true, 0));     // 96 % 64: llama.cpp does not rotate
  EXPECT_EQ(r(TensorType::Q8_0, 32, 0, false), P(true, 0));
  EXPECT_EQ(r(TensorType::Q4_0, 64, 64, true), P(false, 0));    // LLM_CPU_ACT=own
  EXPECT_EQ(r(TensorType::Q8_0, 64, 0, true), P(false, 0));
  EXPECT_EQ(r(TensorType::Q8_0, 48, 0, false), P(false, 0));
  EXPECT_EQ(r(TensorType::F16, 64, 0, false), P(false, 0));
  EXPECT_EQ(r(TensorType::F32, 64, 0, false), P(false, 0));
}

}  // namespace
}  // namespace llm
