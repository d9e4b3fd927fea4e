// model/rope_freq.h: the RoPE frequency table both backends use (the CPU
// backend's Rope and the CUDA backend's angle kernel), here without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/rope.h"
#include "model/rope_freq.h"

namespace llm::test {
namespace {

ModelConfig Config() {
  ModelConfig c;
  c.head_dim = c.rope_dim = 16;
  c.rope_theta = 500000.0f;
  return c;
}

// rope_freqs.weight (Llama 3.1+): pair i's frequency divided by factor i.
TEST(RopeFreq, FileFactorsDivideEachPairsFrequency) {
  ModelConfig c = Config();
  const std::vector<float> factors = {1, 1, 1, 1.5f, 2, 4, 8, 8};
  auto base = RopeInvFreq(c, {});
  auto scaled = RopeInvFreq(c, factors);
  ASSERT_TRUE(base.ok() && scaled.ok());
  for (int i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ((*scaled)[i], (*base)[i] / factors[i]) << i;
    EXPECT_DOUBLE_EQ((*base)[i], std::pow(500000.0, -2.0 * i / 16)) << i;
  }
  // With linear scaling on top, both divide (llama.cpp: freq_scale and freq_factors).
  c.rope_scaling.type = RopeScalingType::kLinear;
  c.rope_scaling.factor = 2.0f;
  auto both = RopeInvFreq(c, factors);
  ASSERT_TRUE(both.ok());
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ((*both)[i], (*base)[i] / 2.0 / factors[i]) << i;
  // A local (sliding-window) layer drops the metadata scaling, not the factors.
  c.rope_theta_swa = c.rope_theta;
  auto local = RopeInvFreq(c, factors, /*local=*/true);
  ASSERT_TRUE(local.ok());
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ((*local)[i], (*base)[i] / factors[i]) << i;
}

TEST(RopeFreq, CpuRopeRotatesByTheFactoredAngle) {
  const ModelConfig c = Config();
  const std::vector<float> factors = {1, 2, 3, 4, 5, 6, 7, 8};
  auto rope = cpu::Rope::Create(c, factors);
  ASSERT_TRUE(rope.ok());
  float cs[16];
  rope->Angles(1000, cs);
  for (int i = 0; i < 8; ++i) {
    const double a = 1000.0 * std::pow(500000.0, -2.0 * i / 16) / factors[i];
    EXPECT_NEAR(cs[2 * i], std::cos(a), 1e-6) << i;
    EXPECT_NEAR(cs[2 * i + 1], std::sin(a), 1e-6) << i;
  }
}

TEST(RopeFreq, BadFactorsAreRefused) {
  ModelConfig c = Config();
  EXPECT_EQ(RopeInvFreq(c, std::vector<float>(7, 1.0f)).status().code(), LLM_ERR_INVALID_ARGUMENT);
  std::vector<float> f(8, 1.0f);
  f[3] = 0.0f;
  EXPECT_EQ(RopeInvFreq(c, f).status().code(), LLM_ERR_INVALID_ARGUMENT);
  f[3] = NAN;
  EXPECT_EQ(RopeInvFreq(c, f).status().code(), LLM_ERR_INVALID_ARGUMENT);
  c.rope_scaling.type = RopeScalingType::kYarn;  // no original context
  EXPECT_EQ(RopeInvFreq(c, {}).status().code(), LLM_ERR_INVALID_ARGUMENT);
}

// YaRN: pairs that turn fewer than beta_slow times over the original context
// are interpolated (divided by factor), those that turn more than beta_fast
// times kept, a linear ramp between; cos and sin scaled by 1 + 0.1 ln factor.
TEST(RopeFreq, YarnInterpolatesTheSlowPairsOnly) {
  ModelConfig c = Config();
  c.head_dim = c.rope_dim = 64;
  c.rope_theta = 10000.0f;
  auto base = RopeInvFreq(c, {});
  c.rope_scaling.type = RopeScalingType::kYarn;
  c.rope_scaling.factor = 4.0f;
  c.rope_scaling.original_ctx = 4096;
  auto yarn = RopeInvFreq(c, {});
  ASSERT_TRUE(base.ok() && yarn.ok());
  const double pi = 3.14159265358979323846;
  for (int i = 0; i < 32; ++i) {
    const double turns = 4096 * (*base)[i] / (2 * pi);
    if (turns > 40) EXPECT_DOUBLE_EQ((*yarn)[i], (*base)[i]) << i;
    if (turns < 0.8) EXPECT_NEAR((*yarn)[i], (*base)[i] / 4, 1e-12) << i;
    EXPECT_LE((*yarn)[i], (*base)[i] * (1 + 1e-12)) << i;
    EXPECT_GE((*yarn)[i], (*base)[i] / 4 * (1 - 1e-12)) << i;
  }
  EXPECT_NEAR(RopeMagnitude(c), 1 + 0.1 * std::log(4.0), 1e-12);
  EXPECT_EQ(RopeMagnitude(c, /*local=*/true), 1.0);
}

}  // namespace
}  // namespace llm::test
