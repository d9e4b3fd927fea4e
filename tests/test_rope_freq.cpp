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

TEST(RopeFreq, BadFactorsAndYarnAreRefused) {
  ModelConfig c = Config();
  EXPECT_EQ(RopeInvFreq(c, std::vector<float>(7, 1.0f)).status().code(), LLM_ERR_INVALID_ARGUMENT);
  std::vector<float> f(8, 1.0f);
  f[3] = 0.0f;
  EXPECT_EQ(RopeInvFreq(c, f).status().code(), LLM_ERR_INVALID_ARGUMENT);
  f[3] = NAN;
  EXPECT_EQ(RopeInvFreq(c, f).status().code(), LLM_ERR_INVALID_ARGUMENT);
  c.rope_scaling.type = RopeScalingType::kYarn;
  EXPECT_EQ(RopeInvFreq(c, {}).status().code(), LLM_ERR_UNSUPPORTED);
}

}  // namespace
}  // namespace llm::test
