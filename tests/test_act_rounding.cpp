// The dense weights' activation rounding (backend/cpu/act_rounding.h): an
// F16 (BF16) weight's matmul reads its input rounded to F16 (BF16), as
// llama.cpp's CPU matmul does, from a copy; LLM_CPU_ACT=own keeps F32
// inputs (tests/test_cpu_backend.cpp, EveryWeightTypeMatchesF32, checks the
// whole backend both ways). The Q8 roundings are tested in test_quant.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/act_rounding.h"
#include "backend/cpu/kernels.h"
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

}  // namespace
}  // namespace llm
