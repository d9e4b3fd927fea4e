// The Mixture-of-Experts kernels (kernels/moe_route, kernels/moe_matmul)
// against host references:
//   - the router: F32 rmsnorm, softmax, top-k (ties to the lower expert, a
//     planted exact tie included), renormalised or not, the shared-expert
//     scale; the CPU backend's algorithm (cpu/moe.cpp) in double;
//   - the grouping: order and slot inverse permutations, every pick in
//     exactly one work item of its expert, items within the tile, the
//     unused items marked;
//   - the experts' products, GEMV (items of <= 8 rows) and tiled GEMM
//     (items of 32), over experts uploaded by DeviceExperts in their block
//     format (pairs of types in one launch, lattice types included) or BF16,
//     each output within 1e-5 of sum |w x| of the double product of the CPU
//     backend's dequantized weights (quant_gemv's bound), outputs poisoned
//     (NaN) before the launch so a row left unwritten fails.
// The model-level comparison with the CPU backend is test_cuda_families'.
// Skips without CUDA (a GPU or the emulator).
#include <gtest/gtest.h>

#if !LLM_HAVE_CUDA

TEST(CudaMoe, SkippedWithoutCuda) { GTEST_SKIP() << "this build has no CUDA support (LLM_CUDA=OFF or no toolkit)"; }

#else

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/cuda_weights.h"
#include "model/gguf.h"  // TensorTypeName
#include "model/tensor_type.h"
#include "moe_matmul.cuh"
#include "moe_route.cuh"
#include "support/cuda_device_buffer.h"
#include "util/fp16.h"

namespace llm::cuda {
namespace {

// The host reference router (cpu/moe.cpp's algorithm, in double).
struct HostPick {
  std::vector<int32_t> expert;
  std::vector<double> weight, prob;  // prob: all NE softmax values
  double shexp = 0;
};
HostPick HostRoute(const float* x, const std::vector<float>& norm, const std::vector<float>& router,
                   const std::vector<float>* g, int E, int NE, int K, bool renorm, float eps) {
  double ss = 0;
  for (int d = 0; d < E; ++d) ss += static_cast<double>(x[d]) * x[d];
  const double inv = 1.0 / std::sqrt(ss / E + eps);
  std::vector<double> xs(E);
  for (int d = 0; d < E; ++d) xs[d] = x[d] * inv * norm[d];
  HostPick h;
  h.prob.resize(NE);
  double m = -1e300;
  for (int e = 0; e < NE; ++e) {
    double s = 0;
    for (int d = 0; d < E; ++d) s += xs[d] * router[static_cast<size_t>(e) * E + d];
    h.prob[e] = s;
    m = std::max(m, s);
  }
  double sum = 0;
  for (double& p : h.prob) sum += p = std::exp(p - m);
  for (double& p : h.prob) p /= sum;
  double chosen = 0;
  for (int j = 0; j < K; ++j) {
    int best = -1;
    for (int e = 0; e < NE; ++e)
      if (std::find(h.expert.begin(), h.expert.end(), e) == h.expert.end() && (best < 0 || h.prob[e] > h.prob[best]))
        best = e;
    h.expert.push_back(best);
    h.weight.push_back(h.prob[best]);
    chosen += h.prob[best];
  }
  if (renorm)
    for (double& w : h.weight) w /= chosen;
  if (g != nullptr) {
    double s = 0;
    for (int d = 0; d < E; ++d) s += xs[d] * (*g)[d];
    h.shexp = 1.0 / (1.0 + std::exp(-s));
  }
  return h;
}

class CudaMoe : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed_));
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(CudaMoe, RouterMatchesTheHostTopK) {
  for (const bool renorm : {true, false}) {
    SCOPED_TRACE(renorm ? "renormalised" : "not renormalised");
    const int E = 96, NE = 40, K = 4, T = 7;  // NE > 32: lanes own several experts
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(T) * E), norm(E), router(static_cast<size_t>(NE) * E), g(E);
    // Tokens around a common direction u; experts 5 and 33 have the same
    // router row, along u: a planted exact tie, the largest logit (~10
    // against N(0, 2) for the others) of every token.
    std::vector<float> u(E);
    for (float& v : u) v = nd(rng_);
    for (float& v : norm) v = 1.0f + 0.3f * nd(rng_);
    for (size_t i = 0; i < x.size(); ++i) x[i] = u[i % E] + 0.3f * nd(rng_);
    for (float& v : router) v = 0.2f * nd(rng_);
    for (float& v : g) v = 0.1f * nd(rng_);
    for (int d = 0; d < E; ++d) router[5 * E + d] = router[33 * E + d] = 0.1f * u[d] * norm[d];
    Dev<float> dx(x.size()), dn(E), dr(router.size()), dg(E), dw(T * K), ds(T);
    Dev<int32_t> de(T * K);
    dx.Upload(x);
    dn.Upload(norm);
    dr.Upload(router);
    dg.Upload(g);
    MoeRouteParams p;
    p.x = dx.get();
    p.norm = dn.get();
    p.eps = 1e-6f;
    p.router = dr.get();
    p.shexp_gate = dg.get();
    p.n_tok = T;
    p.n_embd = E;
    p.n_expert = NE;
    p.k = K;
    p.renorm = renorm;
    p.pick_expert = de.get();
    p.pick_weight = dw.get();
    p.shexp_scale = ds.get();
    CUDA_OK(LaunchMoeRoute(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<int32_t> ge = de.Download();
    const std::vector<float> gw = dw.Download(), gs = ds.Download();
    int ties = 0;
    for (int t = 0; t < T; ++t) {
      const HostPick h = HostRoute(x.data() + static_cast<size_t>(t) * E, norm, router, &g, E, NE, K, renorm, 1e-6f);
      for (int j = 0; j < K; ++j) {
        const int32_t e = ge[t * K + j];
        ASSERT_GE(e, 0);
        ASSERT_LT(e, NE);
        // Equal picks, or two experts the host finds within rounding of each other.
        if (e != h.expert[j]) {
          EXPECT_NEAR(h.prob[e], h.prob[h.expert[j]], 1e-6) << "token " << t << " pick " << j;
        }
        EXPECT_NEAR(gw[t * K + j], h.weight[j], 1e-5) << "token " << t << " pick " << j;
      }
      EXPECT_EQ(ge[t * K], 5) << "token " << t << ": the exact tie goes to the lower expert";
      EXPECT_EQ(ge[t * K + 1], 33) << "token " << t;
      ties += ge[t * K] == 5;
      EXPECT_NEAR(gs[t], h.shexp, 1e-5) << "token " << t;
    }
    EXPECT_EQ(ties, T);
  }
  MoeRouteParams bad;
  EXPECT_EQ(LaunchMoeRoute(bad, nullptr), cudaErrorInvalidValue);
  EXPECT_FALSE(MoeRouteShapeSupported(64, kMoeMaxExperts + 1, 2));
  EXPECT_FALSE(MoeRouteShapeSupported(16384, 8, 2));
}

// A token whose residual row is NaN (a fault upstream) routes to experts in
// range with NaN weights: NaN reaches the output, no write leaves the buffers.
TEST_F(CudaMoe, RouterKeepsNanTokensInBounds) {
  const int E = 64, NE = 40, K = 3, T = 2;
  std::vector<float> x(static_cast<size_t>(T) * E, 0.5f), norm(E, 1.0f), router(static_cast<size_t>(NE) * E, 0.01f);
  x[3] = NAN;  // token 0
  Dev<float> dx(x.size()), dn(E), dr(router.size()), dw(T * K);
  Dev<int32_t> de(T * K);
  dx.Upload(x);
  dn.Upload(norm);
  dr.Upload(router);
  MoeRouteParams p;
  p.x = dx.get();
  p.norm = dn.get();
  p.router = dr.get();
  p.n_tok = T;
  p.n_embd = E;
  p.n_expert = NE;
  p.k = K;
  p.pick_expert = de.get();
  p.pick_weight = dw.get();
  CUDA_OK(LaunchMoeRoute(p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<int32_t> e = de.Download();
  const std::vector<float> w = dw.Download();
  for (int j = 0; j < K; ++j) {
    EXPECT_GE(e[j], 0);
    EXPECT_LT(e[j], NE);
    EXPECT_TRUE(std::isnan(w[j])) << "pick " << j;
    EXPECT_FALSE(std::isnan(w[K + j])) << "token 1 pick " << j;  // the other token is unaffected
  }
}

// Picks of n_tok tokens, k distinct experts each, skewed (expert 0 popular,
// the last one never chosen).
std::vector<int32_t> RandomPicks(int n_tok, int NE, int K, std::mt19937_64& rng) {
  std::vector<int32_t> picks;
  std::vector<double> share(NE, 1.0);
  share[0] = 6.0;
  share[NE - 1] = 0.0;
  std::discrete_distribution<int> pick(share.begin(), share.end());
  for (int t = 0; t < n_tok; ++t) {
    std::vector<int32_t> mine;
    while (static_cast<int>(mine.size()) < K) {
      const int e = pick(rng);
      if (std::find(mine.begin(), mine.end(), e) == mine.end()) mine.push_back(e);
    }
    picks.insert(picks.end(), mine.begin(), mine.end());
  }
  return picks;
}

struct Grouped {
  std::vector<int32_t> order, slot;
  std::vector<MoeWorkItem> items;
};

void CheckGrouping(const std::vector<int32_t>& picks, int NE, int tile, const Grouped& g) {
  const int n = static_cast<int>(picks.size());
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(g.slot[i], 0);
    ASSERT_LT(g.slot[i], n);
    ASSERT_EQ(g.order[g.slot[i]], i) << "slot and order are not inverse at pick " << i;
  }
  std::vector<int> covered(n, 0);
  int last_expert = -1;
  bool unused_seen = false;
  for (const MoeWorkItem& it : g.items) {
    if (it.expert < 0) {
      unused_seen = true;
      continue;
    }
    ASSERT_FALSE(unused_seen) << "a used item after an unused one";
    ASSERT_LT(it.expert, NE);
    ASSERT_GE(it.expert, last_expert) << "items not in expert order";
    last_expert = it.expert;
    ASSERT_GE(it.rows, 1);
    ASSERT_LE(it.rows, tile);
    for (int r = it.row0; r < it.row0 + it.rows; ++r) {
      ASSERT_EQ(picks[g.order[r]], it.expert) << "permuted row " << r;
      ++covered[r];
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(covered[r], 1) << "permuted row " << r;
}

Grouped GroupOnDevice(const std::vector<int32_t>& picks, int NE, int tile) {
  const int n = static_cast<int>(picks.size());
  const int n_items = MoeMaxWorkItems(n, NE, tile);
  Dev<int32_t> dp(n), order(n), slot(n);
  Dev<MoeWorkItem> items(n_items);
  dp.Upload(picks);
  MoeGroupParams p;
  p.pick_expert = dp.get();
  p.n_picks = n;
  p.n_expert = NE;
  p.tile = tile;
  p.order = order.get();
  p.slot = slot.get();
  p.items = items.get();
  Grouped g;
  EXPECT_EQ(LaunchMoeGroup(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  g.order = order.Download();
  g.slot = slot.Download();
  g.items = items.Download();
  return g;
}

TEST_F(CudaMoe, GroupingIsAPermutationByExpert) {
  for (const auto& [n_tok, NE, K, tile] : {std::tuple{1, 8, 2, 8}, std::tuple{5, 6, 3, 8}, std::tuple{70, 6, 2, 32},
                                           std::tuple{300, 40, 4, 32}}) {
    SCOPED_TRACE(std::to_string(n_tok) + " tokens, " + std::to_string(NE) + " experts, tile " + std::to_string(tile));
    const std::vector<int32_t> picks = RandomPicks(n_tok, NE, K, rng_);
    const Grouped g = GroupOnDevice(picks, NE, tile);
    CheckGrouping(picks, NE, tile, g);
  }
}

// n_expert random matrices of (rows, cols) in `type`'s blocks (random
// quants, finite realistic scales) or BF16, on the host and uploaded by
// DeviceExperts.
class HostExperts {
 public:
  HostExperts(TensorType type, int NE, int64_t rows, int64_t cols, std::mt19937_64& rng)
      : type_(type), rows_(rows), cols_(cols), row_bytes_(TensorRowBytes(type, cols)) {
    bytes_.resize(row_bytes_ * rows * NE);
    std::uniform_int_distribution<int> byte(0, 255);
    if (type == TensorType::BF16) {
      std::normal_distribution<float> nd(0.0f, 0.05f);
      for (size_t i = 0; i + 1 < bytes_.size(); i += 2) {
        const uint16_t b = F32ToBf16(nd(rng));
        std::memcpy(bytes_.data() + i, &b, 2);
      }
    } else {
      for (auto& b : bytes_) b = static_cast<uint8_t>(byte(rng));
      std::uniform_real_distribution<float> scale(0.002f, 0.05f);
      int64_t be = 0, bb = 0;
      TensorTypeLayout(type, &be, &bb);
      auto put = [&](uint8_t* p, float v) {
        const uint16_t h = F32ToF16(v);
        std::memcpy(p, &h, 2);
      };
      for (size_t off = 0; off < bytes_.size(); off += static_cast<size_t>(bb)) {
        uint8_t* b = bytes_.data() + off;
        switch (type) {  // where each type keeps its F16 super-scale(s)
          case TensorType::Q6_K: put(b + 208, scale(rng)); break;
          case TensorType::Q4_K: case TensorType::Q5_K: put(b, scale(rng)), put(b + 2, scale(rng)); break;
          default: put(b, scale(rng)); break;  // Q8_0, Q4_0, IQ4_XS, IQ2_XXS: d first
        }
      }
    }
    for (int e = 0; e < NE; ++e)
      views_.push_back(WeightView{type, bytes_.data() + row_bytes_ * rows * e, rows, cols, row_bytes_});
  }
  const std::vector<WeightView>& views() const { return views_; }
  std::vector<float> Row(int e, int64_t r) const {
    std::vector<float> v(static_cast<size_t>(cols_));
    cpu::DequantizeRow(views_[e], r, v.data());
    return v;
  }

 private:
  TensorType type_;
  int64_t rows_, cols_;
  size_t row_bytes_;
  std::vector<uint8_t> bytes_;
  std::vector<WeightView> views_;
};

// [A; B] experts (rows ra + rb, cols) applied to the gathered rows of x over
// the grouping of random picks, by the GEMV (decode-sized) or the GEMM, each
// output against the double product.
void CheckProducts(TensorType ta, TensorType tb, int n_tok, bool gemm, std::mt19937_64& rng) {
  SCOPED_TRACE(std::string(TensorTypeName(ta)) + " + " + TensorTypeName(tb) + (gemm ? ", GEMM" : ", GEMV") + ", " +
               std::to_string(n_tok) + " tokens");
  const int NE = 6, K = 2;
  const int64_t cols = 256, ra = 96, rb = 40;  // 40: a partial 64-row GEMM tile and a partial 4-row GEMV CTA
  HostExperts A(ta, NE, ra, cols, rng), B(tb, NE, rb, cols, rng);
  DeviceExperts da, db;
  Status st = da.Upload(A.views(), "A");
  ASSERT_TRUE(st.ok()) << st.message();
  st = db.Upload(B.views(), "B");
  ASSERT_TRUE(st.ok()) << st.message();
  ExpertMatrix w;
  w.part[0] = da.stack();
  w.part[1] = db.stack();
  w.n_parts = 2;
  w.rows = static_cast<int32_t>(ra + rb);
  w.cols = static_cast<int32_t>(cols);
  ASSERT_EQ(CheckExpertMatrix(w), cudaSuccess);
  EXPECT_EQ(da.stack().type, ta == TensorType::BF16 ? kExpertBf16 : static_cast<uint32_t>(ta));

  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(n_tok) * cols);
  for (auto& v : x) v = F32ToBf16(nd(rng));
  const std::vector<int32_t> picks = RandomPicks(n_tok, NE, K, rng);
  const int tile = gemm ? kMoeGemmTileRows : kMoeGemvMaxRows;
  const int n = n_tok * K, n_items = MoeMaxWorkItems(n, NE, tile);
  Dev<int32_t> dp(n), order(n), slot(n);
  Dev<MoeWorkItem> items(n_items);
  Dev<bf16> dx(x.size());
  Dev<float> y(static_cast<size_t>(n) * w.rows);
  dp.Upload(picks);
  CUDA_OK(cudaMemcpy(dx.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  MoeGroupParams gp;
  gp.pick_expert = dp.get();
  gp.n_picks = n;
  gp.n_expert = NE;
  gp.tile = tile;
  gp.order = order.get();
  gp.slot = slot.get();
  gp.items = items.get();
  CUDA_OK(LaunchMoeGroup(gp, nullptr));
  MoeMatmulParams mp;
  mp.w = w;
  mp.x = dx.get();
  mp.gather = order.get();
  mp.gather_div = K;
  mp.items = items.get();
  mp.n_items = n_items;
  mp.y = y.get();
  CUDA_OK(gemm ? LaunchMoeGemm(mp, nullptr) : LaunchMoeGemv(mp, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<int32_t> sl = slot.Download();
  const std::vector<float> got = y.Download();
  int bad = 0;
  for (int i = 0; i < n && bad < 5; ++i) {
    const int t = i / K, e = picks[i];
    for (int64_t r = 0; r < w.rows && bad < 5; ++r) {
      const std::vector<float> wr = r < ra ? A.Row(e, r) : B.Row(e, r - ra);
      double want = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(wr[c]) * Bf16ToF32(x[static_cast<size_t>(t) * cols + c]);
        want += p;
        mag += std::fabs(p);
      }
      const float g = got[static_cast<size_t>(sl[i]) * w.rows + r];
      if (!(std::fabs(g - want) <= 1e-5 * mag + 1e-30)) {
        ADD_FAILURE() << "pick " << i << " (token " << t << ", expert " << e << ") row " << r << ": " << g
                      << " want " << want << " (sum |wx| " << mag << ")";
        ++bad;
      }
    }
  }
}

TEST_F(CudaMoe, ExpertGemvMatchesTheHost) {
  CheckProducts(TensorType::Q4_K, TensorType::Q6_K, 1, false, rng_);
  CheckProducts(TensorType::Q8_0, TensorType::IQ4_XS, 5, false, rng_);
  CheckProducts(TensorType::IQ2_XXS, TensorType::Q4_0, 3, false, rng_);  // a lattice type: the kernel's other instantiation
  CheckProducts(TensorType::BF16, TensorType::BF16, 8, false, rng_);
}

TEST_F(CudaMoe, ExpertGemmMatchesTheHost) {
  CheckProducts(TensorType::Q4_K, TensorType::Q6_K, 45, true, rng_);
  CheckProducts(TensorType::IQ2_XXS, TensorType::Q8_0, 20, true, rng_);
  CheckProducts(TensorType::BF16, TensorType::BF16, 37, true, rng_);
}

TEST_F(CudaMoe, CombineWeighsThePermutedRows) {
  const int T = 3, K = 2, E = 40;
  // slot: pick (t, j) -> permuted row; y rows hold 100 * row + d.
  const std::vector<int32_t> slot = {4, 0, 2, 5, 1, 3};
  const std::vector<float> w = {0.25f, 0.75f, 0.5f, 0.5f, 1.0f, -2.0f}, scale = {0.5f, 0.25f, 2.0f};
  std::vector<float> y(static_cast<size_t>(T) * K * E), shared(static_cast<size_t>(T) * E);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(100 * (i / E) + i % E);
  for (size_t i = 0; i < shared.size(); ++i) shared[i] = static_cast<float>(i % 7);
  Dev<float> dy(y.size()), dw(w.size()), dsh(shared.size()), dsc(T), out(static_cast<size_t>(T) * E);
  Dev<int32_t> dsl(slot.size());
  dy.Upload(y);
  dw.Upload(w);
  dsh.Upload(shared);
  dsc.Upload(scale);
  dsl.Upload(slot);
  for (const bool with_shared : {false, true}) {
    MoeCombineParams p;
    p.y = dy.get();
    p.slot = dsl.get();
    p.pick_weight = dw.get();
    p.shared = with_shared ? dsh.get() : nullptr;
    p.shexp_scale = with_shared ? dsc.get() : nullptr;
    p.n_tok = T;
    p.n_embd = E;
    p.k = K;
    p.out = out.get();
    CUDA_OK(LaunchMoeCombine(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> got = out.Download();
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < E; ++d) {
        double want = 0;
        for (int j = 0; j < K; ++j) want += w[t * K + j] * y[static_cast<size_t>(slot[t * K + j]) * E + d];
        if (with_shared) want += scale[t] * shared[static_cast<size_t>(t) * E + d];
        ASSERT_NEAR(got[static_cast<size_t>(t) * E + d], want, 1e-3) << "token " << t << " dim " << d;
      }
  }
}

}  // namespace
}  // namespace llm::cuda

#endif  // LLM_HAVE_CUDA
