// Each CUDA kernel against a CPU computation of the same op, on fresh random
// inputs (the seed is printed on failure), with every output poisoned (NaN)
// before the launch so unwritten elements fail the comparison. Relative L2
// error < 1e-2 (bf16 operands); pool slots no token owns must stay poisoned.
//
// Skips cleanly (GTEST_SKIP) in builds without CUDA and on machines without a
// usable device.
#include <gtest/gtest.h>

#if !LLM_HAVE_CUDA

TEST(CudaKernels, SkippedWithoutCuda) { GTEST_SKIP() << "this build has no CUDA support (LLM_CUDA=OFF or no toolkit)"; }

#else

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_decode.cuh"
#include "attention_prefill.cuh"
#include "backend/cpu/rope.h"
#include "model/rope_freq.h"
#include "embedding.cuh"
#include "hadamard.cuh"
#include "model/config.h"
#include "backend/kv_rotation.h"
#include "kvstate/kv_convert.h"
#include "rmsnorm.cuh"
#include "rope_kv.cuh"
#include "sampling.cuh"
#include "silu_mul.cuh"
#include "add_bias.cuh"
#include "random_fill.cuh"
#include "softcap.cuh"
#include "sample/sampler.h"
#include "util/fp16.h"

namespace llm::cuda {
namespace {

bool DeviceUsable(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    *why = "cudaGetDeviceCount() == 0";
    return false;
  }
  return true;
}

#define SKIP_WITHOUT_DEVICE()                                              \
  do {                                                                     \
    std::string why_;                                                      \
    if (!DeviceUsable(&why_)) GTEST_SKIP() << "no usable CUDA device: " << why_; \
  } while (0)

#define CUDA_OK(expr)                                                                    \
  do {                                                                                   \
    const cudaError_t e_ = (expr);                                                       \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_) << " " << cudaGetErrorString(e_); \
  } while (0)

// Launch error, then the kernel's own (after synchronising).
#define LAUNCH_OK(expr)                  \
  do {                                   \
    CUDA_OK(expr);                       \
    CUDA_OK(cudaDeviceSynchronize());    \
  } while (0)

template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    if (cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) p_ = nullptr;
    Poison();
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  bool ok() const { return p_ != nullptr; }
  void Poison() {
    if (p_) cudaMemset(p_, 0xFF, std::max<size_t>(n_, 1) * sizeof(T));  // NaN for f32 and bf16; -1 for ints
  }
  void Upload(const std::vector<T>& v) { cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Download() const {
    std::vector<T> v(n_);
    cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// bf16 on the host is its bit pattern.
using B16 = uint16_t;
float F(B16 b) { return Bf16ToF32(b); }

double RelL2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));  // NaN in `got` gives NaN: fails every comparison
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  std::string Seed() const { return "seed " + std::to_string(seed_); }
  float Normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(rng_); }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<B16> RandomBf16(size_t n, float sd = 1.0f) {
    std::vector<B16> v(n);
    for (auto& x : v) x = F32ToBf16(Normal(sd));
    return v;
  }
  std::vector<float> RandomF32(size_t n, float sd = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = Normal(sd);
    return v;
  }

  void RopeStoreKvCases(int32_t elem);

  uint32_t seed_ = 0;
  std::mt19937_64 rng_;
};

// ================================================================ embedding

TEST_F(CudaKernels, Embedding) {
  SCOPED_TRACE(Seed());
  const int V = 1000, E = 257, T = 37;
  std::vector<B16> table = RandomBf16(static_cast<size_t>(V) * E);
  std::vector<int32_t> tok(T);
  for (auto& t : tok) t = Uniform(0, V - 1);
  tok[0] = 0;
  tok[1] = V - 1;
  Dev<B16> d_table(table.size());
  Dev<int32_t> d_tok(T);
  Dev<float> d_out(static_cast<size_t>(T) * E);
  d_table.Upload(table);
  d_tok.Upload(tok);
  LAUNCH_OK(LaunchEmbedding(reinterpret_cast<const bf16*>(d_table.get()), V, E, d_tok.get(), T, d_out.get(), 0));
  std::vector<float> out = d_out.Download();
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e) ASSERT_EQ(out[t * E + e], F(table[static_cast<size_t>(tok[t]) * E + e])) << t << "," << e;
}

// ================================================================ rmsnorm + residual

TEST_F(CudaKernels, AddRmsNorm) {
  SCOPED_TRACE(Seed());
  const int T = 23, E = 4096 + 64;
  const float eps = 1e-5f;
  std::vector<float> x = RandomF32(static_cast<size_t>(T) * E), delta = RandomF32(x.size(), 0.5f);
  std::vector<float> w = RandomF32(E, 0.2f);
  for (auto& v : w) v += 1.0f;
  std::vector<int32_t> rows = {5, 0, 22, 5};
  for (int mode = 0; mode < 3; ++mode) {  // 0: plain, 1: with delta (write-back), 2: delta + rows
    SCOPED_TRACE("mode " + std::to_string(mode));
    Dev<float> d_x(x.size()), d_delta(delta.size()), d_w(E);
    Dev<int32_t> d_rows(rows.size());
    const int n_rows = mode == 2 ? static_cast<int>(rows.size()) : T;
    Dev<B16> d_out(static_cast<size_t>(n_rows) * E);
    d_x.Upload(x);
    d_delta.Upload(delta);
    d_w.Upload(w);
    d_rows.Upload(rows);
    LAUNCH_OK(LaunchAddRmsNorm(d_x.get(), mode ? d_delta.get() : nullptr, d_w.get(), mode == 2 ? d_rows.get() : nullptr,
                               n_rows, E, eps, reinterpret_cast<bf16*>(d_out.get()), 0));
    std::vector<B16> out = d_out.Download();
    std::vector<float> x_after = d_x.Download();
    std::vector<double> got, ref;
    for (int i = 0; i < n_rows; ++i) {
      const int r = mode == 2 ? rows[i] : i;
      std::vector<double> v(E);
      double ss = 0;
      for (int e = 0; e < E; ++e) {
        v[e] = static_cast<double>(x[r * E + e]) + (mode ? delta[r * E + e] : 0.0);
        ss += v[e] * v[e];
      }
      const double inv = 1.0 / std::sqrt(ss / E + eps);
      for (int e = 0; e < E; ++e) {
        got.push_back(F(out[static_cast<size_t>(i) * E + e]));
        ref.push_back(v[e] * inv * w[e]);
        const double want_x = mode == 1 ? v[e] : x[r * E + e];
        ASSERT_NEAR(x_after[r * E + e], want_x, 1e-6 * (1 + std::fabs(want_x))) << "residual " << r << "," << e;
      }
    }
    EXPECT_LT(RelL2(got, ref), 1e-2);
  }
}

// ================================================================ silu * up

TEST_F(CudaKernels, SiluMul) {
  SCOPED_TRACE(Seed());
  const int T = 19, Fd = 1000;
  std::vector<float> gu = RandomF32(static_cast<size_t>(T) * 2 * Fd, 3.0f);
  Dev<float> d_gu(gu.size());
  Dev<B16> d_out(static_cast<size_t>(T) * Fd);
  d_gu.Upload(gu);
  LAUNCH_OK(LaunchSiluMul(d_gu.get(), T, Fd, reinterpret_cast<bf16*>(d_out.get()), 0));
  std::vector<B16> out = d_out.Download();
  std::vector<double> got, ref;
  for (int t = 0; t < T; ++t)
    for (int f = 0; f < Fd; ++f) {
      const double g = gu[t * 2 * Fd + f], u = gu[t * 2 * Fd + Fd + f];
      ref.push_back(g / (1.0 + std::exp(-g)) * u);
      got.push_back(F(out[t * Fd + f]));
    }
  EXPECT_LT(RelL2(got, ref), 1e-2);
}

// gpt-oss's clamped SwiGLU over an MoE's permuted rows (LaunchSwigluOai):
// row r's gate/up biases are expert pick_expert[order[r]]'s; gate and up
// drawn over +-12 so both clamps (gate above 7, up beyond +-7) are hit.
// Reference in double, the CPU backend's formula (cpu/moe.cpp). Then
// gpt-oss's output bias (LaunchAddBias).
TEST_F(CudaKernels, SwigluOaiAndAddBias) {
  SCOPED_TRACE(Seed());
  const int R = 23, Fd = 96, NE = 5;
  std::vector<float> gu = RandomF32(static_cast<size_t>(R) * 2 * Fd, 12.0f);
  std::vector<float> bg = RandomF32(static_cast<size_t>(NE) * Fd, 2.0f), bu = RandomF32(static_cast<size_t>(NE) * Fd, 2.0f);
  std::vector<int32_t> pick(R), order(R);
  for (int i = 0; i < R; ++i) pick[i] = static_cast<int32_t>(rng_() % NE);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng_);
  Dev<float> d_gu(gu.size()), d_bg(bg.size()), d_bu(bu.size());
  Dev<int32_t> d_pick(R), d_order(R);
  Dev<B16> d_out(static_cast<size_t>(R) * Fd);
  d_gu.Upload(gu);
  d_bg.Upload(bg);
  d_bu.Upload(bu);
  d_pick.Upload(pick);
  d_order.Upload(order);
  int clamped_g = 0, clamped_u = 0;
  for (bool biased : {true, false}) {
    LAUNCH_OK(LaunchSwigluOai(d_gu.get(), R, Fd, biased ? d_bg.get() : nullptr, biased ? d_bu.get() : nullptr,
                              biased ? d_order.get() : nullptr, biased ? d_pick.get() : nullptr, kSwigluOaiAlpha,
                              kSwigluOaiLimit, reinterpret_cast<bf16*>(d_out.get()), 0));
    std::vector<B16> out = d_out.Download();
    std::vector<double> got, ref;
    for (int r = 0; r < R; ++r)
      for (int f = 0; f < Fd; ++f) {
        const int e = pick[order[r]];
        double g = gu[r * 2 * Fd + f] + (biased ? bg[e * Fd + f] : 0.0f);
        double u = gu[r * 2 * Fd + Fd + f] + (biased ? bu[e * Fd + f] : 0.0f);
        clamped_g += g > kSwigluOaiLimit;
        clamped_u += std::fabs(u) > kSwigluOaiLimit;
        g = std::min<double>(g, kSwigluOaiLimit);
        u = std::clamp<double>(u, -kSwigluOaiLimit, kSwigluOaiLimit);
        ref.push_back(g / (1.0 + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0));
        got.push_back(F(out[r * Fd + f]));
      }
    EXPECT_LT(RelL2(got, ref), 1e-2) << (biased ? "with biases" : "without biases");
  }
  EXPECT_GT(clamped_g, R * Fd / 10);
  EXPECT_GT(clamped_u, R * Fd / 10);
  // biases half given: refused
  EXPECT_EQ(LaunchSwigluOai(d_gu.get(), R, Fd, d_bg.get(), nullptr, d_order.get(), d_pick.get(), kSwigluOaiAlpha,
                            kSwigluOaiLimit, reinterpret_cast<bf16*>(d_out.get()), 0),
            cudaErrorInvalidValue);

  std::vector<float> y = RandomF32(static_cast<size_t>(R) * Fd, 3.0f), b = RandomF32(Fd, 3.0f);
  Dev<float> d_y(y.size()), d_b(b.size());
  d_y.Upload(y);
  d_b.Upload(b);
  LAUNCH_OK(LaunchAddBias(d_y.get(), d_b.get(), R, Fd, 0));
  const std::vector<float> yb = d_y.Download();
  for (int r = 0; r < R; ++r)
    for (int f = 0; f < Fd; ++f) ASSERT_EQ(yb[r * Fd + f], y[r * Fd + f] + b[f]) << r << " " << f;
}

// ================================================================ family elementwise ops
//
// Gemma's: the embedding scale, GeGLU (the CPU backend's tanh gelu), the
// post-norms' in-place RMSNorm, the final logit soft-cap. Outputs start as
// the emulator's NaN poison (fresh device memory) except where in place.
TEST_F(CudaKernels, FamilyElementwiseOps) {
  SCOPED_TRACE(Seed());
  {  // embedding * scale
    const int V = 300, E = 640, T = 9;
    const float scale = std::sqrt(640.0f);
    std::vector<B16> table = RandomBf16(static_cast<size_t>(V) * E);
    std::vector<int32_t> tok(T);
    for (auto& t : tok) t = Uniform(0, V - 1);
    Dev<B16> d_table(table.size());
    Dev<int32_t> d_tok(T);
    Dev<float> d_out(static_cast<size_t>(T) * E);
    d_table.Upload(table);
    d_tok.Upload(tok);
    LAUNCH_OK(LaunchEmbedding(reinterpret_cast<const bf16*>(d_table.get()), V, E, d_tok.get(), T, d_out.get(), 0,
                              scale));
    std::vector<float> out = d_out.Download();
    for (int t = 0; t < T; ++t)
      for (int e = 0; e < E; ++e)
        ASSERT_EQ(out[t * E + e], F(table[static_cast<size_t>(tok[t]) * E + e]) * scale) << t << "," << e;
  }
  {  // gelu_tanh(gate) * up
    const int T = 7, Fd = 777;
    std::vector<float> gu = RandomF32(static_cast<size_t>(T) * 2 * Fd, 3.0f);
    Dev<float> d_gu(gu.size());
    Dev<B16> d_out(static_cast<size_t>(T) * Fd);
    d_gu.Upload(gu);
    LAUNCH_OK(LaunchSiluMul(d_gu.get(), T, Fd, reinterpret_cast<bf16*>(d_out.get()), 0, /*gelu=*/true));
    std::vector<B16> out = d_out.Download();
    std::vector<double> got, ref;
    for (int t = 0; t < T; ++t)
      for (int f = 0; f < Fd; ++f) {
        const double g = gu[t * 2 * Fd + f], u = gu[t * 2 * Fd + Fd + f];
        ref.push_back(0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u);
        got.push_back(F(out[t * Fd + f]));
      }
    EXPECT_LT(RelL2(got, ref), 1e-2);
  }
  {  // in-place RMSNorm (post-norms), F32 throughout
    const int T = 5, E = 1152;
    const float eps = 1e-6f;
    std::vector<float> y = RandomF32(static_cast<size_t>(T) * E, 4.0f), w = RandomF32(E, 0.3f);
    for (auto& v : w) v += 1.0f;
    Dev<float> d_y(y.size()), d_w(E);
    d_y.Upload(y);
    d_w.Upload(w);
    LAUNCH_OK(LaunchRmsNormInPlace(d_y.get(), d_w.get(), T, E, eps, 0));
    std::vector<float> out = d_y.Download();
    for (int t = 0; t < T; ++t) {
      double ss = 0;
      for (int e = 0; e < E; ++e) ss += static_cast<double>(y[t * E + e]) * y[t * E + e];
      const double inv = 1.0 / std::sqrt(ss / E + eps);
      for (int e = 0; e < E; ++e) ASSERT_NEAR(out[t * E + e], y[t * E + e] * inv * w[e], 1e-4) << t << "," << e;
    }
  }
  {  // final soft-cap
    std::vector<float> x = RandomF32(100003, 40.0f);
    Dev<float> d_x(x.size());
    d_x.Upload(x);
    LAUNCH_OK(LaunchSoftcap(d_x.get(), static_cast<int64_t>(x.size()), 30.0f, 0));
    std::vector<float> out = d_x.Download();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(out[i], 30.0 * std::tanh(x[i] / 30.0), 1e-4) << i;
  }
  EXPECT_EQ(LaunchSoftcap(nullptr, 10, 0.0f, 0), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRmsNormInPlace(nullptr, nullptr, 1, 0, 1e-6f, 0), cudaErrorInvalidValue);
}

// ================================================================ random fills (cuda-bench's inputs)
//
// Deterministic (a hash of seed and index: the same in any launch shape),
// roughly normal with the asked deviation, and the blocks' scale bytes where
// asked, covering a tail that is not a whole 8-byte word.
TEST_F(CudaKernels, RandomFills) {
  const int64_t n = 100003;
  Dev<B16> a(n), b(n);
  LAUNCH_OK(LaunchRandomFillBf16(reinterpret_cast<bf16*>(a.get()), n, 5, 2.0f, 0));
  LAUNCH_OK(LaunchRandomFillBf16(reinterpret_cast<bf16*>(b.get()), n, 5, 2.0f, 0));
  const std::vector<B16> va = a.Download(), vb = b.Download();
  EXPECT_EQ(va, vb);
  double sum = 0, sq = 0;
  for (B16 x : va) {
    ASSERT_TRUE(std::isfinite(F(x)));
    sum += F(x);
    sq += static_cast<double>(F(x)) * F(x);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(sq / n), 2.0, 0.05);
  LAUNCH_OK(LaunchRandomFillBf16(reinterpret_cast<bf16*>(b.get()), n, 6, 2.0f, 0));
  EXPECT_NE(va, b.Download());

  const int32_t bb = 210, blocks = 37;  // 7770 bytes: the last word is partial
  Dev<uint8_t> q(static_cast<size_t>(bb) * blocks + 8);
  LAUNCH_OK(LaunchRandomFillBlocks(q.get(), blocks, bb, 9, 208, 0, 0x2000, 0));
  const std::vector<uint8_t> vq = q.Download();
  int distinct_first = 0;
  for (int32_t k = 0; k < blocks; ++k) {
    const uint8_t* blk = vq.data() + static_cast<size_t>(k) * bb;
    EXPECT_EQ(blk[208] | blk[209] << 8, 0x2000) << k;
    EXPECT_EQ(blk[0] | blk[1] << 8, 0x2000) << k;
    distinct_first += blk[2] != blk[3];
  }
  EXPECT_GT(distinct_first, blocks / 2);  // random elsewhere
  for (size_t i = static_cast<size_t>(bb) * blocks; i < vq.size(); ++i) EXPECT_EQ(vq[i], 0xFF) << i;  // untouched
  EXPECT_EQ(LaunchRandomFillBlocks(q.get(), blocks, bb, 9, 209, -1, 0x2000, 0), cudaErrorInvalidValue);
}

// ================================================================ argmax

TEST_F(CudaKernels, Argmax) {
  SCOPED_TRACE(Seed());
  const int R = 9, V = 128256;
  std::vector<float> logits = RandomF32(static_cast<size_t>(R) * V, 2.0f);
  std::vector<int32_t> want(R);
  for (int r = 0; r < R; ++r) {
    want[r] = r == 0 ? 0 : r == 1 ? V - 1 : Uniform(0, V - 1);
    logits[static_cast<size_t>(r) * V + want[r]] = 100.0f;
  }
  // a tie: the smaller index wins; NaN never wins
  logits[static_cast<size_t>(2) * V + V - 5] = 100.0f;
  if (want[2] > V - 5) want[2] = V - 5;
  logits[static_cast<size_t>(3) * V + 7] = NAN;
  Dev<float> d_l(logits.size());
  Dev<int32_t> d_out(R);
  d_l.Upload(logits);
  LAUNCH_OK(LaunchArgmax(d_l.get(), R, V, d_out.get(), 0));
  EXPECT_EQ(d_out.Download(), want);
}

// ================================================================ rope angles

TEST_F(CudaKernels, RopeAnglesMatchCpuRope) {
  SCOPED_TRACE(Seed());
  for (int variant = 0; variant < 4; ++variant) {
    ModelConfig c;
    c.head_dim = 128;
    c.rope_dim = variant == 2 ? 64 : 128;
    c.rope_theta = variant == 0 ? 10000.0f : 500000.0f;
    std::vector<float> factors;  // variant 3: a Llama 3.1 file's rope_freqs.weight
    if (variant == 3)
      for (int i = 0; i < c.rope_dim / 2; ++i) factors.push_back(i < 20 ? 1.0f : i < 40 ? 1.0f + (i - 20) * 0.35f : 8.0f);
    if (variant == 1) {  // Llama 3.1
      c.rope_scaling.type = RopeScalingType::kLlama3;
      c.rope_scaling.factor = 8.0f;
      c.rope_scaling.original_ctx = 8192;
      c.rope_scaling.low_freq_factor = 1.0f;
      c.rope_scaling.high_freq_factor = 4.0f;
    } else if (variant == 2) {
      c.rope_scaling.type = RopeScalingType::kLinear;
      c.rope_scaling.factor = 4.0f;
    }
    SCOPED_TRACE("variant " + std::to_string(variant));
    auto cpu_rope = cpu::Rope::Create(c, factors);
    ASSERT_TRUE(cpu_rope.ok()) << cpu_rope.status().message();
    auto inv = RopeInvFreq(c, factors);
    ASSERT_TRUE(inv.ok()) << inv.status().message();
    const int P = c.rope_dim / 2;
    std::vector<int32_t> pos = {0, 1, 15, 16, 17, 511, 512, 8191, 8192, 131071};
    for (int i = 0; i < 22; ++i) pos.push_back(Uniform(0, 1 << 17));
    Dev<int32_t> d_pos(pos.size());
    Dev<double> d_inv(P);
    Dev<float> d_cs(pos.size() * P * 2);
    d_pos.Upload(pos);
    d_inv.Upload(*inv);
    LAUNCH_OK(LaunchRopeAngles(d_pos.get(), static_cast<int32_t>(pos.size()), d_inv.get(), P, d_cs.get(), 0));
    std::vector<float> cs = d_cs.Download(), ref(P * 2);
    for (size_t t = 0; t < pos.size(); ++t) {
      cpu_rope->Angles(pos[t], ref.data());
      for (int i = 0; i < 2 * P; ++i) ASSERT_NEAR(cs[t * P * 2 + i], ref[i], 2e-6) << "pos " << pos[t] << " item " << i;
    }
  }
}

// ================================================================ paged-batch fixture

// A batch of sequences over a paged pool of n_layer = 2 layers (the kernels
// run on layer 1, so layer offsets are exercised), blocks handed out in a
// random order, K in element type `elem` and V in `elem_v` (0: as K's; BF16,
// F16, Q8_0, Q4_0 or FP8; a pool tile is a KV wire tile, so kvstate's
// DecodeKvRow / EncodeKvRow read and write rows).
struct PagedBatch {
  int Hq, Hkv, hd, bs;
  std::vector<std::pair<int, int>> seqs;  // (n_past, n_tokens)
  int32_t elem = kKvBf16;
  int32_t elem_v = 0;
  KvPoolLayout layout;
  int n_blocks = 0, n_tok = 0;
  std::vector<SeqDesc> desc;
  std::vector<int32_t> tables, tok_seq, tok_pos;

  void Build(std::mt19937_64& rng) {
    layout = KvPoolLayout{2, Hkv, hd, bs, elem, elem_v};
    int total_blocks = 0;
    for (auto [past, n] : seqs) total_blocks += (past + n + bs - 1) / bs;
    n_blocks = total_blocks + 3;
    std::vector<int32_t> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    int next = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      auto [past, n] = seqs[s];
      desc.push_back(SeqDesc{n_tok, n, past, static_cast<int32_t>(tables.size())});
      for (int b = 0; b < (past + n + bs - 1) / bs; ++b) tables.push_back(perm[next++]);
      for (int i = 0; i < n; ++i) {
        tok_seq.push_back(static_cast<int32_t>(s));
        tok_pos.push_back(past + i);
      }
      n_tok += n;
    }
  }
  int64_t pool_bytes() const { return n_blocks * layout.block_bytes(); }
  KvWireLayout wire() const { return KvWireLayout{2, Hkv, hd, bs, elem, elem_v}; }
  // Byte offset of the tile of (layer, K or V, position pos of sequence s, kv head h); its row is pos % bs.
  int64_t Tile(int layer, bool v, int s, int pos, int h) const {
    const int32_t block = tables[desc[s].table_offset + pos / bs];
    return block * layout.block_bytes() + (v ? layout.VOffset(layer) : layout.KOffset(layer)) +
           h * layout.tile_bytes(v ? 1 : 0);
  }
  // Bytes of that row: its values and, for Q8_0, its scale.
  std::vector<int64_t> RowBytes(int layer, bool v, int s, int pos, int h) const {
    const int64_t t = Tile(layer, v, s, pos, h), r = pos % bs;
    const int32_t e = layout.Elem(v ? 1 : 0);  // this side's type
    std::vector<int64_t> out;
    if (e == kKvQ8) {
      for (int i = 0; i < 4; ++i) out.push_back(t + 4 * r + i);
      for (int d = 0; d < hd; ++d) out.push_back(t + 4 * bs + r * hd + d);
    } else if (e == kKvQ4) {  // head_dim / 32 blocks of 18 bytes
      for (int i = 0; i < hd / 32 * kQ4BlockBytes; ++i) out.push_back(t + r * (hd / 32) * kQ4BlockBytes + i);
    } else if (e == kKvFp8) {  // head_dim / 32 blocks of 36 bytes
      for (int i = 0; i < hd / 32 * kFp8BlockBytes; ++i) out.push_back(t + r * (hd / 32) * kFp8BlockBytes + i);
    } else {
      for (int d = 0; d < 2 * hd; ++d) out.push_back(t + r * hd * 2 + d);
    }
    return out;
  }
  std::vector<float> Row(const std::vector<uint8_t>& pool, int layer, bool v, int s, int pos, int h) const {
    std::vector<float> x(hd);
    kvstate::DecodeKvRow(wire(), v ? 1 : 0, pool.data() + Tile(layer, v, s, pos, h), pos % bs, x.data());
    return x;
  }
  PagedKv View(uint8_t* d_pool) const {  // layer 1's view of a device copy
    PagedKv kv;
    kv.k = d_pool + layout.KOffset(1);
    kv.v = d_pool + layout.VOffset(1);
    kv.block_stride = layout.block_bytes();
    kv.tile_bytes = layout.tile_bytes(0);
    kv.tile_bytes_v = layout.tile_bytes(1);
    kv.block_size = bs;
    kv.elem = elem;
    kv.elem_v = elem_v;
    return kv;
  }
  void SetRow(std::vector<uint8_t>& pool, int layer, bool v, int s, int pos, int h, const float* x) const {
    kvstate::EncodeKvRow(wire(), v ? 1 : 0, pool.data() + Tile(layer, v, s, pos, h), pos % bs, x);
  }
};

const char* ElemName(int32_t elem) {
  return elem == kKvBf16 ? "BF16" : elem == kKvF16 ? "F16" : elem == kKvQ8 ? "Q8_0" : elem == kKvFp8 ? "FP8" : "Q4_0";
}

// ================================================================ rope + KV store

// Each pool type: BF16 and F16 round the rotated values; Q8_0 quantizes
// each row as the CPU pool does (its rows equal QuantizeRowQ8 of the
// reference row up to a rounding tie that the F32 rotation's last bit moves).
TEST_F(CudaKernels, RopeStoreKv) {
  SCOPED_TRACE(Seed());
  for (int32_t elem : {kKvBf16, kKvF16, kKvQ8, kKvQ4, kKvFp8}) RopeStoreKvCases(elem);
}

void CudaKernels::RopeStoreKvCases(int32_t elem) {
  SCOPED_TRACE(ElemName(elem));
  // extras: q/k/v biases (Qwen2) and per-head q/k RMSNorm (Gemma 3, Qwen3)
  // before the rotation; Gemma 3 270M's heads (4 x 256 over 1 KV head) and
  // a partial rotary with norms among them.
  struct Case { int Hq, Hkv, hd, n_pairs, neox, extras; };
  for (const Case& k : {Case{8, 2, 64, 32, 0, 0}, Case{32, 8, 128, 64, 0, 0}, Case{4, 4, 128, 32, 0, 0},
                        Case{8, 1, 64, 32, 1, 0}, Case{8, 4, 8, 4, 0, 0}, Case{4, 1, 256, 128, 1, 1},
                        Case{8, 2, 32, 12, 1, 1}, Case{8, 2, 64, 32, 0, 1}}) {
    SCOPED_TRACE("Hq " + std::to_string(k.Hq) + " Hkv " + std::to_string(k.Hkv) + " hd " + std::to_string(k.hd) +
                 " pairs " + std::to_string(k.n_pairs) + " neox " + std::to_string(k.neox) + " extras " +
                 std::to_string(k.extras));
    if ((elem == kKvQ4 || elem == kKvFp8) && k.hd % 32 != 0) continue;  // no whole blocks (the launcher refuses: test_cuda_kv_q4.cpp)
    // a Q4_0 pool's rows are Hadamard-rotated, the query as the key
    const int32_t rot_k = elem == kKvQ4 ? static_cast<int32_t>(KvRotationK(k.hd)) : 0;
    const int32_t rot_v = elem == kKvQ4 ? static_cast<int32_t>(KvRotationV(k.hd)) : 0;
    PagedBatch b{k.Hq, k.Hkv, k.hd, 16, {{15, 1}, {16, 17}, {0, 33}, {31, 2}}, elem};
    b.Build(rng_);
    const int row = (k.Hq + 2 * k.Hkv) * k.hd, P = k.n_pairs;
    std::vector<float> qkv = RandomF32(static_cast<size_t>(b.n_tok) * row);
    std::vector<float> bias = RandomF32(row, 0.5f), qn = RandomF32(k.hd, 0.3f), kn = RandomF32(k.hd, 0.3f);
    for (auto& v : qn) v += 1.0f;
    for (auto& v : kn) v += 1.0f;
    const float eps = 1e-6f;
    ModelConfig c;
    c.head_dim = k.hd;
    c.rope_dim = 2 * P;
    c.rope_theta = 10000.0f;
    auto cpu_rope = cpu::Rope::Create(c);
    ASSERT_TRUE(cpu_rope.ok());
    std::vector<float> cs(static_cast<size_t>(b.n_tok) * P * 2);
    for (int t = 0; t < b.n_tok; ++t) cpu_rope->Angles(b.tok_pos[t], cs.data() + t * P * 2);

    Dev<float> d_qkv(qkv.size()), d_cs(cs.size()), d_bias(bias.size()), d_qn(k.hd), d_kn(k.hd);
    d_bias.Upload(bias);
    d_qn.Upload(qn);
    d_kn.Upload(kn);
    Dev<int32_t> d_seq(b.n_tok), d_pos(b.n_tok), d_tab(b.tables.size());
    Dev<SeqDesc> d_desc(b.desc.size());
    Dev<B16> d_q(static_cast<size_t>(b.n_tok) * k.Hq * k.hd);
    Dev<uint8_t> d_pool(b.pool_bytes());
    d_pool.Upload(std::vector<uint8_t>(b.pool_bytes(), 0xFF));
    d_qkv.Upload(qkv);
    d_cs.Upload(cs);
    d_seq.Upload(b.tok_seq);
    d_pos.Upload(b.tok_pos);
    d_tab.Upload(b.tables);
    d_desc.Upload(b.desc);
    RopeKvParams p;
    p.qkv = d_qkv.get();
    p.cos_sin = d_cs.get();
    p.tok_seq = d_seq.get();
    p.tok_pos = d_pos.get();
    p.seqs = d_desc.get();
    p.block_tables = d_tab.get();
    p.q_out = reinterpret_cast<bf16*>(d_q.get());
    p.kv = b.View(d_pool.get());
    p.n_tok = b.n_tok;
    p.n_head = k.Hq;
    p.n_head_kv = k.Hkv;
    p.head_dim = k.hd;
    p.n_pairs = P;
    p.neox = k.neox;
    if (k.extras) {
      p.bias = d_bias.get();
      p.q_norm = d_qn.get();
      p.k_norm = d_kn.get();
      p.eps = eps;
    }
    p.rot_k = rot_k;
    p.rot_v = rot_v;
    LAUNCH_OK(LaunchRopeStoreKv(p, 0));
    std::vector<B16> q = d_q.Download();
    std::vector<uint8_t> pool = d_pool.Download();

    std::vector<double> got, ref, got_kv, ref_kv;  // _kv: the K/V rows alone
    std::vector<double> got_q, ref_q;              // Q8_0 rows against the CPU's quantization of the reference
    std::vector<bool> written(pool.size(), false);
    for (int t = 0; t < b.n_tok; ++t) {
      std::vector<float> x(qkv.begin() + static_cast<int64_t>(t) * row, qkv.begin() + static_cast<int64_t>(t + 1) * row);
      const float* c2 = cs.data() + t * P * 2;
      if (k.extras) {  // the CPU backend's order: bias, per-head norm, rotation
        for (int i = 0; i < row; ++i) x[i] += bias[i];
        for (int h = 0; h < k.Hq + k.Hkv; ++h) {
          float* v = x.data() + h * k.hd;
          double ss = 0;
          for (int d = 0; d < k.hd; ++d) ss += static_cast<double>(v[d]) * v[d];
          const double inv = 1.0 / std::sqrt(ss / k.hd + eps);
          for (int d = 0; d < k.hd; ++d) v[d] = static_cast<float>(v[d] * inv * (h < k.Hq ? qn[d] : kn[d]));
        }
      }
      if (!k.neox) {
        cpu_rope->Apply(c2, x.data(), k.Hq + k.Hkv, k.hd);  // the CPU backend's own rotation
      } else {
        for (int h = 0; h < k.Hq + k.Hkv; ++h)
          for (int i = 0; i < P; ++i) {
            float* v = x.data() + h * k.hd;
            const float x0 = v[i], x1 = v[i + P];
            v[i] = x0 * c2[2 * i] - x1 * c2[2 * i + 1];
            v[i + P] = x0 * c2[2 * i + 1] + x1 * c2[2 * i];
          }
      }
      HadamardRotate(x.data(), (k.Hq + k.Hkv) * k.hd, rot_k);  // the CPU backend's rotation (0: none)
      HadamardRotate(x.data() + (k.Hq + k.Hkv) * k.hd, k.Hkv * k.hd, rot_v);
      for (int i = 0; i < k.Hq * k.hd; ++i) {
        got.push_back(F(q[static_cast<size_t>(t) * k.Hq * k.hd + i]));
        ref.push_back(x[i]);
      }
      for (int h = 0; h < k.Hkv; ++h)
        for (int v = 0; v < 2; ++v) {
          const float* xr = x.data() + (k.Hq + v * k.Hkv + h) * k.hd;
          const std::vector<float> row = b.Row(pool, 1, v, b.tok_seq[t], b.tok_pos[t], h);
          for (int d = 0; d < k.hd; ++d) {
            got.push_back(row[d]);
            ref.push_back(xr[d]);
            got_kv.push_back(row[d]);
            ref_kv.push_back(xr[d]);
          }
          if (elem == kKvQ8 || elem == kKvQ4 || elem == kKvFp8) {  // the host's rule on the reference row
            std::vector<uint8_t> tile(static_cast<size_t>(b.layout.tile_bytes()));
            const KvWireLayout w = b.wire();
            kvstate::EncodeKvRow(w, 0, tile.data(), 0, xr);
            std::vector<float> rq(k.hd);
            kvstate::DecodeKvRow(w, 0, tile.data(), 0, rq.data());
            for (int d = 0; d < k.hd; ++d) {
              got_q.push_back(row[d]);
              ref_q.push_back(rq[d]);
            }
          }
          for (int64_t i : b.RowBytes(1, v, b.tok_seq[t], b.tok_pos[t], h)) written[i] = true;
        }
    }
    // F16 keeps 11 significant bits, BF16 8; Q8_0 is within half a step of
    // max|row| / 127, Q4_0 within half a step of its block's max / 8, FP8
    // within half a step of E4M3 at each value (2^-4 of it: RMS ~2%)
    EXPECT_LT(RelL2(got, ref), elem == kKvQ4 ? 0.15 : elem == kKvFp8 ? 0.04 : 1e-2);
    EXPECT_LT(RelL2(got_kv, ref_kv), elem == kKvF16 ? 1e-3 : elem == kKvQ4 ? 0.15 : elem == kKvFp8 ? 0.04 : 1e-2);
    if (elem == kKvQ8 || elem == kKvQ4 || elem == kKvFp8) {
      // (FP8: a value the F32 RoPE moves across a rounding midpoint takes the
      // neighbouring code, 1/8 of it at most)
      EXPECT_LT(RelL2(got_q, ref_q), elem == kKvFp8 ? 5e-3 : 1e-3);
    }
    int64_t stray = 0;
    for (size_t i = 0; i < pool.size(); ++i)
      if (!written[i] && pool[i] != 0xFF) ++stray;
    EXPECT_EQ(stray, 0) << "pool elements written that belong to no token of the batch";
  }
}

// ================================================================ attention

struct AttnCase {
  int Hq, Hkv, hd, bs;
  std::vector<std::pair<int, int>> seqs;  // (n_past, n_tokens)
  int window = 0;        // > 0: sliding window (keys pos - window + 1 .. pos)
  float softcap = 0.0f;  // > 0: scores capped (Gemma 2)
  std::vector<float> sinks;  // (Hq) attention-sink logits (gpt-oss); empty: none
};

std::string Describe(const AttnCase& c) {
  std::string s = "Hq " + std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) + " hd " + std::to_string(c.hd) +
                  " bs " + std::to_string(c.bs) + " seqs";
  for (auto [p, n] : c.seqs) s += " (" + std::to_string(p) + "+" + std::to_string(n) + ")";
  if (c.window > 0) s += " window " + std::to_string(c.window);
  if (c.softcap > 0) s += " softcap " + std::to_string(c.softcap);
  if (!c.sinks.empty()) s += " sinks";
  return s;
}

// kind: 0 decode kernel with planned splits, 1 decode kernel forced to one
// split, 2 decode kernel with as many splits as possible, 3 prefill kernel,
// 4 decode kernel with device-side (dynamic) splits planned for a 16k
// context (as CUDA graphs launch it: most splits empty), 5 the same with as
// many splits as the workspace takes.
//
// elem: the pool's type. The reference reads the values the pool holds
// (decoded from its type); the kernels widen them to bf16 as they load.
void RunAttention(const AttnCase& c, int kind, std::mt19937_64& rng, int32_t elem = kKvBf16, int32_t elem_v = 0) {
  SCOPED_TRACE(Describe(c) + " kind " + std::to_string(kind) + " " + ElemName(elem) + "/" +
               ElemName(elem_v != 0 ? elem_v : elem));
  PagedBatch b{c.Hq, c.Hkv, c.hd, c.bs, c.seqs, elem, elem_v};
  b.Build(rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint8_t> pool(b.pool_bytes(), 0xFF);  // unowned slots stay NaN (BF16, F16, Q8_0 scales)
  std::vector<float> x(c.hd);
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int end = c.seqs[s].first + c.seqs[s].second;
    for (int layer = 0; layer < 2; ++layer)
      for (int pos = 0; pos < end; ++pos)
        for (int h = 0; h < c.Hkv; ++h)
          for (int v = 0; v < 2; ++v) {
            for (auto& e : x) e = nd(rng);
            b.SetRow(pool, layer, v, static_cast<int>(s), pos, h, x.data());
          }
  }
  std::vector<B16> q(static_cast<size_t>(b.n_tok) * c.Hq * c.hd);
  for (auto& x : q) x = F32ToBf16(nd(rng));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));

  Dev<uint8_t> d_pool(pool.size());
  Dev<B16> d_q(q.size()), d_out(q.size());
  Dev<int32_t> d_seq(b.n_tok), d_pos(b.n_tok), d_tab(b.tables.size()), d_items(b.n_tok);
  Dev<SeqDesc> d_desc(b.desc.size());
  ASSERT_TRUE(d_pool.ok() && d_q.ok() && d_out.ok());
  d_pool.Upload(pool);
  d_q.Upload(q);
  d_seq.Upload(b.tok_seq);
  d_pos.Upload(b.tok_pos);
  d_tab.Upload(b.tables);
  d_desc.Upload(b.desc);
  std::vector<int32_t> items(b.n_tok);
  std::iota(items.begin(), items.end(), 0);
  std::shuffle(items.begin(), items.end(), rng);  // any order of query rows
  d_items.Upload(items);
  const PagedKv kv = b.View(d_pool.get());
  Dev<float> d_sinks(std::max<size_t>(c.sinks.size(), 1));
  if (!c.sinks.empty()) d_sinks.Upload(c.sinks);
  const float* sinks = c.sinks.empty() ? nullptr : d_sinks.get();

  if (kind != 3) {
    DecodeAttnParams p;
    p.q = reinterpret_cast<const bf16*>(d_q.get());
    p.out = reinterpret_cast<bf16*>(d_out.get());
    p.items = d_items.get();
    p.n_items = b.n_tok;
    p.tok_seq = d_seq.get();
    p.tok_pos = d_pos.get();
    p.seqs = d_desc.get();
    p.block_tables = d_tab.get();
    p.kv = kv;
    p.n_head = c.Hq;
    p.n_head_kv = c.Hkv;
    p.head_dim = c.hd;
    p.scale = scale;
    p.window = c.window;
    p.softcap = c.softcap;
    p.sinks = sinks;
    int max_keys = 0;
    for (auto [past, n] : c.seqs) max_keys = std::max(max_keys, past + n);
    const int32_t slots = kind == 1 ? b.n_tok : 4096;
    if (kind >= 4) max_keys = std::max(max_keys, 16384);
    PlanDecodeAttention(b.n_tok, c.Hkv, c.hd, max_keys, (kind == 2 || kind == 5) ? 100000 : 132, slots, &p.n_splits,
                        &p.keys_per_split);
    if (kind == 1) ASSERT_EQ(p.n_splits, 1);
    if (kind >= 4) {
      p.dynamic_split = 1;
      p.keys_per_split = 0;  // must be ignored
    }
    const size_t ws_bytes = DecodeAttnWorkspaceBytes(slots, c.Hq, c.hd);
    Dev<float> ws(ws_bytes / sizeof(float) + 1);
    LAUNCH_OK(LaunchDecodeAttention(p, ws.get(), ws_bytes, 0));
  } else {
    std::vector<PrefillWork> work;
    for (size_t s = 0; s < c.seqs.size(); ++s)
      for (int q0 = 0; q0 < c.seqs[s].second; q0 += kPrefillTileQ) work.push_back({static_cast<int32_t>(s), q0});
    std::shuffle(work.begin(), work.end(), rng);
    Dev<PrefillWork> d_work(work.size());
    d_work.Upload(work);
    PrefillAttnParams p;
    p.q = reinterpret_cast<const bf16*>(d_q.get());
    p.out = reinterpret_cast<bf16*>(d_out.get());
    p.work = d_work.get();
    p.n_work = static_cast<int32_t>(work.size());
    p.seqs = d_desc.get();
    p.block_tables = d_tab.get();
    p.kv = kv;
    p.n_head = c.Hq;
    p.n_head_kv = c.Hkv;
    p.head_dim = c.hd;
    p.scale = scale;
    p.window = c.window;
    p.softcap = c.softcap;
    p.sinks = sinks;
    LAUNCH_OK(LaunchPrefillAttention(p, 0));
  }
  std::vector<B16> out = d_out.Download();

  // Reference in double over the values the pool holds.
  std::vector<double> got, ref;
  const int n_rep = c.Hq / c.Hkv;
  std::vector<std::vector<float>> K, V;  // rows of the current sequence and kv head
  for (int t = 0; t < b.n_tok; ++t) {
    const int s = b.tok_seq[t], pos = b.tok_pos[t];
    for (int h = 0; h < c.Hq; ++h) {
      const int g = h / n_rep;
      if (h % n_rep == 0) {  // a new kv head: decode its rows once
        K.clear();
        V.clear();
      }
      for (int j = static_cast<int>(K.size()); j <= pos; ++j) {
        K.push_back(b.Row(pool, 1, false, s, j, g));
        V.push_back(b.Row(pool, 1, true, s, j, g));
      }
      const B16* qr = q.data() + (static_cast<size_t>(t) * c.Hq + h) * c.hd;
      const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;  // first key seen
      std::vector<double> sc(pos + 1, 0.0);
      double mx = -1e300;
      for (int j = lo; j <= pos; ++j) {
        double dot = 0;
        for (int d = 0; d < c.hd; ++d) dot += F(qr[d]) * static_cast<double>(K[j][d]);
        sc[j] = dot * scale;
        if (c.softcap > 0) sc[j] = c.softcap * std::tanh(sc[j] / c.softcap);
        mx = std::max(mx, sc[j]);
      }
      // A sink: one more term of the denominator (no value), the max over it too.
      const bool sink = !c.sinks.empty();
      if (sink) mx = std::max(mx, static_cast<double>(c.sinks[h]));
      double sum = sink ? std::exp(c.sinks[h] - mx) : 0.0;
      for (int j = lo; j <= pos; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      for (int d = 0; d < c.hd; ++d) {
        double acc = 0;
        for (int j = lo; j <= pos; ++j) acc += sc[j] * V[j][d];
        ref.push_back(acc / sum);
        got.push_back(F(out[(static_cast<size_t>(t) * c.Hq + h) * c.hd + d]));
      }
    }
  }
  const double err = RelL2(got, ref);
  EXPECT_LT(err, 1e-2);
}

TEST_F(CudaKernels, DecodeAttention) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> decode = {{0, 1}, {15, 1}, {16, 1}, {31, 1}, {1000, 1}, {4095, 1}, {37, 5}};
  for (int hd : {64, 128})
    for (int rep : {1, 4, 8})
      for (int kind : {0, 1, 2, 4, 5}) RunAttention(AttnCase{2 * rep, 2, hd, 16, decode}, kind, rng_);
}

// The graph launch shape: dynamic splits, odd shapes and block sizes.
TEST_F(CudaKernels, DecodeAttentionDynamicSplits) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> seqs = {{0, 1}, {7, 1}, {63, 1}, {64, 1}, {65, 1}, {2047, 1}, {5000, 1}};
  for (int kind : {4, 5}) {
    RunAttention(AttnCase{8, 4, 8, 16, seqs}, kind, rng_);
    RunAttention(AttnCase{16, 1, 256, 16, seqs}, kind, rng_);
    RunAttention(AttnCase{4, 2, 64, 1, seqs}, kind, rng_);
    RunAttention(AttnCase{32, 8, 128, 16, seqs}, kind, rng_);
  }
}

TEST_F(CudaKernels, DecodeAttentionOddShapes) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> seqs = {{0, 1}, {7, 1}, {8, 3}, {100, 1}, {300, 2}};
  RunAttention(AttnCase{8, 4, 8, 16, seqs}, 0, rng_);    // stories260K: head_dim 8, GQA 2
  RunAttention(AttnCase{6, 3, 18, 16, seqs}, 0, rng_);   // head_dim not a multiple of 8: scalar loads
  RunAttention(AttnCase{16, 1, 256, 16, seqs}, 0, rng_); // head_dim 256, 16 heads per KV head: > 48 KB smem
  RunAttention(AttnCase{4, 2, 64, 8, seqs}, 2, rng_);    // block size 8
  RunAttention(AttnCase{4, 2, 128, 32, seqs}, 0, rng_);  // block size 32
  RunAttention(AttnCase{4, 4, 64, 1, seqs}, 0, rng_);    // block size 1
}

// More query heads per KV head than the CTA has threads (n_rep > 128): each
// split's running max and sum must be written for every head, not only for
// heads < 128 (the combine would read the workspace's poison for the rest).
// Split kinds only: one split writes the output directly.
TEST_F(CudaKernels, DecodeAttentionManyHeadsPerGroup) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> seqs = {{0, 1}, {70, 1}, {300, 1}, {1000, 1}};
  for (int kind : {0, 2, 4, 5}) {
    RunAttention(AttnCase{256, 1, 8, 16, seqs}, kind, rng_);  // n_rep 256: two heads per thread
    RunAttention(AttnCase{600, 2, 2, 16, seqs}, kind, rng_);  // n_rep 300: not a multiple of the CTA
  }
}

TEST_F(CudaKernels, PrefillAttention) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> ragged = {{0, 1}, {0, 64}, {0, 65}, {16, 100}, {15, 17}, {200, 130}};
  for (int hd : {64, 128})
    for (int rep : {1, 4, 8}) {
      const int hkv = rep == 8 ? 1 : 2;
      RunAttention(AttnCase{hkv * rep, hkv, hd, 16, ragged}, 3, rng_);
    }
  RunAttention(AttnCase{8, 2, 128, 32, {{33, 90}, {0, 7}}}, 3, rng_);  // block size 32
  RunAttention(AttnCase{8, 2, 64, 8, {{5, 70}}}, 3, rng_);              // block size 8
}

// Sliding windows (Gemma, Mistral) and soft-capped scores (Gemma 2), both
// kernels: windows of one key, shorter than a key tile, and longer
// than some contexts; the prefill kernel's tiles wholly before a window are
// skipped (context 200 + 130, window 17); head_dim 256 (Gemma 3) decode only.
TEST_F(CudaKernels, AttentionSlidingWindowAndSoftcap) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> decode = {{0, 1}, {16, 1}, {100, 1}, {1000, 1}, {37, 5}};
  const std::vector<std::pair<int, int>> ragged = {{0, 65}, {16, 100}, {200, 130}};
  for (int window : {1, 17, 120})
    for (float cap : {0.0f, 1.5f}) {
      for (int rep : {1, 4, 8}) {
        AttnCase c{2 * rep, 2, rep == 4 ? 128 : 64, 16, decode, window, cap};
        for (int kind : {0, 4}) RunAttention(c, kind, rng_);
        AttnCase p{2 * rep, 2, rep == 8 ? 128 : 64, 16, ragged, window, cap};
        RunAttention(p, 3, rng_);
      }
      RunAttention(AttnCase{8, 1, 256, 16, decode, window, cap}, 0, rng_);
    }
}

// Attention sinks (gpt-oss): a logit per query head in its softmax's
// denominator, the max taken over it too. Both kernels, the decode launch
// shapes (one split, as many as possible, device-side splits: the combine
// kernel adds the sink), GQA groups of 1, 4 and 8, with windows
// and soft-caps (the sink itself is not capped). The sinks span the
// scores' range (about N(0, 1) here) and beyond: one far above every score
// (the output shrinks to ~e^-9 of itself: a sink left out of the max would
// overflow nothing but one added to the numerator would show) and one far
// below (no effect).
TEST_F(CudaKernels, AttentionSinks) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> decode = {{0, 1}, {15, 1}, {100, 1}, {1000, 1}, {37, 5}};
  const std::vector<std::pair<int, int>> ragged = {{0, 1}, {0, 65}, {16, 100}, {200, 130}};
  std::normal_distribution<float> nd(0.0f, 1.5f);
  auto sinks = [&](int n) {
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng_);
    v[0] = 9.0f;
    if (n > 1) v[n - 1] = -30.0f;
    return v;
  };
  // (rep, head_dim): a short sweep (CI time: the other attention tests sweep
  // the shapes; the sink only touches the normalisation)
  for (auto [rep, hd] : {std::pair{1, 64}, std::pair{4, 128}, std::pair{8, 64}}) {
    const int hq = 2 * rep;
    for (int kind : {1, 2, 5}) RunAttention(AttnCase{hq, 2, hd, 16, decode, 0, 0.0f, sinks(hq)}, kind, rng_);
    RunAttention(AttnCase{hq, 2, hd, 16, ragged, 0, 0.0f, sinks(hq)}, 3, rng_);
  }
  // windows and soft-caps; head_dim 256 and a scalar-load head_dim (decode)
  RunAttention(AttnCase{8, 2, 64, 16, decode, 17, 1.5f, sinks(8)}, 0, rng_);
  RunAttention(AttnCase{8, 2, 64, 16, decode, 17, 0.0f, sinks(8)}, 4, rng_);
  RunAttention(AttnCase{8, 2, 64, 16, ragged, 17, 1.5f, sinks(8)}, 3, rng_);
  RunAttention(AttnCase{8, 2, 128, 16, ragged, 120, 0.0f, sinks(8)}, 3, rng_);
  RunAttention(AttnCase{8, 1, 256, 16, decode, 0, 0.0f, sinks(8)}, 2, rng_);
  RunAttention(AttnCase{6, 3, 18, 16, decode, 0, 0.0f, sinks(6)}, 1, rng_);
}

// The KV cache types (llm_ctx_params.kv_type) on CUDA: F16, Q8_0, Q4_0 and
// FP8 E4M3 pools read by both attention kernels, each launch shape of the decode
// kernel, the scalar load path (head_dim 18), block size 1 (Q8_0 tiles
// 2-aligned: head_dim 18 * 1 + 4; Q4_0 rows of 18-byte blocks), windows and
// soft-caps. The reference decodes the pool's rows with the KV stream's
// decoder (kvstate::DecodeKvRow: GGUF's Q4_0 block, the CPU pool's rule);
// a Q4_0 pool's rows are the rotated ones, which attention reads as any
// others (the rotation of q and of the output is tested apart).
TEST_F(CudaKernels, AttentionKvTypes) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> decode = {{0, 1}, {15, 1}, {16, 1}, {1000, 1}, {37, 5}};
  const std::vector<std::pair<int, int>> ragged = {{0, 1}, {0, 65}, {16, 100}, {15, 17}};
  for (int32_t elem : {kKvF16, kKvQ8, kKvQ4, kKvFp8}) {
    for (int hd : {64, 128})
      for (int kind : {0, 1, 4}) RunAttention(AttnCase{8, 2, hd, 16, decode}, kind, rng_, elem);
    if (elem != kKvQ4 && elem != kKvFp8) {  // Q4_0 and FP8 rows are whole 32-value blocks
      RunAttention(AttnCase{8, 4, 8, 16, decode}, 0, rng_, elem);  // head_dim 8
      RunAttention(AttnCase{6, 3, 18, 1, decode}, 0, rng_, elem);  // scalar loads, block size 1
    } else {
      RunAttention(AttnCase{4, 2, 32, 1, decode}, 1, rng_, elem);  // head_dim 32, block size 1 (2-aligned tiles)
    }
    RunAttention(AttnCase{16, 1, 256, 16, decode}, 2, rng_, elem); // head_dim 256
    RunAttention(AttnCase{8, 2, 64, 16, decode, 17, 1.5f}, 4, rng_, elem);
    for (int hd : {64, 128}) RunAttention(AttnCase{8, 2, hd, 16, ragged}, 3, rng_, elem);
    RunAttention(AttnCase{8, 2, 64, 8, ragged, 17, 1.5f}, 3, rng_, elem);
  }
}

// K and V of two types (llm_ctx_params.kv_type_v): each side's tiles of
// its own size, read by its own type, by the decode kernel (vector and
// scalar loads, split and dynamic) and the prefill kernel, against the
// double reference of the values the pool holds (DecodeKvRow per side).
// A side read in the other's type or tile size is off by far more than
// the 1e-2 bound.
TEST_F(CudaKernels, AttentionMixedKvTypes) {
  SCOPED_TRACE(Seed());
  const std::vector<std::pair<int, int>> decode = {{0, 1}, {15, 1}, {16, 1}, {1000, 1}, {37, 5}};
  const std::vector<std::pair<int, int>> ragged = {{0, 1}, {0, 65}, {16, 100}, {15, 17}};
  const int32_t pairs[][2] = {{kKvQ8, kKvF16}, {kKvF16, kKvQ4}, {kKvQ4, kKvQ8}, {kKvBf16, kKvFp8}, {kKvFp8, kKvBf16}};
  for (const auto& [k, v] : pairs) {
    for (int kind : {0, 1, 4}) RunAttention(AttnCase{8, 2, 64, 16, decode}, kind, rng_, k, v);
    RunAttention(AttnCase{4, 2, 32, 8, decode}, 1, rng_, k, v);  // block size 8: tiles of unlike sizes
    for (int hd : {64, 128}) RunAttention(AttnCase{8, 2, hd, 16, ragged}, 3, rng_, k, v);
  }
  RunAttention(AttnCase{6, 3, 18, 1, decode}, 0, rng_, kKvQ8, kKvF16);  // scalar loads (head_dim 18)
  RunAttention(AttnCase{6, 3, 18, 1, decode}, 0, rng_, kKvBf16, kKvQ8);
}

// With K and V of two types, K's plane can leave V's tiles (or the next
// layer's K) off the alignment their accesses need: Q8_0 K tiles of 36
// bytes before F16 V at block size 1 put V at 72 bytes, where the 16-byte
// loads fault on a GPU. Every block size that is a multiple of 8 lays out
// every pair aligned, one type any block size; the three launchers refuse a
// misaligned view (before the empty launch they would otherwise accept).
TEST_F(CudaKernels, MixedKvPlanesAlignedOrRefused) {
  const int32_t types[] = {kKvBf16, kKvF16, kKvQ8, kKvQ4, kKvFp8};
  for (int32_t k : types)
    for (int32_t v : types)
      for (int hd : {32, 64, 96, 128})
        for (int hkv : {1, 2, 3, 8}) {
          SCOPED_TRACE(std::string(ElemName(k)) + "/" + ElemName(v) + " head_dim " + std::to_string(hd) + " n_head_kv " +
                       std::to_string(hkv));
          for (int bs : {8, 16, 24, 40}) EXPECT_TRUE((KvPoolLayout{3, hkv, hd, bs, k, v}.Aligned())) << bs;
          for (int bs : {1, 2, 3, 5, 7}) EXPECT_TRUE((KvPoolLayout{3, hkv, hd, bs, k, k}.Aligned())) << bs;
        }
  for (int hd : {18, 22, 50})  // element-wise accesses: BF16/F16 2-aligned, Q8_0 any
    for (int bs : {1, 3})
      EXPECT_TRUE((KvPoolLayout{3, 3, hd, bs, kKvQ8, kKvF16}.Aligned())) << hd << " " << bs;
  EXPECT_FALSE((KvPoolLayout{2, 2, 32, 1, kKvQ8, kKvF16}.Aligned()));  // V at 72
  EXPECT_FALSE((KvPoolLayout{2, 1, 32, 1, kKvF16, kKvQ4}.Aligned()));  // layer 1's F16 K at 82

  for (const int bs : {1, 8}) {
    SCOPED_TRACE("block size " + std::to_string(bs));
    PagedBatch b{4, 1, 32, bs, {}, kKvQ8, kKvF16};  // layer 1's V at 136 bytes
    b.Build(rng_);
    Dev<uint8_t> d_pool(b.pool_bytes());
    ASSERT_TRUE(d_pool.ok());
    const PagedKv kv = b.View(d_pool.get());
    const cudaError_t want = bs == 1 ? cudaErrorInvalidValue : cudaSuccess;
    EXPECT_EQ(kv.Aligned(32), bs != 1);
    DecodeAttnParams d;
    d.n_head = 4;
    d.n_head_kv = 1;
    d.head_dim = 32;
    d.kv = kv;
    EXPECT_EQ(LaunchDecodeAttention(d, nullptr, 0, nullptr), want);
    PrefillAttnParams pf;
    pf.n_head = 4;
    pf.n_head_kv = 1;
    pf.head_dim = 64;
    PagedBatch b64{4, 1, 64, bs, {}, kKvQ8, kKvF16};  // at 264
    b64.Build(rng_);
    pf.kv = b64.View(d_pool.get());
    EXPECT_EQ(LaunchPrefillAttention(pf, nullptr), want);
    RopeKvParams r;
    r.n_head = 4;
    r.n_head_kv = 1;
    r.head_dim = 32;
    r.n_pairs = 16;
    r.kv = kv;
    EXPECT_EQ(LaunchRopeStoreKv(r, nullptr), want);
  }
}

// ================================================================ Q4_0 pool: block rule, rotation

#include "data/kv_q4_vectors.inc"  // gguf's Q4_0 quantizer on hostile blocks (test_kv_q4.cpp's)

// The KV store's Q4_0 quantizer writes the bytes gguf's reference writes
// (zeros, +m/-m ties, rounding boundaries, F16's range): each vector is a
// token's K row and the next one its V row, RoPE the identity (cos 1,
// sin 0) and no rotation, so the rows reach the quantizer as given.
TEST_F(CudaKernels, RopeStoreKvQ4MatchesGgufBlocks) {
  const int n = kKvQ4Vectors, hd = 32;
  PagedBatch b{1, 1, hd, 16, {{3, n}}, kKvQ4};
  b.Build(rng_);
  std::vector<float> qkv(static_cast<size_t>(n) * 3 * hd), cs(static_cast<size_t>(n) * 16 * 2);
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < hd; ++d) qkv[t * 3 * hd + d] = Normal();
    std::memcpy(qkv.data() + t * 3 * hd + hd, kKvQ4In[t], hd * 4);
    std::memcpy(qkv.data() + t * 3 * hd + 2 * hd, kKvQ4In[(t + 1) % n], hd * 4);
    for (int i = 0; i < 16; ++i) {
      cs[(t * 16 + i) * 2] = 1.0f;
      cs[(t * 16 + i) * 2 + 1] = 0.0f;
    }
  }
  Dev<float> d_qkv(qkv.size()), d_cs(cs.size());
  Dev<int32_t> d_seq(n), d_pos(n), d_tab(b.tables.size());
  Dev<SeqDesc> d_desc(b.desc.size());
  Dev<B16> d_q(static_cast<size_t>(n) * hd);
  Dev<uint8_t> d_pool(b.pool_bytes());
  d_qkv.Upload(qkv);
  d_cs.Upload(cs);
  d_seq.Upload(b.tok_seq);
  d_pos.Upload(b.tok_pos);
  d_tab.Upload(b.tables);
  d_desc.Upload(b.desc);
  RopeKvParams p;
  p.qkv = d_qkv.get();
  p.cos_sin = d_cs.get();
  p.tok_seq = d_seq.get();
  p.tok_pos = d_pos.get();
  p.seqs = d_desc.get();
  p.block_tables = d_tab.get();
  p.q_out = reinterpret_cast<bf16*>(d_q.get());
  p.kv = b.View(d_pool.get());
  p.n_tok = n;
  p.n_head = 1;
  p.n_head_kv = 1;
  p.head_dim = hd;
  p.n_pairs = 16;
  LAUNCH_OK(LaunchRopeStoreKv(p, 0));
  const std::vector<uint8_t> pool = d_pool.Download();
  for (int t = 0; t < n; ++t)
    for (int v = 0; v < 2; ++v) {
      const std::vector<int64_t> bytes = b.RowBytes(1, v, 0, b.tok_pos[t], 0);
      ASSERT_EQ(bytes.size(), 18u);
      const uint8_t* want = kKvQ4Out[(t + v) % n];
      for (int i = 0; i < 18; ++i)
        ASSERT_EQ(pool[bytes[i]], want[i]) << "vector " << (t + v) % n << " byte " << i << (v ? " (V)" : " (K)");
    }
}

// ================================================================ FP8 E4M3 pool: encoder and widening

#include "data/fp8_e4m3_vectors.inc"  // ml_dtypes' float8_e4m3fn (test_fp8.cpp's)

// The KV store's E4M3 encoder writes ml_dtypes' bytes: each K and V row is
// 31 of the table's inputs (those of magnitude <= 448) and 448 itself, so
// the block's scale is exactly 1 and each byte is the table's rounding of
// its input (midpoints, a hair either side, subnormals), and two infinities
// saturate to +-448; RoPE the identity.
TEST_F(CudaKernels, RopeStoreKvFp8MatchesMlDtypes) {
  std::vector<uint32_t> in;
  std::vector<uint8_t> want;
  for (int i = 0; i < kE4M3Cases; ++i) {
    float x;
    std::memcpy(&x, &kE4M3In[i], 4);
    if (std::fabs(x) > 448.0f) continue;
    in.push_back(kE4M3In[i]);
    want.push_back(kE4M3Out[i]);
  }
  const int hd = 32, n = static_cast<int>((in.size() + 61) / 62);
  PagedBatch b{1, 1, hd, 16, {{3, n}}, kKvFp8};
  b.Build(rng_);
  std::vector<float> qkv(static_cast<size_t>(n) * 3 * hd), cs(static_cast<size_t>(n) * 16 * 2);
  std::vector<uint8_t> codes(static_cast<size_t>(n) * 2 * hd);
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < hd; ++d) qkv[t * 3 * hd + d] = Normal();
    for (int v = 0; v < 2; ++v)
      for (int d = 0; d < hd; ++d) {
        const size_t i = static_cast<size_t>(t) * 62 + v * 31 + d;
        float x = 448.0f;
        uint8_t c = 0x7e;
        if (d < 31) {
          const uint32_t bits = i < in.size() ? in[i] : 0u;
          std::memcpy(&x, &bits, 4);
          c = i < in.size() ? want[i] : 0;
        }
        if (t == n - 1 && v == 1 && d < 2) {  // infinities saturate (the scale comes from the finite values)
          x = d == 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
          c = d == 0 ? 0x7e : 0xfe;
        }
        qkv[t * 3 * hd + (1 + v) * hd + d] = x;
        codes[(t * 2 + v) * hd + d] = c;
      }
    for (int i = 0; i < 16; ++i) {
      cs[(t * 16 + i) * 2] = 1.0f;
      cs[(t * 16 + i) * 2 + 1] = 0.0f;
    }
  }
  Dev<float> d_qkv(qkv.size()), d_cs(cs.size());
  Dev<int32_t> d_seq(n), d_pos(n), d_tab(b.tables.size());
  Dev<SeqDesc> d_desc(b.desc.size());
  Dev<B16> d_q(static_cast<size_t>(n) * hd);
  Dev<uint8_t> d_pool(b.pool_bytes());
  d_qkv.Upload(qkv);
  d_cs.Upload(cs);
  d_seq.Upload(b.tok_seq);
  d_pos.Upload(b.tok_pos);
  d_tab.Upload(b.tables);
  d_desc.Upload(b.desc);
  RopeKvParams p;
  p.qkv = d_qkv.get();
  p.cos_sin = d_cs.get();
  p.tok_seq = d_seq.get();
  p.tok_pos = d_pos.get();
  p.seqs = d_desc.get();
  p.block_tables = d_tab.get();
  p.q_out = reinterpret_cast<bf16*>(d_q.get());
  p.kv = b.View(d_pool.get());
  p.n_tok = n;
  p.n_head = 1;
  p.n_head_kv = 1;
  p.head_dim = hd;
  p.n_pairs = 16;
  LAUNCH_OK(LaunchRopeStoreKv(p, 0));
  const std::vector<uint8_t> pool = d_pool.Download();
  for (int t = 0; t < n; ++t)
    for (int v = 0; v < 2; ++v) {
      const std::vector<int64_t> bytes = b.RowBytes(1, v, 0, b.tok_pos[t], 0);
      ASSERT_EQ(bytes.size(), 36u);
      float scale;
      const uint8_t sb[4] = {pool[bytes[0]], pool[bytes[1]], pool[bytes[2]], pool[bytes[3]]};
      std::memcpy(&scale, sb, 4);
      ASSERT_EQ(scale, 1.0f) << "token " << t << (v ? " (V)" : " (K)");
      for (int d = 0; d < hd; ++d)
        ASSERT_EQ(pool[bytes[4 + d]], codes[(t * 2 + v) * hd + d])
            << "token " << t << (v ? " V" : " K") << " value " << d << " (input "
            << qkv[t * 3 * hd + (1 + v) * hd + d] << ")";
    }
}

// Both attention kernels widen every E4M3 byte to its value exactly (the
// emulator's twin of cvt.rn.f16x2.e4m3x2 there, the instruction on a GPU):
// one key, so each head's output is its kv head's V row, whose blocks hold
// scale 1 and the 254 non-NaN bytes (over 256 dims: one kv head of 256 for
// the decode kernel, two of 128 for prefill); every value is exact in bf16.
TEST_F(CudaKernels, AttentionWidensEveryFp8Byte) {
  for (int kind : {1, 3}) {
    SCOPED_TRACE(kind == 1 ? "decode" : "prefill");
    const int hd = kind == 1 ? 256 : 128, Hkv = 256 / hd, Hq = 2 * Hkv;
    PagedBatch b{Hq, Hkv, hd, 16, {{0, 1}}, kKvFp8};
    b.Build(rng_);
    std::vector<uint8_t> pool(b.pool_bytes(), 0);
    std::vector<float> krow(hd);
    std::vector<uint8_t> code(256);
    for (int i = 0; i < 256; ++i) code[i] = (i & 0x7f) == 0x7f ? static_cast<uint8_t>(i ^ 0x7f) : static_cast<uint8_t>(i);
    for (int g = 0; g < Hkv; ++g) {
      for (auto& x : krow) x = Normal();
      b.SetRow(pool, 1, false, 0, 0, g, krow.data());
      const int64_t vt = b.Tile(1, true, 0, 0, g);
      for (int blk = 0; blk < hd / 32; ++blk) {
        const float one = 1.0f;
        std::memcpy(pool.data() + vt + blk * 36, &one, 4);
        std::memcpy(pool.data() + vt + blk * 36 + 4, code.data() + g * hd + blk * 32, 32);
      }
    }
    std::vector<B16> q(static_cast<size_t>(Hq) * hd);
    for (auto& x : q) x = F32ToBf16(Normal());
    Dev<uint8_t> d_pool(pool.size());
    Dev<B16> d_q(q.size()), d_out(q.size());
    Dev<int32_t> d_seq(1), d_pos(1), d_tab(b.tables.size()), d_items(1);
    Dev<SeqDesc> d_desc(b.desc.size());
    d_pool.Upload(pool);
    d_q.Upload(q);
    d_seq.Upload(b.tok_seq);
    d_pos.Upload(b.tok_pos);
    d_tab.Upload(b.tables);
    d_desc.Upload(b.desc);
    d_items.Upload(std::vector<int32_t>{0});
    if (kind == 1) {
      DecodeAttnParams p;
      p.q = reinterpret_cast<const bf16*>(d_q.get());
      p.out = reinterpret_cast<bf16*>(d_out.get());
      p.items = d_items.get();
      p.n_items = 1;
      p.tok_seq = d_seq.get();
      p.tok_pos = d_pos.get();
      p.seqs = d_desc.get();
      p.block_tables = d_tab.get();
      p.kv = b.View(d_pool.get());
      p.n_head = Hq;
      p.n_head_kv = Hkv;
      p.head_dim = hd;
      p.scale = 0.0625f;
      PlanDecodeAttention(1, Hkv, hd, 1, 132, 1, &p.n_splits, &p.keys_per_split);
      const size_t ws_bytes = DecodeAttnWorkspaceBytes(1, Hq, hd);
      Dev<float> ws(ws_bytes / sizeof(float) + 1);
      LAUNCH_OK(LaunchDecodeAttention(p, ws.get(), ws_bytes, 0));
    } else {
      Dev<PrefillWork> d_work(1);
      d_work.Upload(std::vector<PrefillWork>{{0, 0}});
      PrefillAttnParams p;
      p.q = reinterpret_cast<const bf16*>(d_q.get());
      p.out = reinterpret_cast<bf16*>(d_out.get());
      p.work = d_work.get();
      p.n_work = 1;
      p.seqs = d_desc.get();
      p.block_tables = d_tab.get();
      p.kv = b.View(d_pool.get());
      p.n_head = Hq;
      p.n_head_kv = Hkv;
      p.head_dim = hd;
      p.scale = 0.0625f;
      LAUNCH_OK(LaunchPrefillAttention(p, 0));
    }
    const std::vector<B16> out = d_out.Download();
    for (int h = 0; h < Hq; ++h)
      for (int d = 0; d < hd; ++d) {
        const uint8_t c = code[(h / 2) * hd + d];
        float want;
        std::memcpy(&want, &kE4M3Value[c], 4);
        // as values: -0 comes out of the weighted sum as +0
        ASSERT_EQ(F(out[static_cast<size_t>(h) * hd + d]), want)
            << "head " << h << " byte 0x" << std::hex << int{c};
      }
  }
}

// The output's rotation back (hadamard.cuh) is the CPU's HadamardRotate of
// the bf16 values, rounded once: bit for bit, at the sizes kv_rotation.h
// picks (64 for V; K's 64..256 use the same butterflies).
TEST_F(CudaKernels, HadamardBf16IsTheCpuRotation) {
  SCOPED_TRACE(Seed());
  for (int n : {2, 64, 128, 256}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<B16> x = RandomBf16(static_cast<size_t>(37) * 256, 3.0f);
    Dev<B16> d_x(x.size());
    d_x.Upload(x);
    LAUNCH_OK(LaunchHadamardBf16(reinterpret_cast<bf16*>(d_x.get()), static_cast<int64_t>(x.size()), n, 0));
    const std::vector<B16> got = d_x.Download();
    std::vector<float> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = F(x[i]);
    HadamardRotate(ref.data(), static_cast<int64_t>(ref.size()), n);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], F32ToBf16(ref[i])) << "value " << i;
  }
}

// What a Q4_0 pool cannot take is refused before any launch: rows that are
// not whole blocks, rotations that do not tile a row or rotate a pool of
// another type, chunks that are not powers of two.
TEST_F(CudaKernels, Q4RefusesWhatDoesNotFit) {
  RopeKvParams p;
  int32_t dummy = 0;
  p.n_tok = 1;
  p.n_head = 2;
  p.n_head_kv = 1;
  p.head_dim = 48;
  p.n_pairs = 8;
  p.kv.block_size = 16;
  p.kv.elem = kKvQ4;
  p.tok_seq = p.tok_pos = p.block_tables = &dummy;
  EXPECT_EQ(LaunchRopeStoreKv(p, 0), cudaErrorInvalidValue) << "head_dim 48: one and a half blocks";
  p.head_dim = 64;
  p.rot_k = 48;
  EXPECT_EQ(LaunchRopeStoreKv(p, 0), cudaErrorInvalidValue) << "rot_k 48";
  p.rot_k = 128;
  EXPECT_EQ(LaunchRopeStoreKv(p, 0), cudaErrorInvalidValue) << "rot_k past head_dim";
  p.rot_k = 64;
  p.kv.elem = kKvBf16;
  EXPECT_EQ(LaunchRopeStoreKv(p, 0), cudaErrorInvalidValue) << "rotation of a BF16 pool";
  DecodeAttnParams d;
  d.n_items = 1;
  d.n_head = 2;
  d.n_head_kv = 1;
  d.head_dim = 16;
  d.kv.block_size = 16;
  d.kv.elem = kKvQ4;
  EXPECT_EQ(LaunchDecodeAttention(d, nullptr, 0, 0), cudaErrorInvalidValue) << "decode, head_dim 16";
  PrefillAttnParams f;
  f.n_work = 1;
  f.n_head = 2;
  f.n_head_kv = 1;
  f.head_dim = 64;
  f.kv.block_size = 16;
  f.kv.elem = 5;  // the wire's unrotated Q4_0: never a pool type
  EXPECT_EQ(LaunchPrefillAttention(f, 0), cudaErrorInvalidValue) << "elem 5";
  B16 x[96] = {};
  EXPECT_EQ(LaunchHadamardBf16(reinterpret_cast<bf16*>(x), 96, 48, 0), cudaErrorInvalidValue) << "n 48";
  EXPECT_EQ(LaunchHadamardBf16(reinterpret_cast<bf16*>(x), 96, 64, 0), cudaErrorInvalidValue) << "96 % 64";
}

// ================================================================ sampling
//
// Oracle: the host Sampler (src/sample/). Greedy rows must give its token
// exactly; sampled rows a token its Distribution() gives non-zero probability,
// with frequencies over many draws matching those probabilities; logprobs
// match TokenLogprob on the raw logits.

struct SampleCase {
  SamplingParams p;
  std::vector<int32_t> history;
  uint64_t step = 0;
};

// The (token, count) list of the host's penalty window (Sampler::ApplyPenalties).
void PenaltyList(const SamplingParams& p, const std::vector<int32_t>& h, int32_t V, std::vector<int32_t>* tok,
                 std::vector<int32_t>* cnt) {
  const bool any = p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!any || p.penalty_last_n == 0 || h.empty()) return;
  size_t n = h.size();
  if (p.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(p.penalty_last_n));
  std::vector<int32_t> w(h.end() - static_cast<std::ptrdiff_t>(n), h.end());
  std::sort(w.begin(), w.end());
  for (size_t i = 0; i < w.size();) {
    size_t j = i + 1;
    while (j < w.size() && w[j] == w[i]) ++j;
    if (w[i] >= 0 && w[i] < V) {
      tok->push_back(w[i]);
      cnt->push_back(static_cast<int32_t>(j - i));
    }
    i = j;
  }
}

// Runs LaunchSample on rows (n_rows, V) with cases[r]; tokens and logprobs out.
void DeviceSample(const std::vector<float>& logits, int32_t V, const std::vector<SampleCase>& cases,
                  std::vector<int32_t>* tokens, std::vector<float>* logprobs) {
  const int32_t R = static_cast<int32_t>(cases.size());
  std::vector<SampleRowParams> rows(R);
  std::vector<int32_t> ptok, pcnt;
  for (int32_t r = 0; r < R; ++r) {
    const SamplingParams& p = cases[r].p;
    SampleRowParams& x = rows[r];
    x.temperature = p.temperature;
    x.top_k = p.top_k;
    x.top_p = p.top_p;
    x.min_p = p.min_p;
    x.repetition_penalty = p.repetition_penalty;
    x.frequency_penalty = p.frequency_penalty;
    x.presence_penalty = p.presence_penalty;
    x.pen_offset = static_cast<int32_t>(ptok.size());
    PenaltyList(p, cases[r].history, V, &ptok, &pcnt);
    x.n_pen = static_cast<int32_t>(ptok.size()) - x.pen_offset;
    x.reserved = 0;
    x.seed = p.seed;
    x.step = cases[r].step;
  }
  ptok.push_back(-1);  // never empty
  pcnt.push_back(0);
  Dev<float> d_l(logits.size()), d_raw(ptok.size()), d_lp(R);
  Dev<SampleRowParams> d_p(R);
  Dev<int32_t> d_pt(ptok.size()), d_pc(pcnt.size()), d_tok(R);
  ASSERT_TRUE(d_l.ok() && d_p.ok());
  d_l.Upload(logits);
  d_p.Upload(rows);
  d_pt.Upload(ptok);
  d_pc.Upload(pcnt);
  SampleArgs a;
  a.logits = d_l.get();
  a.n_rows = R;
  a.n_vocab = V;
  a.params = d_p.get();
  a.pen_tokens = d_pt.get();
  a.pen_counts = d_pc.get();
  a.pen_raw = d_raw.get();
  a.tokens = d_tok.get();
  a.logprobs = d_lp.get();
  LAUNCH_OK(LaunchSample(a, 0));
  *tokens = d_tok.Download();
  *logprobs = d_lp.Download();
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST_F(CudaKernels, SampleGreedyWithPenaltiesMatchesHost) {
  SCOPED_TRACE(Seed());
  const int32_t V = 32000, R = 24;
  std::vector<float> logits = RandomF32(static_cast<size_t>(R) * V, 3.0f);
  std::vector<SampleCase> cases(R);
  for (int32_t r = 0; r < R; ++r) {
    SamplingParams p = Greedy();
    if (r % 2 == 1) p.top_k = 1, p.temperature = 0.8f;  // the other greedy trigger
    if (r % 3 != 0) {
      p.repetition_penalty = r % 3 == 1 ? 1.3f : 0.7f;
      p.frequency_penalty = 0.25f * static_cast<float>(r % 5) - 0.5f;
      p.presence_penalty = r % 4 == 0 ? 1.5f : -0.25f;
      p.penalty_last_n = r % 6 == 2 ? -1 : 48;
    }
    cases[r].p = p;
    float* row = logits.data() + static_cast<size_t>(r) * V;
    // The penalised tokens lead, so penalties decide the argmax.
    for (int i = 0; i < 80; ++i) {
      const int32_t t = Uniform(0, 200);
      cases[r].history.push_back(t);
      row[t] = 9.0f + 0.01f * static_cast<float>(t % 7);
    }
    cases[r].history.push_back(V + 5);  // outside the vocabulary: ignored
  }
  float* r5 = logits.data() + static_cast<size_t>(5) * V;  // NaN never wins; a tie goes to the lower id
  r5[3] = NAN;
  r5[V - 1] = 50.0f;
  r5[V - 2] = 50.0f;
  float* r6 = logits.data() + static_cast<size_t>(6) * V;  // every logit -inf: token 0
  for (int32_t j = 0; j < V; ++j) r6[j] = -INFINITY;
  cases[6].history.clear();

  std::vector<int32_t> tokens;
  std::vector<float> lps;
  DeviceSample(logits, V, cases, &tokens, &lps);
  if (HasFatalFailure()) return;
  for (int32_t r = 0; r < R; ++r) {
    std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(r) * V,
                           logits.begin() + static_cast<std::ptrdiff_t>(r + 1) * V);
    const std::vector<float> raw = row;
    Sampler s(cases[r].p, V);
    const int32_t want = s.Sample(row.data(), cases[r].history);
    EXPECT_EQ(tokens[r], want) << "row " << r;
    const float lp = TokenLogprob(raw.data(), V, tokens[r]);
    if (std::isinf(lp)) {
      EXPECT_TRUE(std::isinf(lps[r]) && lps[r] < 0) << "row " << r;
    } else {
      EXPECT_NEAR(lps[r], lp, 1e-3f * std::max(1.0f, std::fabs(lp))) << "row " << r;
    }
  }
}

TEST_F(CudaKernels, SampleKeepsToTheHostSupport) {
  SCOPED_TRACE(Seed());
  const int32_t V = 50257, R = 64;
  std::vector<float> logits = RandomF32(static_cast<size_t>(R) * V, 2.5f);
  std::vector<SampleCase> cases(R);
  for (int32_t r = 0; r < R; ++r) {
    SamplingParams p;
    p.temperature = 0.2f + 0.1f * static_cast<float>(r % 12);
    p.top_k = r % 4 == 0 ? 0 : r % 4 == 1 ? 40 : r % 4 == 2 ? 5000 : V + 10;
    p.top_p = r % 5 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(r % 5);
    p.min_p = r % 3 == 0 ? 0.0f : 0.02f * static_cast<float>(r % 3);
    p.repetition_penalty = r % 2 ? 1.1f : 1.0f;
    p.frequency_penalty = r % 7 == 1 ? 0.5f : 0.0f;
    p.presence_penalty = r % 7 == 2 ? 0.5f : 0.0f;
    p.seed = 1000 + static_cast<uint64_t>(r);
    cases[r].p = p;
    cases[r].step = static_cast<uint64_t>(r) * 3;
    for (int i = 0; i < 100; ++i) cases[r].history.push_back(Uniform(0, V - 1));
    if (r == 7) logits[static_cast<size_t>(r) * V + 11] = NAN;  // sampled rows treat NaN as -inf
  }
  std::vector<int32_t> tokens;
  std::vector<float> lps;
  DeviceSample(logits, V, cases, &tokens, &lps);
  if (HasFatalFailure()) return;
  std::vector<float> probs(V);
  for (int32_t r = 0; r < R; ++r) {
    std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(r) * V,
                           logits.begin() + static_cast<std::ptrdiff_t>(r + 1) * V);
    const float lp = TokenLogprob(row.data(), V, tokens[r]);
    Sampler s(cases[r].p, V);
    s.Distribution(row.data(), cases[r].history, probs.data());
    ASSERT_GE(tokens[r], 0);
    ASSERT_LT(tokens[r], V);
    EXPECT_GT(probs[tokens[r]], 0.0f) << "row " << r << " drew token " << tokens[r] << " the host filters out";
    EXPECT_NEAR(lps[r], lp, 1e-3f * std::max(1.0f, std::fabs(lp))) << "row " << r;
  }
  // Deterministic: the same rows again, in reverse order, give the same tokens.
  std::vector<SampleCase> rev(cases.rbegin(), cases.rend());
  std::vector<float> rev_logits;
  for (int32_t r = R - 1; r >= 0; --r)
    rev_logits.insert(rev_logits.end(), logits.begin() + static_cast<std::ptrdiff_t>(r) * V,
                      logits.begin() + static_cast<std::ptrdiff_t>(r + 1) * V);
  std::vector<int32_t> tokens2;
  DeviceSample(rev_logits, V, rev, &tokens2, &lps);
  if (HasFatalFailure()) return;
  for (int32_t r = 0; r < R; ++r) EXPECT_EQ(tokens2[R - 1 - r], tokens[r]) << "row " << r;
}

// Frequencies over many (seed, step) draws against the host's probabilities.
TEST_F(CudaKernels, SampleFrequenciesMatchHostDistribution) {
  SCOPED_TRACE(Seed());
#if LLM_CUDA_EMULATED
  // The emulator resumes each of a row's 512 threads at every barrier and
  // shuffle (~40k fiber switches a row, ~1 ms): a twentieth of the draws; the
  // tolerance below widens with 1/sqrt(R).
  const int32_t V = 96, R = 2000;
#else
  const int32_t V = 96, R = 40000;
#endif
  std::vector<float> base = RandomF32(V, 1.5f);
  base[10] = base[11] = base[12] = 2.5f;  // ties across the top-k / top-p cuts
  struct Params {
    float t;
    int32_t k;
    float top_p, min_p, rep;
  };
  for (const Params& c : {Params{0.7f, 20, 0.9f, 0.02f, 1.2f}, Params{1.0f, 0, 1.0f, 0.0f, 1.0f},
                          Params{1.5f, 3, 1.0f, 0.0f, 1.0f}, Params{0.9f, 0, 0.6f, 0.0f, 1.0f},
                          Params{1.2f, 50, 0.95f, 0.1f, 1.0f}}) {
    SCOPED_TRACE("T " + std::to_string(c.t) + " k " + std::to_string(c.k) + " top_p " + std::to_string(c.top_p));
    SamplingParams p;
    p.temperature = c.t;
    p.top_k = c.k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.repetition_penalty = c.rep;
    p.seed = 42;
    const std::vector<int32_t> history = {10, 3, 3, 50};
    std::vector<SampleCase> cases(R);
    std::vector<float> logits;
    logits.reserve(static_cast<size_t>(R) * V);
    for (int32_t r = 0; r < R; ++r) {
      cases[r].p = p;
      cases[r].history = history;
      cases[r].step = static_cast<uint64_t>(r);
      logits.insert(logits.end(), base.begin(), base.end());
    }
    std::vector<int32_t> tokens;
    std::vector<float> lps;
    DeviceSample(logits, V, cases, &tokens, &lps);
    if (HasFatalFailure()) return;
    std::vector<float> row = base, probs(V);
    Sampler s(p, V);
    s.Distribution(row.data(), history, probs.data());
    std::vector<double> freq(V, 0.0);
    for (int32_t t : tokens) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, V);
      freq[t] += 1.0 / R;
    }
    for (int32_t j = 0; j < V; ++j) {
      if (probs[j] == 0.0f) {
        EXPECT_EQ(freq[j], 0.0) << "token " << j << " is filtered out on the host";
      } else {
        const double sd = std::sqrt(probs[j] * (1.0 - probs[j]) / R);
        EXPECT_NEAR(freq[j], probs[j], 5 * sd + 1e-4) << "token " << j;
      }
    }
  }
}

TEST(CudaSampleUniform, IsAPureFunctionInUnitInterval) {
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const double u = SampleUniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  EXPECT_EQ(SampleUniform(1, 2), SampleUniform(1, 2));
  EXPECT_NE(SampleUniform(1, 2), SampleUniform(2, 1));
}

}  // namespace
}  // namespace llm::cuda

#endif  // LLM_HAVE_CUDA
