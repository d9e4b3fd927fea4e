// The model families on the CUDA backend, against the CPU backend as the
// oracle (issue 21, "model parity"):
//   - Gemma 3's features on the synthesised `tiny` model (head_dim 64, so
//     both the tensor-core prefill kernel and the decode kernel run): q/k
//     RMSNorm per head, post-attention/post-FFN norms, sliding-window layers
//     with their own RoPE base, GeGLU, the embedding scale, NEOX pairs; and
//     Gemma 2's attention and final soft-caps on top. Logits at every
//     position of a 150-token prompt (window 24) prefilled in two chunks
//     beside a short sequence, then greedy decode steps, equal up to the
//     first near-tie. The first part runs without a device: it proves that
//     dropping any one feature (or moving the window by one) moves the CPU's
//     logits well past the tolerance, so a backend that ignored it fails.
//   - qwen2 (biases), qwen3 (q/k norms), Mistral-style llama (sliding
//     window), gemma2, phi3 (fused tensors, partial rotary) and qwen2 with
//     YaRN: the families' synthesised shapes (BF16 weights, so both backends
//     multiply the same values) over a prompt longer than their window.
//   - Mixture of Experts (cuda_moe.cpp): tiny-mixtral, tiny-qwen2moe (weights
//     not renormalised, a gated shared expert) and tiny-qwen3moe in BF16, and
//     tiny-qwen3moe-k in Q4_K_M (Q4_K and Q6_K experts read in their blocks);
//     the prefill chunks run the experts' tiled GEMM, the decode steps their
//     GEMV (in CUDA graphs). Run without a device first: dropping each MoE
//     feature (the shared expert, the renormalisation or its absence, one
//     expert fewer per token) moves the CPU's logits past the tolerance.
//   - a feature the CUDA backend lacks (LongRoPE): AUTO runs the model on the
//     CPU, an explicit CUDA request is UNSUPPORTED with the reason.
//   - Gemma 3 270M (Q4_K_M, head_dim 256) through the C API with
//     LLM_BACKEND_CUDA: the CPU's greedy tokens up to the first near-tie.
// Tolerance: 2e-2 relative L2 per logit row (test_cuda_backend's bound; the
// GPU keeps K/V and GEMM inputs in BF16).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"  // DequantizeRow
#include "llm.h"
#include "model/model.h"
#include "support/api_greedy.h"
#include "support/cuda_test_helpers.h"
#include "support/real_models.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

constexpr double kRowTol = 2e-2;  // relative L2 per logit row

// Norm weights the test owns: 1 + N(0, 0.3), so a norm read wrongly (or not
// at all) shows.
struct ExtraNorms {
  std::vector<std::vector<float>> store;
  WeightView Make(int64_t n, std::mt19937* rng) {
    std::normal_distribution<float> d(0.0f, 0.3f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = 1.0f + d(*rng);
    store.push_back(std::move(v));
    WeightView w;
    w.type = TensorType::F32;
    w.data = store.back().data();
    w.rows = 1;
    w.cols = n;
    w.row_bytes = static_cast<size_t>(n) * sizeof(float);
    return w;
  }
};

// `tiny` dressed as Gemma 3: every Gemma feature on (config and norm weights).
// softcaps: Gemma 2's attention and final soft-caps too.
void MakeGemmaLike(const Model& m, bool softcaps, ModelConfig* c, ModelWeights* w, ExtraNorms* norms) {
  *c = m.config;
  *w = m.weights;
  c->arch = "gemma3";
  c->arch_kind = ModelArch::kGemma3;
  c->qk_norm = true;
  c->post_norms = true;
  c->sliding_window = 24;
  c->swa_pattern = 2;  // layer 0 local, layer 1 global
  c->rope_theta = 1000000.0f;
  c->rope_theta_swa = 10000.0f;
  c->ffn_act = FfnActivation::kGeluTanh;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->rope_style = RopeStyle::kNeox;
  if (softcaps) {
    c->attn_logit_softcap = 0.5f;   // the tiny model's scaled scores reach this
    c->final_logit_softcap = 1.0f;  // and its logits this
  }
  std::mt19937 rng(21);
  norms->store.reserve(4 * c->n_layer);
  for (LayerWeights& L : w->layers) {
    L.q_norm = norms->Make(c->head_dim, &rng);
    L.k_norm = norms->Make(c->head_dim, &rng);
    L.post_attn_norm = norms->Make(c->n_embd, &rng);
    L.post_ffn_norm = norms->Make(c->n_embd, &rng);
  }
}

// The prompt and the batches every model test runs.
struct Script {
  std::vector<llm_token> prompt;  // 150 tokens
  std::vector<int32_t> ta = {5, 9, 2, 11, 40, 41, 42, 43, 44, 45, 46, 47}, tb = {20, 21};
};

Script MakeScript(int32_t n_vocab, size_t n = 150) {
  Script s;
  s.prompt.resize(n);
  for (size_t i = 0; i < n; ++i) s.prompt[i] = static_cast<llm_token>((i * 37 + 11) % n_vocab);
  return s;
}

std::vector<float> Run(Backend* be, const Batch& b, int32_t n_vocab) {
  std::vector<float> out(b.logit_rows.size() * static_cast<size_t>(n_vocab));
  const Status st = be->Forward(b, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Mixture of Experts: a token whose router finds two experts within
// rounding of each other (a routing near-tie) may take the other expert on
// the GPU, whose hidden states differ from the CPU's by BF16 rounding, and
// its row then differs by a whole expert's share, as a greedy near-tie
// changes a token. Such rows are found on the CPU alone: `alts` are CPU
// backends whose router rows are scaled by 1 ± 1e-2 (each expert's sign
// drawn once; logits move by ~1e-2 of their size, more than the GPU's
// rounding moves them). A row beyond the tolerance on the GPU is excused
// when an alternative also moves it beyond the tolerance, i.e. the CPU's
// own routing of it flips under that perturbation; at most 5% of the rows
// may be excused, and every other row must be within the tolerance.
struct NearTies {
  std::vector<Backend*> alts;
  int rows = 0, excused = 0;
};

// One batch on the CPU (and its alternatives) and the GPU; every logit row
// within kRowTol unless excused. Returns the worst unexcused row error;
// *cpu_row / *gpu_row: the logits of row `keep` (when >= 0).
double CompareRows(Backend* cpu, Backend* gpu, const Batch& b, int32_t V, const char* what, NearTies* ties = nullptr,
                   int keep = -1, std::vector<float>* cpu_row = nullptr, std::vector<float>* gpu_row = nullptr) {
  const std::vector<float> want = Run(cpu, b, V), got = Run(gpu, b, V);
  std::vector<std::vector<float>> alt;
  if (ties != nullptr)
    for (Backend* a : ties->alts) alt.push_back(Run(a, b, V));  // every batch: their KV caches stay in step
  double worst = 0;
  for (size_t r = 0; r < b.logit_rows.size(); ++r) {
    const std::vector<float> w(want.begin() + r * V, want.begin() + (r + 1) * V);
    const std::vector<float> g(got.begin() + r * V, got.begin() + (r + 1) * V);
    const double e = RelL2(g, w);
    if (static_cast<int>(r) == keep) {
      *cpu_row = w;
      *gpu_row = g;
    }
    if (ties != nullptr) {
      ++ties->rows;
      bool fragile = false;
      for (const std::vector<float>& a : alt)
        fragile = fragile || RelL2(std::vector<float>(a.begin() + r * V, a.begin() + (r + 1) * V), w) > kRowTol;
      if (e > kRowTol && fragile) {
        std::printf("%s: row %zu differs by %.4f: a routing near-tie (the CPU's own row moves as far)\n", what, r, e);
        ++ties->excused;
        continue;
      }
    }
    EXPECT_LE(e, kRowTol) << what << ": logit row " << r << " (batch row " << b.logit_rows[r] << ")";
    worst = std::isnan(e) ? 1e30 : std::max(worst, e);
  }
  return worst;
}

// Prefill of the prompt in two chunks (70 + 80 tokens: the prefill kernel
// reads the first chunk from the pool, and the second chunk's second query
// tile starts past a whole key tile of out-of-window keys) with a 5-token
// sequence beside the second (the decode kernel), logits at every position;
// then n_steps greedy
// decode steps of the long sequence, both backends fed the CPU's token while
// they agree. Returns the worst row error; *agree: steps before the first
// differing token, which must be a near-tie (see the rule in the body).
double RunScript(Backend* cpu, Backend* gpu, int32_t V, int n_steps, int* agree, NearTies* ties = nullptr) {
  Script s = MakeScript(V);
  double worst = 0;
  std::vector<float> last_cpu, last_gpu;
  {
    BatchSeq q{0, 70, 0, s.ta};
    std::vector<int32_t> rows(70);
    for (int i = 0; i < 70; ++i) rows[i] = i;
    worst = std::max(worst, CompareRows(cpu, gpu, Batch{std::span<const llm_token>(s.prompt.data(), 70),
                                                        std::span<const BatchSeq>(&q, 1), rows},
                                        V, "prefill chunk 1", ties));
  }
  {
    std::vector<llm_token> toks(s.prompt.begin() + 70, s.prompt.end());
    toks.insert(toks.end(), {7, 8, 9, 10, 11});
    const std::vector<BatchSeq> seqs = {{0, 80, 70, s.ta}, {80, 5, 0, s.tb}};
    std::vector<int32_t> rows(85);
    for (int i = 0; i < 85; ++i) rows[i] = i;
    const Batch b{toks, seqs, rows};
    worst = std::max(worst, CompareRows(cpu, gpu, b, V, "prefill chunk 2 + short sequence", ties, 79, &last_cpu,
                                        &last_gpu));
  }
  // Greedy: at a step where the tokens first differ, the CPU's logit of its
  // token may exceed its logit of the GPU's token by at most 2 e, e being
  // the largest |gpu - cpu| logit difference seen so far (two logits each
  // off by about e can swap only if they were within 2 e).
  double e = 0;
  *agree = 0;
  for (int step = 0; step < n_steps; ++step) {
    for (int i = 0; i < V; ++i) e = std::max(e, std::fabs(static_cast<double>(last_cpu[i]) - last_gpu[i]));
    const int32_t tc = static_cast<int32_t>(std::max_element(last_cpu.begin(), last_cpu.end()) - last_cpu.begin());
    const int32_t tg = static_cast<int32_t>(std::max_element(last_gpu.begin(), last_gpu.end()) - last_gpu.begin());
    if (tc != tg) {
      const double gap = last_cpu[tc] - last_cpu[tg];
      std::printf("first differing token at decode step %d: CPU gap %.4f, 2e = %.4f\n", step, gap, 2 * e);
      EXPECT_LE(gap, 2 * e) << "decode step " << step << ": the tokens differ on clearly separated logits";
      break;
    }
    ++*agree;
    const std::vector<llm_token> tok = {tc};
    const BatchSeq q{0, 1, 150 + step, s.ta};
    const std::vector<int32_t> row = {0};
    const Batch b{tok, std::span<const BatchSeq>(&q, 1), row};
    const std::string what = "decode step " + std::to_string(step);
    worst = std::max(worst, CompareRows(cpu, gpu, b, V, what.c_str(), ties, 0, &last_cpu, &last_gpu));
  }
  if (ties != nullptr) {
    std::printf("routing near-ties: %d of %d rows\n", ties->excused, ties->rows);
    EXPECT_LE(ties->excused * 20, ties->rows) << "more than 5% of the rows excused as routing near-ties";
  }
  return worst;
}

// The model's weights with every MoE layer's router rows scaled by 1 + sign_e
// * 1e-2 (sign_e = ±1 per expert from `seed`, flipped by `flip`), in F32
// copies `store` owns (NearTies' alternatives).
ModelWeights PerturbRouters(const ModelConfig& c, const ModelWeights& w, uint32_t seed, bool flip,
                            std::vector<std::vector<float>>* store) {
  ModelWeights out = w;
  std::mt19937 rng(seed);
  store->reserve(store->size() + out.layers.size());
  for (LayerWeights& L : out.layers) {
    if (L.router.empty()) continue;
    std::vector<float> v(static_cast<size_t>(L.router.rows * L.router.cols));
    for (int64_t r = 0; r < L.router.rows; ++r) {
      cpu::DequantizeRow(L.router, r, v.data() + r * L.router.cols);
      const float f = 1.0f + ((rng() & 1) != flip ? 1e-2f : -1e-2f);
      for (int64_t i = 0; i < L.router.cols; ++i) v[r * L.router.cols + i] *= f;
    }
    store->push_back(std::move(v));
    L.router = WeightView{TensorType::F32, store->back().data(), L.router.rows, L.router.cols,
                          static_cast<size_t>(L.router.cols) * sizeof(float)};
  }
  (void)c;
  return out;
}

// NearTies with its two alternatives (signs flipped between them) and what they hold.
struct RouterAlternatives {
  std::vector<std::vector<float>> routers;
  std::vector<ModelWeights> weights;
  std::vector<std::unique_ptr<Backend>> backends;
  NearTies ties;
  bool Make(const ModelConfig& c, const ModelWeights& w, const KvCacheSpec& kv) {
    for (const bool flip : {false, true}) weights.push_back(PerturbRouters(c, w, 35, flip, &routers));
    for (const ModelWeights& aw : weights) {
      auto a = CreateCpuBackend(c, aw, kv, 2);
      EXPECT_TRUE(a.ok()) << a.status().message();
      if (!a.ok()) return false;
      backends.push_back(std::move(*a));
      ties.alts.push_back(backends.back().get());
    }
    return true;
  }
};

std::vector<float> CpuPrefillLogits(const ModelConfig& c, const ModelWeights& w) {
  auto cpu = CreateCpuBackend(c, w, KvCacheSpec{16, 64}, 2);
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!cpu.ok()) return {};
  Script s = MakeScript(c.n_vocab);
  BatchSeq q{0, 150, 0, s.ta};
  std::vector<int32_t> rows = {10, 30, 60, 99, 149};
  return Run(cpu->get(), Batch{s.prompt, std::span<const BatchSeq>(&q, 1), rows}, c.n_vocab);
}

// Without a device: each Gemma feature, dropped (or the window moved by
// one), moves the CPU's logits far beyond the CUDA tolerance, so the
// comparison below can tell a backend that ignores it.
TEST(CudaFamilies, EachGemmaFeatureMovesTheLogitsBeyondTheTolerance) {
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ModelConfig c;
  ModelWeights w;
  ExtraNorms norms;
  MakeGemmaLike(**m, /*softcaps=*/true, &c, &w, &norms);
  const std::vector<float> all = CpuPrefillLogits(c, w);
  struct Variant {
    const char* name;
    void (*drop)(ModelConfig*);
  };
  const Variant variants[] = {
      {"no q/k norm", [](ModelConfig* x) { x->qk_norm = false; }},
      {"no post-norms", [](ModelConfig* x) { x->post_norms = false; }},
      {"window off by one", [](ModelConfig* x) { x->sliding_window += 1; }},
      {"no sliding window", [](ModelConfig* x) { x->sliding_window = 0; }},
      {"local RoPE base = global", [](ModelConfig* x) { x->rope_theta_swa = x->rope_theta; }},
      {"silu instead of gelu", [](ModelConfig* x) { x->ffn_act = FfnActivation::kSilu; }},
      {"no embedding scale", [](ModelConfig* x) { x->embd_scale = 1.0f; }},
      {"no attention soft-cap", [](ModelConfig* x) { x->attn_logit_softcap = 0.0f; }},
      {"no final soft-cap", [](ModelConfig* x) { x->final_logit_softcap = 0.0f; }},
  };
  for (const Variant& v : variants) {
    ModelConfig x = c;
    v.drop(&x);
    const double moved = RelL2(CpuPrefillLogits(x, w), all);
    std::printf("%-26s moves the CPU logits by %.4f relative L2\n", v.name, moved);
    // The window moved by one changes one key per query at the edge: a
    // smaller shift, still several times the tolerance.
    EXPECT_GT(moved, 3 * kRowTol) << v.name;
  }
}

class GemmaOnTiny : public ::testing::TestWithParam<bool> {};

TEST_P(GemmaOnTiny, LogitsAndGreedyMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  const bool softcaps = GetParam();
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ModelConfig c;
  ModelWeights w;
  ExtraNorms norms;
  MakeGemmaLike(**m, softcaps, &c, &w, &norms);
  KvCacheSpec kv{16, 64};
  auto cpu = CreateCpuBackend(c, w, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  CudaBackendOptions o;
  o.max_seq_len = 256;
  auto gpu = CreateCudaBackend(c, w, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  int agree = 0;
  const double worst = RunScript(cpu->get(), gpu->get(), c.n_vocab, 12, &agree);
  std::printf("gemma-like tiny (soft-caps %s): worst row %.4f relative L2, %d greedy steps equal\n",
              softcaps ? "on" : "off", worst, agree);
}

INSTANTIATE_TEST_SUITE_P(CudaFamilies, GemmaOnTiny, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Gemma2Caps" : "Gemma3"; });

// The families' synthesised shapes (tools/synth), BF16 weights, as a file
// the caller removes ("" on failure).
std::string SynthFamilyFile(const char* shape) {
  const std::string path =
      ::testing::TempDir() + "/llmrt_cudafam_" + std::to_string(::getpid()) + "_" + shape + ".gguf";
  synth::SynthOptions o;
  o.type = TensorType::BF16;
  o.seed = 7;
  o.stddev = 0.08f;
  o.norm_std = 0.1f;
  o.bias_std = 0.5f;
  const synth::SynthShape* s = synth::FindSynthShape(shape);
  EXPECT_NE(s, nullptr) << shape;
  if (s == nullptr) return "";
  Status st = synth::WriteSynthModel(*s, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return st.ok() ? path : "";
}

std::unique_ptr<Model> SynthFamily(const char* shape) {
  const std::string path = SynthFamilyFile(shape);
  if (path.empty()) return nullptr;
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : nullptr;
}

// tiny-qwen3's q/k norm weights are ~2 (llm-synth: sharp attention for the
// llama.cpp comparison at F32): scores of ~20 over 32 dims, where rounding
// q and K to BF16 alone moves a logit row by ~4%. Halved here, the
// attention is still sharp and the norms still matter.
bool HalveQkNorms(ModelWeights* w, std::vector<std::vector<float>>* halved) {
  halved->reserve(2 * w->layers.size());
  for (LayerWeights& L : w->layers) {
    for (WeightView* v : {&L.q_norm, &L.k_norm}) {
      EXPECT_EQ(v->type, TensorType::F32);
      if (v->type != TensorType::F32) return false;
      const float* src = static_cast<const float*>(v->data);
      halved->emplace_back(src, src + v->rows * v->cols);
      for (float& x : halved->back()) x *= 0.5f;
      v->data = halved->back().data();
    }
  }
  return true;
}

class Families : public ::testing::TestWithParam<const char*> {};

TEST_P(Families, LogitsAndGreedyMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  std::unique_ptr<Model> m = SynthFamily(GetParam());
  ASSERT_NE(m, nullptr);
  ModelWeights w = m->weights;
  std::vector<std::vector<float>> halved;
  if (m->config.qk_norm) {
    ASSERT_TRUE(HalveQkNorms(&w, &halved));
  }
  KvCacheSpec kv{16, 64};
  auto cpu = CreateCpuBackend(m->config, w, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  CudaBackendOptions o;
  o.max_seq_len = 256;
  auto gpu = CreateCudaBackend(m->config, w, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  RouterAlternatives alts;
  if (m->config.n_expert > 0) {
    ASSERT_TRUE(alts.Make(m->config, w, kv));
  }
  int agree = 0;
  const double worst =
      RunScript(cpu->get(), gpu->get(), m->config.n_vocab, 8, &agree, m->config.n_expert > 0 ? &alts.ties : nullptr);
  std::printf("%s: worst row %.4f relative L2, %d greedy steps equal\n", GetParam(), worst, agree);
}

INSTANTIATE_TEST_SUITE_P(CudaFamilies, Families,
                         ::testing::Values("tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-gemma2", "tiny-phi3",
                                           "tiny-qwen2-yarn", "tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- Experts in host memory (n_cpu_moe; cuda_moe_host.cpp, moe_host.h)
//
// Each MoE family against the CPU backend, as above, with its experts in
// host memory: the first layer's computed by the CPU every step
// (LLM_MOE_HOST_CPU); every layer's copied into a device cache of 3 slots,
// fewer than one layer's 4 experts (LLM_MOE_HOST_COPY: a decode step needs
// 2 per layer, 4 in all, so each step evicts; a prefill chunk needs all 4
// of a layer, more than the cache holds, and its layers go to the CPU);
// every layer's with the measured choice (AUTO).
struct HostCase {
  const char* name;
  int32_t n_cpu_moe, policy, cache_slots;  // cache_slots 0: the default (one layer's experts)
};
const HostCase kHostCases[] = {
    {"FirstLayerOnCpu", 1, LLM_MOE_HOST_CPU, 0},
    {"AllCopiedSmallCache", -1, LLM_MOE_HOST_COPY, 3},
    {"AllMeasuredChoice", -1, LLM_MOE_HOST_AUTO, 0},
};

// Bytes of one expert slot (gate + up + down) as the device holds them: BF16
// for these files.
int64_t ExpertSlotBytes(const ModelConfig& c) { return 3 * c.n_ff_exp * c.n_embd * 2; }

class HostExperts : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(HostExperts, LogitsAndGreedyMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  const char* shape = std::get<0>(GetParam());
  const HostCase& hc = kHostCases[std::get<1>(GetParam())];
  std::unique_ptr<Model> m = SynthFamily(shape);
  ASSERT_NE(m, nullptr);
  ModelWeights w = m->weights;
  std::vector<std::vector<float>> halved;
  if (m->config.qk_norm) {
    ASSERT_TRUE(HalveQkNorms(&w, &halved));
  }
  KvCacheSpec kv{16, 64};
  auto cpu = CreateCpuBackend(m->config, w, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  CudaBackendOptions o;
  o.max_seq_len = 256;
  o.n_cpu_moe = hc.n_cpu_moe;
  o.moe_host_policy = hc.policy;
  o.moe_cache_bytes = hc.cache_slots * ExpertSlotBytes(m->config);
  auto gpu = CreateCudaBackend(m->config, w, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  RouterAlternatives alts;
  ASSERT_TRUE(alts.Make(m->config, w, kv));
  int agree = 0;
  const double worst = RunScript(cpu->get(), gpu->get(), m->config.n_vocab, 8, &agree, &alts.ties);
  const MoeOffloadStats st = (*gpu)->moe_offload();
  std::printf("%s %s: worst row %.4f, %d greedy steps equal; host layers %d, cache %d slots, %lld cpu / %lld copy "
              "layer-steps, %lld bytes copied, %lld hits / %lld misses\n",
              shape, hc.name, worst, agree, st.host_layers, st.cache_slots, static_cast<long long>(st.cpu_steps),
              static_cast<long long>(st.copy_steps), static_cast<long long>(st.bytes_copied),
              static_cast<long long>(st.cache_hits), static_cast<long long>(st.cache_misses));
  const int32_t want_layers = hc.n_cpu_moe < 0 ? m->config.n_layer : hc.n_cpu_moe;
  EXPECT_EQ(st.host_layers, want_layers);
  EXPECT_EQ(st.tokens, static_cast<int64_t>(want_layers) * (150 + 5 + agree));
  if (hc.policy == LLM_MOE_HOST_CPU) {
    EXPECT_EQ(st.copy_steps, 0);
    EXPECT_EQ(st.cpu_steps, want_layers * (2 + agree));
  }
  if (hc.policy == LLM_MOE_HOST_COPY) {
    EXPECT_EQ(st.cache_slots, hc.cache_slots);
    // Decode steps (2 experts a layer) always fit; a prefill chunk whose
    // layer wants all 4 goes to the CPU (tiny-mixtral's and tiny-qwen3moe's
    // do; tiny-qwen2moe's router leaves one expert out of its chunks).
    EXPECT_EQ(st.cpu_steps + st.copy_steps, want_layers * (2 + agree));
    EXPECT_GE(st.copy_steps, want_layers * agree);
    // 4 experts wanted per step, 3 slots: at least one copied every step
    // (on demand or prefetched while the layer before ran).
    EXPECT_GE(st.cache_misses + st.prefetch_experts, agree);
    EXPECT_EQ(st.bytes_copied, (st.cache_misses + st.prefetch_experts) * ExpertSlotBytes(m->config));
  }
  if (hc.policy == LLM_MOE_HOST_AUTO) EXPECT_EQ(st.cpu_steps + st.copy_steps, want_layers * (2 + agree));
}

// Each family with some and all layers' experts in host memory; the
// measured choice (which only picks between the two ways the first two
// cases test) on one family, to keep CI short (~3 s a case on the emulator).
INSTANTIATE_TEST_SUITE_P(CudaFamilies, HostExperts,
                         ::testing::Combine(::testing::Values("tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"),
                                            ::testing::Range(0, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, int>>& i) {
                           std::string n = std::get<0>(i.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + "_" + kHostCases[std::get<1>(i.param)].name;
                         });
INSTANTIATE_TEST_SUITE_P(CudaFamiliesMeasured, HostExperts,
                         ::testing::Combine(::testing::Values("tiny-qwen3moe"), ::testing::Values(2)),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, int>>& i) {
                           std::string n = std::get<0>(i.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + "_" + kHostCases[std::get<1>(i.param)].name;
                         });

// The copy way runs the device layer's kernels on the same bytes, only
// through cache slots: its logits equal the all-on-device backend's bit for
// bit, with a cache of exactly k = 2 slots (every step evicts), with the
// prefetch off and on (a prefetch only changes which slot holds what).
// Decode-like steps of one token each, so every step fits the cache.
TEST(CudaFamilies, CopiedExpertsEqualExpertsOnTheDeviceBitForBit) {
  SKIP_WITHOUT_DEVICE();
  std::unique_ptr<Model> m = SynthFamily("tiny-qwen2moe");
  ASSERT_NE(m, nullptr);
  std::vector<std::unique_ptr<Backend>> be;
  // Experts on the device; in host memory: a cache of k = 2 slots (no room
  // for a prefetch), then of 3 without and with the prefetch.
  for (int i = 0; i < 4; ++i) {
    KvCacheSpec kv{16, 64};
    CudaBackendOptions o;
    o.max_seq_len = 256;
    o.cuda_graphs = false;
    if (i > 0) {
      o.n_cpu_moe = -1;
      o.moe_host_policy = LLM_MOE_HOST_COPY;
      o.moe_cache_bytes = (i == 1 ? 2 : 3) * ExpertSlotBytes(m->config);
      o.moe_prefetch = i == 3;
    }
    auto b = CreateCudaBackend(m->config, m->weights, &kv, o);
    ASSERT_TRUE(b.ok()) << b.status().message();
    be.push_back(std::move(*b));
  }
  const std::vector<int32_t> table = {0, 1, 2};
  const int32_t V = m->config.n_vocab;
  constexpr int kSteps = 24;
  for (int i = 0; i < kSteps; ++i) {
    const std::vector<llm_token> tok = {static_cast<llm_token>((i * 53 + 3) % V)};
    const BatchSeq q{0, 1, i, table};
    const std::vector<int32_t> row = {0};
    const Batch b{tok, std::span<const BatchSeq>(&q, 1), row};
    const std::vector<float> a = ::llm::test::Run(be[0].get(), b, V);
    for (int k = 1; k < 4; ++k) {
      const std::vector<float> h = ::llm::test::Run(be[k].get(), b, V);
      ASSERT_EQ(std::memcmp(a.data(), h.data(), a.size() * sizeof(float)), 0) << "backend " << k << " position " << i;
    }
  }
  const MoeOffloadStats plain = be[1]->moe_offload(), three = be[2]->moe_offload(), pre = be[3]->moe_offload();
  std::printf("2 slots: %lld misses, %lld bytes; 3 slots: %lld misses, %lld bytes; 3 slots + prefetch: %lld misses, "
              "%lld prefetched (%lld used), %lld bytes, predicted %lld of %lld wanted\n",
              static_cast<long long>(plain.cache_misses), static_cast<long long>(plain.bytes_copied),
              static_cast<long long>(three.cache_misses), static_cast<long long>(three.bytes_copied),
              static_cast<long long>(pre.cache_misses), static_cast<long long>(pre.prefetch_experts),
              static_cast<long long>(pre.prefetch_used), static_cast<long long>(pre.bytes_copied),
              static_cast<long long>(pre.predicted_right), static_cast<long long>(pre.predicted_wanted));
  for (const MoeOffloadStats& st : {plain, three, pre}) {
    EXPECT_EQ(st.copy_steps, 2 * kSteps);
    EXPECT_EQ(st.cpu_steps, 0);
    EXPECT_EQ(st.bytes_copied, (st.cache_misses + st.prefetch_experts) * ExpertSlotBytes(m->config));
  }
  EXPECT_GT(plain.cache_misses, kSteps) << "2 slots for 2 layers' experts: misses every step";
  EXPECT_EQ(plain.prefetch_experts, 0);
  EXPECT_EQ(plain.predicted_wanted, 0);
  EXPECT_EQ(three.prefetch_experts, 0);
  EXPECT_GT(pre.predicted_wanted, 0);  // layer 1's experts, every step
  EXPECT_LE(pre.predicted_right, pre.predicted_wanted);
  EXPECT_LE(pre.prefetch_used, pre.prefetch_experts);
}

// Through the C API: n_cpu_moe reaches the backend, the greedy tokens are
// the all-on-device context's, and llm_stats reports what the host layers
// did (tiny-mixtral, every layer's experts in host memory, forced copies
// into a 3-expert cache, prefetch on: the outputs must not depend on it).
TEST(CudaFamilies, HostExpertsThroughTheCApi) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthFamilyFile("tiny-mixtral");
  ASSERT_FALSE(path.empty());
  std::vector<llm_token> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<llm_token>(17 + 23 * i));
  auto run = [&](int32_t n_cpu_moe, llm_stats* st) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.backend = LLM_BACKEND_CUDA;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.max_seqs = 2;
    p.n_cpu_moe = n_cpu_moe;
    p.moe_host_policy = LLM_MOE_HOST_COPY;
    p.moe_cache_bytes = static_cast<uint64_t>(3 * 3 * 128 * 64 * 2);  // 3 experts of (n_ff_exp 128, n_embd 64) BF16
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
    if (ctx == nullptr) return std::vector<llm_token>();
    const ApiGreedyRun r = ApiGreedy(ctx, prompt, 6, 1);
    std::memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    EXPECT_EQ(llm_get_stats(ctx, st), LLM_OK);
    llm_ctx_destroy(ctx);
    return r.tokens;
  };
  llm_stats dev{}, host{};
  const std::vector<llm_token> a = run(0, &dev), b = run(-1, &host);
  std::remove(path.c_str());
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(dev.moe_host_layers, 0);
  EXPECT_EQ(host.moe_host_layers, 2);
  EXPECT_EQ(host.moe_cache_slots, 3);
  EXPECT_GT(host.moe_copy_steps, 0u);
  EXPECT_GT(host.moe_bytes_copied, 0u);
  EXPECT_GT(host.moe_tokens, 0u);
  EXPECT_GT(host.moe_host_bytes, 0u);
  EXPECT_GT(host.moe_predicted_wanted, 0u);
  // Bad settings get a status, not a context.
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.n_cpu_moe = -2;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  p.n_cpu_moe = 0;
  p.moe_host_policy = 9;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

// Impossible host-expert settings are refused at creation, never run.
TEST(CudaFamilies, HostExpertSettingsAreChecked) {
  SKIP_WITHOUT_DEVICE();
  std::unique_ptr<Model> m = SynthFamily("tiny-mixtral");
  ASSERT_NE(m, nullptr);
  auto make = [&](int32_t n_cpu_moe, int32_t policy, int64_t cache) {
    KvCacheSpec kv{16, 64};
    CudaBackendOptions o;
    o.max_seq_len = 256;
    o.n_cpu_moe = n_cpu_moe;
    o.moe_host_policy = policy;
    o.moe_cache_bytes = cache;
    auto b = CreateCudaBackend(m->config, m->weights, &kv, o);
    return b.ok() ? LLM_OK : b.status().code();
  };
  EXPECT_EQ(make(-2, 0, 0), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make(1, 3, 0), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make(1, 0, ExpertSlotBytes(m->config) - 1), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make(99, 0, 0), LLM_OK);  // more than the model has: every layer
}

// Without a device: each MoE feature, dropped, moves the CPU's logits of the
// MoE families far past the tolerance, so the comparison above can tell a
// backend that ignores it (or routes one expert short).
TEST(CudaFamilies, EachMoeFeatureMovesTheLogitsBeyondTheTolerance) {
  struct Variant {
    const char* shape;
    const char* name;
    void (*drop)(ModelConfig*);
  };
  const Variant variants[] = {
      {"tiny-qwen2moe", "no shared expert", [](ModelConfig* x) { x->n_ff_shexp = 0; }},
      {"tiny-qwen2moe", "weights renormalised", [](ModelConfig* x) { x->expert_weights_norm = true; }},
      {"tiny-qwen3moe", "weights not renormalised", [](ModelConfig* x) { x->expert_weights_norm = false; }},
      {"tiny-mixtral", "one expert per token", [](ModelConfig* x) { x->n_expert_used = 1; }},
  };
  for (const Variant& v : variants) {
    std::unique_ptr<Model> m = SynthFamily(v.shape);
    ASSERT_NE(m, nullptr);
    ModelConfig x = m->config;
    v.drop(&x);
    const double moved = RelL2(CpuPrefillLogits(x, m->weights), CpuPrefillLogits(m->config, m->weights));
    std::printf("%s, %-26s moves the CPU logits by %.4f relative L2\n", v.shape, v.name, moved);
    EXPECT_GT(moved, 3 * kRowTol) << v.shape << ": " << v.name;
  }
}

// A Q4_K_M MoE file: the experts stay in their blocks on the device (Q4_K
// gate/up, Q6_K down) and the GEMV/GEMM read them there. The oracle is the
// CPU backend on the same weights dequantized to F32 (test_cuda_quant's
// tight oracle: the CPU's own product of quantized weights quantizes the
// activations to Q8, an error of its own of ~2e-2).
TEST(CudaFamilies, QuantizedExpertsMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  const std::string path =
      ::testing::TempDir() + "/llmrt_cudafam_" + std::to_string(::getpid()) + "_moe_q4km.gguf";
  synth::SynthOptions so;
  so.q4_k_m = true;
  so.seed = 7;
  so.stddev = 0.05f;  // test_cuda_quant's: at 0.08 the Q4_K grid's attention grows sharp enough past ~120 positions that BF16 K/V alone move rows by > 2e-2 (BF16 experts on the GPU too)
  so.norm_std = 0.1f;
  Status st = synth::WriteSynthModel(*synth::FindSynthShape("tiny-qwen3moe-k"), so, path);
  ASSERT_TRUE(st.ok()) << st.message();
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LayerWeights &L0 = (*m)->weights.layers[0], &L1 = (*m)->weights.layers[1];
  ASSERT_EQ(L0.exp_gate[0].type, TensorType::Q4_K);
  ASSERT_EQ(L0.exp_down[0].type, TensorType::Q4_K);
  ASSERT_EQ(L1.exp_down[0].type, TensorType::Q6_K);  // Q4_K_M's more bits in the last layer
  ASSERT_EQ(L0.router.type, TensorType::F32);
  {  // the router's F32 values as drawn (N(0, 0.05)), not another type's bytes read as F32
    const auto* r = static_cast<const float*>(L0.router.data);
    float worst = 0;
    for (int64_t i = 0; i < L0.router.rows * L0.router.cols; ++i) worst = std::max(worst, std::fabs(r[i]));
    ASSERT_LT(worst, 0.5f) << "the Q4_K_M mix's F32 router is not F32 values";
  }
  ModelWeights wq = (*m)->weights;  // the file's blocks, q/k norms halved (HalveQkNorms)
  std::vector<std::vector<float>> halved;
  ASSERT_TRUE(HalveQkNorms(&wq, &halved));
  std::vector<std::vector<float>> store;
  ModelWeights wf = wq;
  auto to_f32 = [&](WeightView* v) {
    if (v->empty()) return;
    store.emplace_back(static_cast<size_t>(v->rows * v->cols));
    for (int64_t r = 0; r < v->rows; ++r) cpu::DequantizeRow(*v, r, store.back().data() + r * v->cols);
    *v = WeightView{TensorType::F32, store.back().data(), v->rows, v->cols, static_cast<size_t>(v->cols) * 4};
  };
  store.reserve(1024);
  to_f32(&wf.token_embd);
  to_f32(&wf.output);
  for (LayerWeights& L : wf.layers) {
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.router}) to_f32(v);
    for (auto* x : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (WeightView& v : *x) to_f32(&v);
  }
  ASSERT_LE(store.size(), 1024u);  // no reallocation: the views point into it
  KvCacheSpec kv{16, 64};
  auto cpu = CreateCpuBackend((*m)->config, wf, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  CudaBackendOptions o;
  o.max_seq_len = 256;
  auto gpu = CreateCudaBackend((*m)->config, wq, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  const BackendMemory mem = (*gpu)->memory();
  // The device holds the file's expert bytes, not a BF16 copy (3 x 8 experts
  // x 256 x 256 weights per layer: 1.5 MiB as BF16, ~0.45 MiB in the file).
  int64_t file_bytes = 0;
  for (const LayerWeights& L : (*m)->weights.layers)
    for (const auto* v : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (const WeightView& e : *v) file_bytes += static_cast<int64_t>(e.row_bytes) * e.rows;
  EXPECT_LT(mem.weights, file_bytes + (int64_t{1} << 20)) << "experts widened on upload?";
  RouterAlternatives alts;
  ASSERT_TRUE(alts.Make((*m)->config, wf, kv));
  int agree = 0;
  const double worst = RunScript(cpu->get(), gpu->get(), (*m)->config.n_vocab, 8, &agree, &alts.ties);
  std::printf("tiny-qwen3moe-k Q4_K_M: worst row %.4f relative L2, %d greedy steps equal\n", worst, agree);
}

// A model with a feature the CUDA backend lacks (LongRoPE, tiny-phi35) stays
// on the CPU: the backend refuses it with the reason, the context builder
// falls back for AUTO and refuses an explicit CUDA request (the emulator
// build's AUTO never picks the emulator, so the fallback is checked through
// CudaSupportsModel, its one rule, and LLM_BACKEND=cuda). The MoE families
// and gpt-oss are accepted now.
TEST(CudaFamilies, UnsupportedFeaturesStayOnTheCpu) {
  {
    std::unique_ptr<Model> m = SynthFamily("tiny-phi35");
    ASSERT_NE(m, nullptr);
    const Status st = CudaSupportsModel(m->config);
    EXPECT_EQ(st.code(), LLM_ERR_UNSUPPORTED);
    EXPECT_NE(st.message().find("LongRoPE"), std::string::npos) << st.message();
    if (HaveDevice()) {
      KvCacheSpec kv{16, 16};
      auto gpu = CreateCudaBackend(m->config, m->weights, &kv, CudaBackendOptions{});
      ASSERT_FALSE(gpu.ok());
      EXPECT_EQ(gpu.status().code(), LLM_ERR_UNSUPPORTED);
    }
  }
  for (const char* shape :
       {"tiny-qwen2", "tiny-gemma2", "tiny-phi3", "tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-gpt-oss"}) {
    std::unique_ptr<Model> m = SynthFamily(shape);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(CudaSupportsModel(m->config).ok()) << shape;
  }
}

// ---- gpt-oss (issue 32): attention sinks in both attention kernels, q/k/v/o
// biases, alternating windows (even layers local, window 32 < the 150-token
// prompt), YaRN on every layer, the biased router's top-k-then-softmax and
// biased clamped-SwiGLU experts in MXFP4 (F16 elsewhere, as llm-synth
// writes gpt-oss). tiny-gpt-oss has head_dim 32: every query goes through
// the decode kernel; the same shape with head_dim 64 sends the prefill
// chunks through the tensor-core prefill kernel. The oracle is the CPU
// backend on the same weights widened to F32 (the CPU's own MXFP4 product
// quantizes the activations to Q8, an error of its own).
struct GptOssModel {
  std::unique_ptr<Model> model;
  ModelWeights f32;  // every matrix dequantized to F32, views into store
  std::vector<std::vector<float>> store;
};

bool LoadGptOss(int32_t head_dim, GptOssModel* g) {
  const synth::SynthShape* base = synth::FindSynthShape("tiny-gpt-oss");
  EXPECT_NE(base, nullptr);
  if (base == nullptr) return false;
  synth::SynthShape shape = *base;
  shape.head_dim = head_dim;
  const std::string path = ::testing::TempDir() + "/llmrt_cudafam_" + std::to_string(::getpid()) + "_gptoss_" +
                           std::to_string(head_dim) + ".gguf";
  synth::SynthOptions o;
  o.type = TensorType::F16;
  o.seed = 7;
  o.stddev = 0.08f;
  o.norm_std = 0.1f;
  o.bias_std = 0.5f;
  const Status st = synth::WriteSynthModel(shape, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return false;
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return false;
  g->model = std::move(*m);
  const ModelConfig& c = g->model->config;
  EXPECT_EQ(c.arch_kind, ModelArch::kGptOss);
  EXPECT_EQ(c.head_dim, head_dim);
  EXPECT_TRUE(c.attn_sinks && c.out_bias && c.expert_bias && c.expert_softmax_topk && c.swa_rope_global);
  EXPECT_EQ(g->model->weights.layers[0].exp_gate[0].type, TensorType::MXFP4);
  EXPECT_EQ(g->model->weights.layers[0].wq.type, TensorType::F16);
  g->f32 = g->model->weights;
  g->store.reserve(2048);
  auto to_f32 = [&](WeightView* v) {
    if (v->empty()) return;
    g->store.emplace_back(static_cast<size_t>(v->rows * v->cols));
    for (int64_t r = 0; r < v->rows; ++r) cpu::DequantizeRow(*v, r, g->store.back().data() + r * v->cols);
    *v = WeightView{TensorType::F32, g->store.back().data(), v->rows, v->cols, static_cast<size_t>(v->cols) * 4};
  };
  to_f32(&g->f32.token_embd);
  to_f32(&g->f32.output);
  for (LayerWeights& L : g->f32.layers) {
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.router}) to_f32(v);
    for (auto* x : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (WeightView& v : *x) to_f32(&v);
  }
  EXPECT_LE(g->store.size(), 2048u);  // no reallocation: the views point into it
  return g->store.size() <= 2048u;
}

// Without a device: each gpt-oss part, dropped, moves the CPU's logits far
// beyond the tolerance, so the comparison below fails on a backend that
// ignores it (test_families' GptOssPartsEachMatter does the same against
// llama.cpp; this one on the shape and weights the CUDA test runs).
TEST(CudaFamilies, EachGptOssPartMovesTheLogitsBeyondTheTolerance) {
  GptOssModel g;
  ASSERT_TRUE(LoadGptOss(64, &g));
  const ModelConfig& c = g.model->config;
  const std::vector<float> all = CpuPrefillLogits(c, g.f32);
  struct Variant {
    const char* name;
    void (*drop)(ModelConfig*);
  };
  const Variant variants[] = {
      {"no sinks", [](ModelConfig* x) { x->attn_sinks = false; }},
      {"no output bias", [](ModelConfig* x) { x->out_bias = false; }},
      {"softmax over every expert", [](ModelConfig* x) { x->expert_softmax_topk = false; }},
      {"no windows", [](ModelConfig* x) { x->sliding_window = 0; }},
      {"local layers without YaRN", [](ModelConfig* x) { x->swa_rope_global = false; }},
  };
  for (const Variant& v : variants) {
    ModelConfig x = c;
    v.drop(&x);
    const double moved = RelL2(CpuPrefillLogits(x, g.f32), all);
    std::printf("gpt-oss, %-26s moves the CPU logits by %.4f relative L2\n", v.name, moved);
    EXPECT_GT(moved, 3 * kRowTol) << v.name;
  }
  // The router's bias, zeroed (the config cannot drop it alone). The
  // clamped SwiGLU's clamps have no CPU switch: the mutant swiglu-oai-no-clamp
  // (scripts/mutants/mutants.py) shows the comparison below catches them.
  ModelWeights w = g.f32;
  const std::vector<float> zeros(static_cast<size_t>(c.n_expert), 0.0f);
  for (LayerWeights& L : w.layers)
    L.router_b = WeightView{TensorType::F32, zeros.data(), 1, c.n_expert, static_cast<size_t>(c.n_expert) * 4};
  const double moved = RelL2(CpuPrefillLogits(c, w), all);
  std::printf("gpt-oss, %-26s moves the CPU logits by %.4f relative L2\n", "no router bias", moved);
  EXPECT_GT(moved, 3 * kRowTol) << "no router bias";
}

// The gpt-oss cases: head_dim (32: decode kernel only; 64: the prefill
// kernel too) and where the experts live.
struct GptOssCase {
  const char* name;
  int32_t head_dim, n_cpu_moe, policy;
};
const GptOssCase kGptOssCases[] = {
    {"Hd32ExpertsOnDevice", 32, 0, LLM_MOE_HOST_AUTO},
    {"Hd64ExpertsOnDevice", 64, 0, LLM_MOE_HOST_AUTO},
    {"Hd64FirstLayerOnCpu", 64, 1, LLM_MOE_HOST_CPU},   // the CPU way: host biases and clamp
    {"Hd64AllCopied", 64, -1, LLM_MOE_HOST_COPY},       // the device kernels over cache slots
};

class GptOss : public ::testing::TestWithParam<int> {};

TEST_P(GptOss, LogitsAndGreedyMatchCpu) {
  const GptOssCase& gc = kGptOssCases[GetParam()];
  GptOssModel g;
  ASSERT_TRUE(LoadGptOss(gc.head_dim, &g));
  const ModelConfig& c = g.model->config;
  EXPECT_TRUE(CudaSupportsModel(c).ok()) << CudaSupportsModel(c).message();
  SKIP_WITHOUT_DEVICE();
  KvCacheSpec kv{16, 64};
  auto cpu = CreateCpuBackend(c, g.f32, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  CudaBackendOptions o;
  o.max_seq_len = 256;
  o.n_cpu_moe = gc.n_cpu_moe;
  o.moe_host_policy = gc.policy;
  auto gpu = CreateCudaBackend(c, g.model->weights, &kv, o);  // the file's MXFP4 and F16 bytes
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  RouterAlternatives alts;
  ASSERT_TRUE(alts.Make(c, g.f32, kv));
  int agree = 0;
  const double worst = RunScript(cpu->get(), gpu->get(), c.n_vocab, 8, &agree, &alts.ties);
  const MoeOffloadStats st = (*gpu)->moe_offload();
  std::printf("tiny-gpt-oss %s: worst row %.4f relative L2, %d greedy steps equal; %lld cpu / %lld copy layer-steps\n",
              gc.name, worst, agree, static_cast<long long>(st.cpu_steps), static_cast<long long>(st.copy_steps));
  if (gc.policy == LLM_MOE_HOST_CPU) {
    EXPECT_EQ(st.cpu_steps, 2 + agree);
  }
  if (gc.policy == LLM_MOE_HOST_COPY) {
    EXPECT_GT(st.copy_steps, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(CudaFamilies, GptOss, ::testing::Range(0, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kGptOssCases[i.param].name); });

// The same through the C API: with LLM_BACKEND=cuda replacing AUTO, the
// LongRoPE model gets a CPU context, a dense, a MoE and a gpt-oss one CUDA
// contexts; an explicit CUDA request for the LongRoPE model is UNSUPPORTED
// and says why.
TEST(CudaFamilies, ContextFallsBackToTheCpuForUnsupportedFeatures) {
  SKIP_WITHOUT_DEVICE();
  const char* old_env = std::getenv("LLM_BACKEND");
  const std::string saved = old_env ? old_env : "";
  setenv("LLM_BACKEND", "cuda", 1);
  auto backend_of = [](const std::string& path, int32_t backend, llm_status want) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.backend = backend;
    p.n_threads = 1;
    p.n_ctx = 64;
    p.max_seqs = 2;
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), want) << llm_last_error();
    if (ctx == nullptr) return -1;
    llm_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_EQ(llm_get_stats(ctx, &st), LLM_OK);
    llm_ctx_destroy(ctx);
    return static_cast<int>(st.backend);
  };
  const std::string rope = SynthFamilyFile("tiny-phi35"), dense = SynthFamilyFile("tiny-qwen2"),
                    moe = SynthFamilyFile("tiny-mixtral"), gpt_oss = SynthFamilyFile("tiny-gpt-oss");
  ASSERT_FALSE(rope.empty());
  ASSERT_FALSE(dense.empty());
  ASSERT_FALSE(moe.empty());
  ASSERT_FALSE(gpt_oss.empty());
  EXPECT_EQ(backend_of(rope, LLM_BACKEND_AUTO, LLM_OK), LLM_BACKEND_CPU);
  EXPECT_EQ(backend_of(dense, LLM_BACKEND_AUTO, LLM_OK), LLM_BACKEND_CUDA);
  EXPECT_EQ(backend_of(moe, LLM_BACKEND_AUTO, LLM_OK), LLM_BACKEND_CUDA);
  EXPECT_EQ(backend_of(rope, LLM_BACKEND_CUDA, LLM_ERR_UNSUPPORTED), -1);
  EXPECT_NE(std::string(llm_last_error()).find("LongRoPE"), std::string::npos) << llm_last_error();
  std::remove(rope.c_str());
  std::remove(dense.c_str());
  EXPECT_EQ(backend_of(gpt_oss, LLM_BACKEND_AUTO, LLM_OK), LLM_BACKEND_CUDA);  // issue 32: gpt-oss runs on CUDA
  EXPECT_EQ(backend_of(gpt_oss, LLM_BACKEND_CUDA, LLM_OK), LLM_BACKEND_CUDA);
  std::remove(moe.c_str());
  std::remove(gpt_oss.c_str());
  if (old_env) {
    setenv("LLM_BACKEND", saved.c_str(), 1);
  } else {
    unsetenv("LLM_BACKEND");
  }
}

// Gemma 3 270M (head_dim 256: every query through the decode kernel; Q4_K_M
// dequantized to BF16 at upload) through the C API: the CPU context's greedy
// tokens up to the first near-tie of the CPU's top two (0.1 nats, as
// test_cuda_capi: the CPU multiplies the Q4_K weights themselves).
using GreedyRun = ApiGreedyRun;  // support/api_greedy.h

TEST(CudaFamilies, Gemma3_270mGreedyMatchesCpuThroughTheCApi) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = RealModelPath(kGemma3);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched (scripts/fetch-models.sh)";
  auto make = [&](int32_t backend) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.backend = backend;
    p.n_threads = 2;
    p.n_ctx = 256;
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
    return ctx;
  };
  llm_ctx* cpu = make(LLM_BACKEND_CPU);
  llm_ctx* gpu = make(LLM_BACKEND_CUDA);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  llm_stats st;
  std::memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(gpu, &st), LLM_OK);
  EXPECT_EQ(st.backend, LLM_BACKEND_CUDA);
  // "The capital of France is" as Gemma 3 tokenizes it would do; any ids
  // exercise the same path, these are 24 ordinary ones.
  std::vector<llm_token> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<llm_token>(1000 + 97 * i));
  prompt.insert(prompt.begin(), 2);  // <bos>
#if defined(__SANITIZE_ADDRESS__)
  const int n = 3;  // the same path at a third of the cost: both backends are ~5x slower under ASan
#else
  const int n = 6;
#endif
  const GreedyRun want = ApiGreedy(cpu, prompt, n), got = ApiGreedy(gpu, prompt, n);
  ASSERT_EQ(want.status, LLM_OK);
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ASSERT_EQ(want.tokens.size(), static_cast<size_t>(n));
  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  size_t i = 0;
  while (i < want.tokens.size() && got.tokens[i] == want.tokens[i]) ++i;
  std::printf("Gemma 3 270M: %zu of %d greedy tokens equal\n", i, n);
  if (i < want.tokens.size()) {
    ASSERT_EQ(want.top[i].size(), 2u);
    EXPECT_EQ(want.top[i][1].token, got.tokens[i]) << "the CUDA token is not the CPU's runner-up";
    EXPECT_LE(want.top[i][0].logprob - want.top[i][1].logprob, 0.1f) << "not a near-tie";
  }
  llm_ctx_destroy(gpu);
  llm_ctx_destroy(cpu);
}

}  // namespace
}  // namespace llm::test
