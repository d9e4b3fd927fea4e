// Gemma 3 on the CPU backend.
//
// Without any model file: a small random Gemma 3 (every feature switched on:
// embedding scale, per-head q/k norms, NEOX RoPE with local/global bases, a
// sliding window that crosses KV block boundaries, post-norms, GeGLU,
// logit soft-capping) against a naive double-precision forward pass written
// out below, plus batching, thread and ISA invariance.
//
// With models/pypi/gemma-3-270m-q4_k_m.gguf (scripts/fetch-models.sh;
// $LLM_GEMMA3 overrides the path): the real model against llama.cpp's
// outputs in tests/data/gemma3_reference.json (tools/llamacpp_reference.py
// gemma3): greedy ids for raw and chat prompts (one long enough for the
// 512-token window to mask keys) and perplexity with 1024-token chunks.
// Without the file those tests skip; a file that is present but not the
// expected one skips locally and fails under CI (CI set).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "llm.h"
#include "model/model.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "util/json.h"

namespace llm::test {
namespace {

// ============================================================== helpers

int32_t Argmax(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return best;
}

// One sequence driven through a backend over blocks 0, 1, 2, ...
class Runner {
 public:
  Runner(const ModelConfig& c, const ModelWeights& w, int32_t max_tokens, int32_t block_size = 16,
         int n_threads = 2)
      : vocab_(c.n_vocab) {
    blocks_.resize((max_tokens + block_size - 1) / block_size);
    std::iota(blocks_.begin(), blocks_.end(), 0);
    auto b = CreateCpuBackend(c, w, KvCacheSpec{block_size, static_cast<int32_t>(blocks_.size())}, n_threads);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (b.ok()) backend_ = std::move(b).value();
  }
  bool ok() const { return backend_ != nullptr; }
  int32_t n_past() const { return n_past_; }

  // Appends `tokens` in one batch; returns the logits ((rows, n_vocab)) of
  // every one of them (kAll), of the last (kLast) or of none (kNone).
  enum Rows { kAll, kLast, kNone };
  std::vector<float> Feed(const std::vector<int32_t>& tokens, Rows which = kLast) {
    const int32_t n = static_cast<int32_t>(tokens.size());
    BatchSeq s;
    s.first = 0;
    s.n_tokens = n;
    s.n_past = n_past_;
    s.block_table = blocks_;
    std::vector<int32_t> rows;
    if (which == kAll) {
      rows.resize(n);
      std::iota(rows.begin(), rows.end(), 0);
    } else if (which == kLast) {
      rows = {n - 1};
    }
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab_));
    Batch b{tokens, std::span<const BatchSeq>(&s, 1), rows};
    Status st = backend_->Forward(b, rows.empty() ? nullptr : logits.data());
    EXPECT_TRUE(st.ok()) << st.message();
    n_past_ += n;
    return logits;
  }

 private:
  int32_t vocab_;
  int32_t n_past_ = 0;
  std::vector<int32_t> blocks_;
  std::unique_ptr<Backend> backend_;
};

// ============================================================== synthetic Gemma 3

struct Mat {  // row-major (rows, cols) F32
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float at(int64_t r, int64_t c) const { return v[r * cols + c]; }
};

struct SynthLayer {
  Mat wq, wk, wv, wo, gate, up, down;
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, post_attn, post_ffn;
};

struct SyntheticGemma {
  ModelConfig config;
  Mat embd;  // tied output
  std::vector<SynthLayer> layers;
  std::vector<float> out_norm;
  ModelWeights weights;  // views of the above
};

WeightView View(const Mat& m) {
  WeightView w;
  w.type = TensorType::F32;
  w.data = m.v.data();
  w.rows = m.rows;
  w.cols = m.cols;
  w.row_bytes = static_cast<size_t>(m.cols) * 4;
  return w;
}

WeightView View(const std::vector<float>& v) {
  WeightView w;
  w.type = TensorType::F32;
  w.data = v.data();
  w.rows = 1;
  w.cols = static_cast<int64_t>(v.size());
  w.row_bytes = v.size() * 4;
  return w;
}

// 4 layers (0 and 2 local with a window of 5, 1 and 3 global), 2 query heads
// and 1 KV head of 32, n_embd 64, n_ff 96, vocabulary 96 unless given.
std::unique_ptr<SyntheticGemma> MakeSyntheticGemma(int32_t vocab = 96) {
  auto m = std::make_unique<SyntheticGemma>();
  ModelConfig& c = m->config;
  c.arch = "gemma3";
  c.arch_kind = ModelArch::kGemma3;
  c.n_vocab = vocab;
  c.n_ctx_train = 128;
  c.n_embd = 64;
  c.n_layer = 4;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 32;
  c.n_ff = 96;
  c.rope_dim = 32;
  c.rope_theta = 1e6f;
  c.rope_theta_swa = 1e4f;
  c.rms_eps = 1e-6f;
  c.tied_embeddings = true;
  c.rope_style = RopeStyle::kNeox;
  c.ffn_act = FfnActivation::kGeluTanh;
  c.embd_scale = std::sqrt(64.0f);
  c.qk_norm = true;
  c.post_norms = true;
  c.sliding_window = 5;
  c.swa_pattern = 2;
  c.final_logit_softcap = 3.0f;  // small enough to bend the logits visibly

  std::mt19937 rng(4321);
  auto mat = [&](int64_t rows, int64_t cols, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    Mat x{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols))};
    for (float& f : x.v) f = d(rng);
    return x;
  };
  auto norm = [&](int64_t n) {
    std::uniform_real_distribution<float> d(0.5f, 1.5f);
    std::vector<float> v(n);
    for (float& f : v) f = d(rng);
    return v;
  };
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  m->embd = mat(c.n_vocab, E, 0.15f);
  for (int l = 0; l < c.n_layer; ++l) {
    SynthLayer L;
    L.attn_norm = norm(E);
    L.wq = mat(Q, E, 0.15f);
    L.wk = mat(KV, E, 0.15f);
    L.wv = mat(KV, E, 0.15f);
    L.wo = mat(E, Q, 0.15f);
    L.ffn_norm = norm(E);
    L.gate = mat(F, E, 0.15f);
    L.up = mat(F, E, 0.15f);
    L.down = mat(E, F, 0.12f);
    L.q_norm = norm(c.head_dim);
    L.k_norm = norm(c.head_dim);
    L.post_attn = norm(E);
    L.post_ffn = norm(E);
    m->layers.push_back(std::move(L));
  }
  m->out_norm = norm(E);

  m->weights.token_embd = View(m->embd);
  m->weights.output = m->weights.token_embd;
  m->weights.output_norm = View(m->out_norm);
  for (const SynthLayer& L : m->layers) {
    LayerWeights w;
    w.attn_norm = View(L.attn_norm);
    w.wq = View(L.wq);
    w.wk = View(L.wk);
    w.wv = View(L.wv);
    w.wo = View(L.wo);
    w.ffn_norm = View(L.ffn_norm);
    w.w_gate = View(L.gate);
    w.w_up = View(L.up);
    w.w_down = View(L.down);
    w.q_norm = View(L.q_norm);
    w.k_norm = View(L.k_norm);
    w.post_attn_norm = View(L.post_attn);
    w.post_ffn_norm = View(L.post_ffn);
    m->weights.layers.push_back(w);
  }
  return m;
}

// ---- the naive reference, in double, straight from the model's definition

using Vec = std::vector<double>;

Vec RmsNorm(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * s * w[i];
  return out;
}

Vec MatVec(const Mat& m, const Vec& x) {
  Vec y(m.rows, 0.0);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t k = 0; k < m.cols; ++k) y[r] += m.at(r, k) * x[k];
  return y;
}

// NEOX rotation of one head: pairs (i, i + d/2).
void RopeNeox(double* h, int d, int64_t pos, double theta) {
  for (int i = 0; i < d / 2; ++i) {
    const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * i / d);
    const double x0 = h[i], x1 = h[i + d / 2];
    h[i] = x0 * std::cos(a) - x1 * std::sin(a);
    h[i + d / 2] = x0 * std::sin(a) + x1 * std::cos(a);
  }
}

double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

// Logits (n_tokens, n_vocab) of a sequence starting at position 0.
std::vector<double> NaiveForward(const SyntheticGemma& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config;
  const int64_t T = static_cast<int64_t>(tokens.size()), E = c.n_embd, hd = c.head_dim;
  const int n_rep = c.n_head / c.n_head_kv;
  std::vector<Vec> x(T, Vec(E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < E; ++i) x[t][i] = m.embd.at(tokens[t], i) * static_cast<double>(c.embd_scale);
  for (int l = 0; l < c.n_layer; ++l) {
    const SynthLayer& L = m.layers[l];
    const bool local = l % c.swa_pattern < c.swa_pattern - 1;
    const double theta = local ? c.rope_theta_swa : c.rope_theta;
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec xn = RmsNorm(x[t], L.attn_norm, c.rms_eps);
      q[t] = MatVec(L.wq, xn);
      k[t] = MatVec(L.wk, xn);
      v[t] = MatVec(L.wv, xn);
      for (int h = 0; h < c.n_head; ++h) {
        Vec qh(q[t].begin() + h * hd, q[t].begin() + (h + 1) * hd);
        qh = RmsNorm(qh, L.q_norm, c.rms_eps);
        RopeNeox(qh.data(), static_cast<int>(hd), t, theta);
        std::copy(qh.begin(), qh.end(), q[t].begin() + h * hd);
      }
      for (int h = 0; h < c.n_head_kv; ++h) {
        Vec kh(k[t].begin() + h * hd, k[t].begin() + (h + 1) * hd);
        kh = RmsNorm(kh, L.k_norm, c.rms_eps);
        RopeNeox(kh.data(), static_cast<int>(hd), t, theta);
        std::copy(kh.begin(), kh.end(), k[t].begin() + h * hd);
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t first = local ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
      Vec att(c.q_dim(), 0.0);
      for (int h = 0; h < c.n_head; ++h) {
        const int kvh = h / n_rep;
        std::vector<double> s;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += q[t][h * hd + d] * k[j][kvh * hd + d];
          s.push_back(dot / std::sqrt(static_cast<double>(hd)));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = first; j <= t; ++j)
          for (int64_t d = 0; d < hd; ++d) att[h * hd + d] += s[j - first] / sum * v[j][kvh * hd + d];
      }
      const Vec o = RmsNorm(MatVec(L.wo, att), L.post_attn, c.rms_eps);
      for (int64_t i = 0; i < E; ++i) x[t][i] += o[i];
      const Vec xn = RmsNorm(x[t], L.ffn_norm, c.rms_eps);
      const Vec g = MatVec(L.gate, xn), u = MatVec(L.up, xn);
      Vec hb(c.n_ff);
      for (int64_t i = 0; i < c.n_ff; ++i) hb[i] = GeluTanh(g[i]) * u[i];
      const Vec f = RmsNorm(MatVec(L.down, hb), L.post_ffn, c.rms_eps);
      for (int64_t i = 0; i < E; ++i) x[t][i] += f[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < T; ++t) {
    const Vec l = MatVec(m.embd, RmsNorm(x[t], m.out_norm, c.rms_eps));
    for (double z : l) logits.push_back(c.final_logit_softcap * std::tanh(z / c.final_logit_softcap));
  }
  return logits;
}

std::vector<int32_t> SomeTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// Prefill of 13 tokens in one batch, then 4 single-token steps: every logit
// row of all 17 positions. Block size 4, so the window of 5 starts inside a
// block and moves across block boundaries.
std::vector<float> RunSynthetic(const SyntheticGemma& m, const ModelConfig& c, int n_threads, int chunk = 13) {
  const std::vector<int32_t> toks = SomeTokens(17, c.n_vocab, 7);
  Runner r(c, m.weights, 17, 4, n_threads);
  if (!r.ok()) return {};
  std::vector<float> out;
  for (size_t i = 0; i < toks.size();) {
    const size_t n = i < 13 ? std::min<size_t>(chunk, 13 - i) : 1;
    const std::vector<float> l = r.Feed(std::vector<int32_t>(toks.begin() + i, toks.begin() + i + n), Runner::kAll);
    out.insert(out.end(), l.begin(), l.end());
    i += n;
  }
  return out;
}

TEST(Gemma3Synthetic, MatchesNaiveForwardPass) {
  auto m = MakeSyntheticGemma();
  const std::vector<float> got = RunSynthetic(*m, m->config, 2);
  const std::vector<double> want = NaiveForward(*m, SomeTokens(17, m->config.n_vocab, 7));
  ASSERT_EQ(got.size(), want.size());
  double worst = 0, spread = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    spread = std::max(spread, std::fabs(want[i]));
  }
  EXPECT_GT(spread, 1.0);  // the cap (3) bends logits of this size
  EXPECT_LT(worst, 2e-5 * m->config.final_logit_softcap) << "largest |logit| " << spread;
}

// Positions inside the first window see every key either way; later ones
// must see fewer keys on the local layers than without a window.
TEST(Gemma3Synthetic, WindowMasksOnlyOlderKeys) {
  auto m = MakeSyntheticGemma();
  ModelConfig no_window = m->config;
  no_window.sliding_window = 1000;  // local layers keep their RoPE base, but mask nothing
  const std::vector<float> a = RunSynthetic(*m, m->config, 1);
  const std::vector<float> b = RunSynthetic(*m, no_window, 1);
  ASSERT_EQ(a.size(), b.size());
  const int V = m->config.n_vocab, W = m->config.sliding_window;
  for (int p = 0; p < 17; ++p) {
    float diff = 0;
    for (int i = 0; i < V; ++i) diff = std::max(diff, std::fabs(a[p * V + i] - b[p * V + i]));
    if (p < W) {
      EXPECT_EQ(diff, 0.0f) << "position " << p;
    } else {
      EXPECT_GT(diff, 1e-3f) << "position " << p;
    }
  }
}

TEST(Gemma3Synthetic, ChunksThreadsAndIsaDoNotChangeLogits) {
  auto m = MakeSyntheticGemma();
  const std::vector<float> ref = RunSynthetic(*m, m->config, 1);
  ASSERT_FALSE(ref.empty());
  for (int chunk : {1, 3, 6}) {
    const std::vector<float> got = RunSynthetic(*m, m->config, 2, chunk);
    ASSERT_EQ(got.size(), ref.size());
    size_t diffs = 0;
    for (size_t i = 0; i < ref.size(); ++i) diffs += got[i] != ref[i];
    EXPECT_EQ(diffs, 0u) << "prefill chunks of " << chunk << " on 2 threads";
  }
  setenv("LLM_CPU_ISA", "generic", 1);
  const std::vector<float> generic = RunSynthetic(*m, m->config, 1);
  unsetenv("LLM_CPU_ISA");
  ASSERT_EQ(generic.size(), ref.size());
  float worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(generic[i] - ref[i]));
  EXPECT_LT(worst, 1e-4f);
}

// A batch of many sequences runs as lanes (one per thread) whose classifier
// rows are cut into chunks of the vocabulary that any thread may take, each
// soft-capped on its own (forward.cpp): every sequence's logits must equal
// those of the sequence run alone, on one thread. Vocabulary 600: three
// chunks per lane, the last a part chunk.
TEST(Gemma3Synthetic, LanesGiveEachSequenceItsOwnLogits) {
  auto m = MakeSyntheticGemma(600);
  const ModelConfig& c = m->config;
  const int V = c.n_vocab, kSeqs = 8, kDecode = 3, kBlock = 4, kPerSeq = 4;  // blocks per sequence
  std::vector<std::vector<int32_t>> toks;
  std::vector<std::vector<float>> alone;
  for (int s = 0; s < kSeqs; ++s) {
    const int prompt = 3 + s % 4;
    toks.push_back(SomeTokens(prompt + kDecode, V, 40 + static_cast<uint32_t>(s)));
    Runner r(c, m->weights, kBlock * kPerSeq, kBlock, 1);
    ASSERT_TRUE(r.ok());
    std::vector<float> l = r.Feed(std::vector<int32_t>(toks[s].begin(), toks[s].begin() + prompt), Runner::kAll);
    for (int i = prompt; i < prompt + kDecode; ++i) {
      const std::vector<float> d = r.Feed({toks[s][i]}, Runner::kAll);
      l.insert(l.end(), d.begin(), d.end());
    }
    alone.push_back(std::move(l));
  }
  auto b = CreateCpuBackend(c, m->weights, KvCacheSpec{kBlock, kSeqs * kPerSeq}, 2);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::vector<int> done(kSeqs, 0);
  std::vector<std::vector<float>> got(kSeqs);
  for (int step = 0; step <= kDecode; ++step) {  // the prompts, then one token each: 8 tokens, lanes
    std::vector<int32_t> tokens;
    std::vector<BatchSeq> seqs;
    std::vector<std::vector<int32_t>> tables(kSeqs);
    for (int s = 0; s < kSeqs; ++s) {
      for (int i = 0; i < kPerSeq; ++i) tables[s].push_back(s * kPerSeq + i);
      BatchSeq q;
      q.first = static_cast<int32_t>(tokens.size());
      q.n_tokens = step == 0 ? 3 + s % 4 : 1;
      q.n_past = done[s];
      q.block_table = tables[s];
      seqs.push_back(q);
      for (int i = 0; i < q.n_tokens; ++i) tokens.push_back(toks[s][done[s] + i]);
    }
    std::vector<int32_t> rows(tokens.size());
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> logits(rows.size() * V);
    const Status st = (*b)->Forward(Batch{tokens, seqs, rows}, logits.data());
    ASSERT_TRUE(st.ok()) << st.message();
    for (int s = 0; s < kSeqs; ++s) {
      got[s].insert(got[s].end(), logits.begin() + static_cast<int64_t>(seqs[s].first) * V,
                    logits.begin() + static_cast<int64_t>(seqs[s].first + seqs[s].n_tokens) * V);
      done[s] += seqs[s].n_tokens;
    }
  }
  for (int s = 0; s < kSeqs; ++s) {
    ASSERT_EQ(got[s].size(), alone[s].size());
    size_t diffs = 0;
    for (size_t i = 0; i < got[s].size(); ++i) diffs += got[s][i] != alone[s][i];
    EXPECT_EQ(diffs, 0u) << "sequence " << s;
  }
}

// gelu_mul of every kernel table against the formula in double, over the
// range where the tanh matters and both tails (-30: e^(-2z) saturates the
// exp clamp; 30: gelu(x) = x).
TEST(Gemma3Synthetic, GeluKernelMatchesFormula) {
  std::vector<const cpu::Kernels*> tables = {&cpu::GenericKernels(), &cpu::BestKernels()};
  std::vector<float> x, u;
  for (float v = -30.0f; v <= 30.0f; v += 0.01171875f) x.push_back(v), u.push_back(1.0f - v / 64.0f);
  x.push_back(0.0f), u.push_back(2.0f);  // and an odd length: the vector tail
  for (const cpu::Kernels* k : tables) {
    SCOPED_TRACE(k->name);
    std::vector<float> g = x;
    k->gelu_mul(g.data(), u.data(), static_cast<int64_t>(g.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = GeluTanh(x[i]) * u[i];
      worst = std::max(worst, std::fabs(g[i] - want) / std::max(1e-3, std::fabs(want)));
    }
    EXPECT_LT(worst, 1e-5);
  }
}

TEST(Gemma3Synthetic, BuiltinChatTemplateIsTheReferenceText) {
  auto t = BuiltinChatTemplate("gemma3");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::string(*t), ReadFile(RepoDir() + "/tests/data/chat/templates/gemma3.jinja"));
  EXPECT_FALSE(BuiltinChatTemplate("llama").has_value());
}

// ============================================================== the real model

#define LOAD_GEMMA3_OR_SKIP(var) LLM_LOAD_REAL_MODEL_OR_SKIP(var, kGemma3)

std::string ModelPath() { return RealModelPath(kGemma3); }

Json Reference() { return LoadReferenceJson("gemma3_reference"); }

TEST(Gemma3, Config) {
  LOAD_GEMMA3_OR_SKIP(m);
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.arch_kind, ModelArch::kGemma3);
  EXPECT_EQ(c.n_layer, 18);
  EXPECT_EQ(c.n_embd, 640);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.head_dim, 256);  // attention.key_length, not n_embd / n_head
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_EQ(c.n_vocab, 262144);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.ffn_act, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_theta_swa, 1e4f);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(640.0f));
  EXPECT_FLOAT_EQ(c.AttnScale(), 1.0f / 16.0f);  // 1/sqrt(query_pre_attn_scalar = head_dim)
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);  // no key in the file
  EXPECT_EQ(c.sliding_window, 512);
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.IsLocalLayer(l), l % 6 != 5) << "layer " << l;
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(m->weights.token_embd.type, TensorType::Q8_0);
  EXPECT_TRUE(m->tokenizer->add_bos());
  EXPECT_EQ(m->tokenizer->bos(), 2);
}

// llama.cpp's converter stores Gemma's RMSNorm scale as 1 + w, so the runtime
// multiplies by the stored weight as it is: weights centred near 0 (the raw
// checkpoint's w) would mean a missing +1. Every attention-input norm of this
// file averages well above 1.
TEST(Gemma3, NormWeightsIncludeTheUnitOffset) {
  LOAD_GEMMA3_OR_SKIP(m);
  for (int l = 0; l < m->config.n_layer; ++l) {
    const WeightView& w = m->weights.layers[l].attn_norm;
    ASSERT_EQ(w.type, TensorType::F32);
    const auto* v = static_cast<const float*>(w.data);
    double mean = 0;
    for (int64_t i = 0; i < w.cols; ++i) mean += v[i];
    mean /= static_cast<double>(w.cols);
    EXPECT_GT(mean, 1.0) << "layer " << l;
  }
}

// Greedy continuations, step by step, teacher-forced: every step is fed
// llama.cpp's token, so a near-tie that flips does not end the comparison.
// Each step, llama.cpp's token must be our argmax or within kMaxGap of it.
//
// Why a gap and not exact ids: this model is very sensitive to rounding.
// Over the 1024 positions of the perplexity chunk, llama.cpp's own greedy
// choice changes at 55 positions (margins up to 0.47) between its F16 and
// F32 KV caches; ours differs from its F32-cache run at 55 positions too
// (margins up to 0.62), with the same spread of top-2 margin changes (mean
// 0.125, p99 0.53 vs 0.59). Sources besides summation order: llama.cpp
// tabulates GELU in F16 and quantizes the K-quant matmuls' inputs per 256
// (Q8_K); llmrt computes GELU in F32 and quantizes per 32.
struct GreedyTally {
  int steps = 0, same = 0;
  double worst_gap = 0;
};

void CompareGreedy(const Model& m, const std::string& label, const std::vector<int32_t>& prompt_ids, const Json& g,
                   GreedyTally* tally) {
  SCOPED_TRACE(label);
  constexpr double kMaxGap = 0.75;
  const std::vector<int32_t> want = JsonInts(*g.Find("ids"));
  const Json& margins = *g.Find("margins");
  Runner r(m.config, m.weights, static_cast<int32_t>(prompt_ids.size() + want.size()) + 1);
  ASSERT_TRUE(r.ok());
  std::vector<float> logits = r.Feed(prompt_ids);
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t tok = Argmax(logits.data(), m.config.n_vocab);
    const double gap = logits[tok] - logits[want[i]];
    ++tally->steps;
    if (tok == want[i]) {
      ++tally->same;
    } else {
      std::printf("  '%s' step %zu: we prefer %d by %.4f; llama.cpp's %d led by %.4f\n", label.c_str(), i, tok, gap,
                  want[i], margins[i].as_double());
      tally->worst_gap = std::max(tally->worst_gap, gap);
      EXPECT_LT(gap, kMaxGap) << "step " << i;
    }
    if (i + 1 == want.size() || m.tokenizer->IsEog(want[i])) break;
    logits = r.Feed({want[i]});
  }
}

TEST(Gemma3, GreedyMatchesReference) {
  LOAD_GEMMA3_OR_SKIP(m);
  const Json ref = Reference();
  const Json* greedy = ref.Find("greedy");
  ASSERT_NE(greedy, nullptr);
  GreedyTally t;
  int long_prompts = 0;
  for (const Json& g : greedy->array()) {
    const std::string& prompt = g.Find("prompt")->as_string();
    auto ids = m->tokenizer->Encode(prompt, true, false);
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(*ids, JsonInts(*g.Find("prompt_ids"))) << prompt.substr(0, 60);
    if (static_cast<int32_t>(ids->size()) > m->config.sliding_window) ++long_prompts;
    CompareGreedy(*m, prompt.substr(0, 40), *ids, g, &t);
  }
  std::printf("  greedy: our argmax is llama.cpp's token at %d of %d steps; worst gap %.4f\n", t.same, t.steps,
              t.worst_gap);
  EXPECT_GE(long_prompts, 1);  // the window is exercised in prefill and decode
  EXPECT_GE(t.same, t.steps * 9 / 10);
}

// Chat prompts: the built-in Gemma 3 template (the GGUF has none) renders
// what jinja2 rendered, tokenizes to llama.cpp's ids, and continues the same.
TEST(Gemma3, ChatGreedyMatchesReference) {
  LOAD_GEMMA3_OR_SKIP(m);
  const Json ref = Reference();
  const Json* chat = ref.Find("chat");
  ASSERT_NE(chat, nullptr);
  ASSERT_FALSE(m->file->Has("tokenizer.chat_template"));
  auto tmpl = ChatTemplate::Create(*BuiltinChatTemplate(m->config.arch));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.bos_token = "<bos>";
  opts.eos_token = "<eos>";
  GreedyTally t;
  for (const Json& g : chat->array()) {
    std::vector<ChatMessage> msgs;
    for (const Json& msg : g.Find("messages")->array())
      msgs.push_back({msg.Find("role")->as_string(), msg.Find("content")->as_string()});
    auto rendered = (*tmpl)->Apply(msgs, opts);
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    ASSERT_EQ(*rendered, g.Find("rendered")->as_string());
    const bool has_bos = rendered->rfind("<bos>", 0) == 0;
    auto ids = m->tokenizer->Encode(*rendered, !has_bos, true);
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(*ids, JsonInts(*g.Find("prompt_ids")));
    CompareGreedy(*m, msgs.back().content, *ids, g, &t);
  }
  std::printf("  chat greedy: our argmax is llama.cpp's token at %d of %d steps; worst gap %.4f\n", t.same, t.steps,
              t.worst_gap);
  EXPECT_GE(t.same, t.steps * 9 / 10);
}

// Perplexity the llama.cpp way (see tools/llamacpp_reference.py). A chunk's
// first half is fed without logits, the scored half in batches of 128, so
// the window crosses batch boundaries too.
TEST(Gemma3, PerplexityMatchesReference) {
  LOAD_GEMMA3_OR_SKIP(m);
  const Json ref = Reference();
  const Json* p = ref.Find("perplexity");
  ASSERT_NE(p, nullptr);
  std::string text = ReadFile(RepoDir() + "/" + p->Find("file")->as_string());
  ASSERT_FALSE(text.empty());
  if (text.back() == '\n') text.pop_back();
  auto toks = m->tokenizer->Encode(text, true, false);
  ASSERT_TRUE(toks.ok());
  ASSERT_EQ(*toks, JsonInts(*p->Find("token_ids")));
  const int32_t ctx = static_cast<int32_t>(p->Find("ctx")->as_int());
  const int32_t n_chunks = static_cast<int32_t>(toks->size()) / ctx;
  ASSERT_GE(n_chunks, 1);
  ASSERT_GT(ctx / 2, m->config.sliding_window - 1);  // every scored position sees a masked key
  const int32_t V = m->config.n_vocab;
  double nll = 0;
  int64_t count = 0;
  for (int32_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(toks->begin() + int64_t{c} * ctx, toks->begin() + int64_t{c + 1} * ctx);
    chunk[0] = m->tokenizer->bos();
    Runner r(m->config, m->weights, ctx);
    ASSERT_TRUE(r.ok());
    r.Feed(std::vector<int32_t>(chunk.begin(), chunk.begin() + ctx / 2), Runner::kNone);
    for (int32_t b = ctx / 2; b < ctx - 1; b += 128) {
      const int32_t e = std::min(b + 128, ctx - 1);
      const std::vector<float> logits =
          r.Feed(std::vector<int32_t>(chunk.begin() + b, chunk.begin() + e), Runner::kAll);
      for (int32_t pos = b; pos < e; ++pos) {
        const float* row = logits.data() + static_cast<size_t>(pos - b) * V;
        double mx = row[0];
        for (int32_t i = 1; i < V; ++i) mx = std::max(mx, static_cast<double>(row[i]));
        double sum = 0;
        for (int32_t i = 0; i < V; ++i) sum += std::exp(row[i] - mx);
        nll += -(row[chunk[pos + 1]] - mx - std::log(sum));
        ++count;
      }
    }
  }
  const double ppl = std::exp(nll / static_cast<double>(count));
  const double want = p->Find("ppl")->as_double();
  std::printf("  perplexity %.4f over %lld tokens (llama.cpp %.4f, %+.3f%%)\n", ppl, static_cast<long long>(count),
              want, 100 * (ppl / want - 1));
  EXPECT_NEAR(ppl, want, 0.005 * want);
}

// Through the C API: a gemma3 model gets the built-in template.
TEST(Gemma3, CApiAppliesBuiltinTemplate) {
  LOAD_GEMMA3_OR_SKIP(m);
  m.reset();
  const Json ref = Reference();
  const Json& g = ref.Find("chat")->array().at(0);
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  const std::string path = ModelPath();
  params.model_path = path.c_str();
  params.n_ctx = 256;
  params.n_threads = 1;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&params, &ctx), LLM_OK) << llm_last_error();
  llm_model_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(llm_model_get_info(ctx, &info), LLM_OK);
  EXPECT_STREQ(info.arch, "gemma3");
  const Json& msg = g.Find("messages")->array().at(0);
  llm_chat_message cm{msg.Find("role")->as_string().c_str(), msg.Find("content")->as_string().c_str()};
  std::string out(4096, '\0');
  size_t n = 0;
  ASSERT_EQ(llm_chat_apply_template(ctx, nullptr, &cm, 1, 1, out.data(), out.size(), &n), LLM_OK)
      << llm_last_error();
  out.resize(n);
  EXPECT_EQ(out, g.Find("rendered")->as_string());
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
