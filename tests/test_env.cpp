// util/env: every switch parsed in one place; unset and unknown values mean
// the default.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "util/env.h"

namespace llm {
namespace {

const char* const kSwitches[] = {"LLM_BACKEND",     "LLM_CPU_ISA",    "LLM_CPU_PACK",      "LLM_CPU_LANES",
                                 "LLM_CUDA_GRAPHS", "LLM_CUDA_DEBUG", "LLM_CUDA_ATTENTION", "LLM_KV_SERVE_STALL_MS",
                                 "LLM_CPU_ACT"};

// Clears every switch for the test and puts back what was set (ctest sets
// LLM_BACKEND=cpu).
class Env : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kSwitches) {
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kSwitches) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(Env, UnsetMeansDefaults) {
  const EnvOptions e = ReadEnv();
  EXPECT_EQ(e.backend, EnvOptions::Backend::kAuto);
  EXPECT_FALSE(e.cpu_isa_generic);
  EXPECT_FALSE(e.cpu_pack_off);
  EXPECT_FALSE(e.cpu_lanes_off);
  EXPECT_FALSE(e.cpu_act_own);
  EXPECT_FALSE(e.cuda_graphs_off);
  EXPECT_FALSE(e.cuda_debug);
  EXPECT_FALSE(e.cuda_force_decode_attention);
  EXPECT_EQ(e.kv_serve_stall_ms, 0);
}

TEST_F(Env, EachSwitchSetsItsField) {
  ::setenv("LLM_BACKEND", "cuda", 1);
  ::setenv("LLM_CPU_ISA", "generic", 1);
  ::setenv("LLM_CPU_PACK", "0", 1);
  ::setenv("LLM_CPU_LANES", "0", 1);
  ::setenv("LLM_CPU_ACT", "own", 1);
  ::setenv("LLM_CUDA_GRAPHS", "0", 1);
  ::setenv("LLM_CUDA_DEBUG", "1", 1);
  ::setenv("LLM_CUDA_ATTENTION", "decode", 1);
  ::setenv("LLM_KV_SERVE_STALL_MS", "2500", 1);
  const EnvOptions e = ReadEnv();
  EXPECT_EQ(e.backend, EnvOptions::Backend::kCuda);
  EXPECT_TRUE(e.cpu_isa_generic);
  EXPECT_TRUE(e.cpu_pack_off);
  EXPECT_TRUE(e.cpu_lanes_off);
  EXPECT_TRUE(e.cpu_act_own);
  EXPECT_TRUE(e.cuda_graphs_off);
  EXPECT_TRUE(e.cuda_debug);
  EXPECT_TRUE(e.cuda_force_decode_attention);
  EXPECT_EQ(e.kv_serve_stall_ms, 2500);
  ::setenv("LLM_BACKEND", "cpu", 1);
  EXPECT_EQ(ReadEnv().backend, EnvOptions::Backend::kCpu);
}

// Read at each call: a switch changed between two contexts applies to the
// second (tests toggle LLM_CPU_ISA and LLM_CUDA_GRAPHS that way).
TEST_F(Env, ReadAtEachCall) {
  EXPECT_FALSE(ReadEnv().cpu_lanes_off);
  ::setenv("LLM_CPU_LANES", "0", 1);
  EXPECT_TRUE(ReadEnv().cpu_lanes_off);
  ::unsetenv("LLM_CPU_LANES");
  EXPECT_FALSE(ReadEnv().cpu_lanes_off);
}

TEST_F(Env, OtherValuesMeanTheDefault) {
  ::setenv("LLM_BACKEND", "CPU", 1);  // values are case-sensitive
  ::setenv("LLM_CPU_ISA", "avx2", 1);
  ::setenv("LLM_CPU_PACK", "1", 1);
  ::setenv("LLM_CPU_LANES", "", 1);
  ::setenv("LLM_CPU_ACT", "peer", 1);
  ::setenv("LLM_CUDA_GRAPHS", "off", 1);
  ::setenv("LLM_CUDA_DEBUG", "0", 1);
  ::setenv("LLM_CUDA_ATTENTION", "prefill", 1);
  ::setenv("LLM_KV_SERVE_STALL_MS", "-5", 1);  // clamped to off
  const EnvOptions e = ReadEnv();
  EXPECT_EQ(e.backend, EnvOptions::Backend::kAuto);
  EXPECT_FALSE(e.cpu_isa_generic);
  EXPECT_FALSE(e.cpu_pack_off);
  EXPECT_FALSE(e.cpu_lanes_off);
  EXPECT_FALSE(e.cpu_act_own);
  EXPECT_FALSE(e.cuda_graphs_off);
  EXPECT_FALSE(e.cuda_debug);
  EXPECT_FALSE(e.cuda_force_decode_attention);
  EXPECT_EQ(e.kv_serve_stall_ms, 0);
}

}  // namespace
}  // namespace llm
