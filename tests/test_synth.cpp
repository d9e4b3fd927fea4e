// llm-synth's model files: a synthesised `tiny` model loads through our GGUF
// loader (config, weights, tokenizer) and runs a forward pass on the CPU
// backend; the same seed gives the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "model/model.h"
#include "support/test_paths.h"
#include "synth_model.h"
#include "synth_quant.h"

namespace llm::test {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/llmrt_synth_" + std::to_string(::getpid()) + "_" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Prefill `tokens` then decode 4 steps greedily on the CPU backend; every
// logit finite.
void RunForward(const Model& m) {
  KvCacheSpec kv{16, 8};
  auto b = CreateCpuBackend(m.config, m.weights, kv, 2);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::vector<int32_t> table = {3, 1, 4, 0, 5, 2, 6, 7};
  std::vector<llm_token> tokens = {1, 5, 17, 100, 250, 7, 9};
  std::vector<float> logits(m.config.n_vocab);
  int32_t n_past = 0;
  for (int step = 0; step < 5; ++step) {
    BatchSeq s{0, static_cast<int32_t>(tokens.size()), n_past, table};
    const int32_t last = static_cast<int32_t>(tokens.size()) - 1;
    Batch batch{tokens, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&last, 1)};
    ASSERT_TRUE((*b)->Forward(batch, logits.data()).ok());
    int best = 0;
    for (int i = 0; i < m.config.n_vocab; ++i) {
      ASSERT_TRUE(std::isfinite(logits[i])) << "step " << step << " logit " << i;
      if (logits[i] > logits[best]) best = i;
    }
    n_past += static_cast<int32_t>(tokens.size());
    tokens = {best};
  }
}

TEST(Synth, TinyWithSyntheticVocabularyLoadsAndRuns) {
  const synth::SynthShape* shape = synth::FindSynthShape("tiny");
  ASSERT_NE(shape, nullptr);
  const std::string path = TempPath("tiny.gguf");
  synth::SynthOptions o;
  ASSERT_TRUE(synth::WriteSynthModel(*shape, o, path).ok());
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelConfig& c = (*m)->config;
  EXPECT_EQ(c.n_embd, shape->n_embd);
  EXPECT_EQ(c.n_layer, shape->n_layer);
  EXPECT_EQ(c.n_head, shape->n_head);
  EXPECT_EQ(c.n_head_kv, shape->n_head_kv);
  EXPECT_EQ(c.head_dim, shape->head_dim);
  EXPECT_EQ(c.n_ff, shape->n_ff);
  EXPECT_EQ(c.n_vocab, shape->n_vocab);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ((*m)->weights.token_embd.type, TensorType::BF16);
  auto ids = (*m)->tokenizer->Encode("hi", true, false);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  EXPECT_EQ((*ids)[0], 1);  // BOS
  RunForward(**m);

  // Same seed: same file; another seed: another file.
  const std::string again = TempPath("tiny2.gguf"), other = TempPath("tiny3.gguf");
  o.threads = 1;
  ASSERT_TRUE(synth::WriteSynthModel(*shape, o, again).ok());
  o.seed = 99;
  ASSERT_TRUE(synth::WriteSynthModel(*shape, o, other).ok());
  EXPECT_EQ(Slurp(path), Slurp(again));
  EXPECT_NE(Slurp(path), Slurp(other));
  std::remove(path.c_str());
  std::remove(again.c_str());
  std::remove(other.c_str());
}

TEST(Synth, VocabularyCopiedFromAnotherModel) {
  auto src = GgufFile::Open(RepoDir() + "/models/stories260K-f32.gguf");
  ASSERT_TRUE(src.ok()) << src.status().message();
  synth::SynthOptions o;
  o.vocab = src->get();
  o.type = TensorType::F16;
  const std::string path = TempPath("tiny_vocab.gguf");
  ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny"), o, path).ok());
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config.n_vocab, 512);
  auto ids = (*m)->tokenizer->Encode("Once upon a time", true, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));  // stories260K's own tokenization
  RunForward(**m);
  std::remove(path.c_str());
}

TEST(Synth, RealShapesAreKnown) {
  for (const char* name : {"llama-3.2-1b", "llama-3.1-8b"}) {
    const synth::SynthShape* s = synth::FindSynthShape(name);
    ASSERT_NE(s, nullptr) << name;
    const double b = synth::SynthParams(*s, s->n_vocab) / 1e9;
    EXPECT_NEAR(b, std::string(name) == "llama-3.2-1b" ? 1.24 : 8.03, 0.03) << name;
  }
}

// A quantized mix (e.g. llm-synth --type lowbit: IQ4_XS, IQ4_NL, Q3_K, Q2_K
// and Q6_K matrices) loads, and the CPU backend on it (Q8 activations against
// the IQ kernels; IQ4_XS, IQ4_NL and Q6_K packed) follows the CPU backend on the same weights
// dequantized to F32: logits within 4e-2 relative L2 at every step of a
// 13-token prefill and 4 greedy decode steps, and the same argmax or a
// near-tie within 5% of the logit range.
void CheckMixAgainstDequantized(const synth::SynthOptions& o, const char* file,
                                const std::function<void(const ModelWeights&)>& check_types) {
  const std::string path = TempPath(file);
  ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny"), o, path).ok());
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelWeights& w = (*m)->weights;
  check_types(w);
  RunForward(**m);

  std::vector<std::vector<float>> store;
  store.reserve(64);
  ModelWeights wf = w;
  auto to_f32 = [&](WeightView* v) {
    if (v->empty()) return;
    store.emplace_back(static_cast<size_t>(v->rows * v->cols));
    for (int64_t r = 0; r < v->rows; ++r) cpu::DequantizeRow(*v, r, store.back().data() + r * v->cols);
    *v = WeightView{TensorType::F32, store.back().data(), v->rows, v->cols, static_cast<size_t>(v->cols) * 4};
  };
  to_f32(&wf.token_embd);
  to_f32(&wf.output);
  for (LayerWeights& L : wf.layers)
    for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) to_f32(v);
  auto quant = CreateCpuBackend((*m)->config, w, KvCacheSpec{16, 16}, 1);
  auto exact = CreateCpuBackend((*m)->config, wf, KvCacheSpec{16, 16}, 1);
  ASSERT_TRUE(quant.ok() && exact.ok());
  const int32_t V = (*m)->config.n_vocab;
  std::vector<int32_t> table = {3, 1, 4};
  std::vector<llm_token> toks(13);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<llm_token>((i * 37 + 5) % V);
  int32_t n_past = 0;
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const BatchSeq seq{0, static_cast<int32_t>(toks.size()), n_past, table};
    const int32_t last = static_cast<int32_t>(toks.size()) - 1;
    const Batch b{toks, std::span<const BatchSeq>(&seq, 1), std::span<const int32_t>(&last, 1)};
    std::vector<float> got(V), ref(V);
    ASSERT_TRUE((*quant)->Forward(b, got.data()).ok());
    ASSERT_TRUE((*exact)->Forward(b, ref.data()).ok());
    double num = 0, den = 0;
    for (int32_t i = 0; i < V; ++i) {
      num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
      den += static_cast<double>(ref[i]) * ref[i];
    }
    EXPECT_LT(std::sqrt(num / den), 4e-2);
    const auto top_r = std::max_element(ref.begin(), ref.end()) - ref.begin();
    const auto top_g = std::max_element(got.begin(), got.end()) - got.begin();
    const float range = ref[top_r] - *std::min_element(ref.begin(), ref.end());
    if (top_r != top_g) EXPECT_LE(ref[top_r] - ref[top_g], 0.05f * range);
    n_past += static_cast<int32_t>(toks.size());
    toks = {static_cast<llm_token>(top_r)};
  }
}

TEST(Synth, LowBitMixLoadsAndRunsLikeItsDequantizedWeights) {
  synth::SynthOptions o;
  o.low_bit = true;
  o.stddev = 0.05f;
  CheckMixAgainstDequantized(o, "lowbit.gguf", [](const ModelWeights& w) {
    EXPECT_EQ(w.token_embd.type, TensorType::IQ4_XS);
    EXPECT_EQ(w.layers[0].wq.type, TensorType::Q3_K);
    EXPECT_EQ(w.layers[0].wv.type, TensorType::IQ4_NL);
    EXPECT_EQ(w.layers[0].w_up.type, TensorType::Q2_K);
    EXPECT_EQ(w.layers[0].w_down.type, TensorType::IQ4_XS);
    EXPECT_EQ(w.output.type, TensorType::Q6_K);
  });
}

// The same for the lattice mix (llm-synth --type iqmix: IQ3_XXS, IQ3_S,
// IQ2_XS, IQ2_S, IQ2_XXS and Q6_K matrices; the fused [Wq; Wk; Wv]
// IQ3_XXS|IQ3_XXS|IQ2_XS).
TEST(Synth, LatticeMixLoadsAndRunsLikeItsDequantizedWeights) {
  synth::SynthOptions o;
  o.iq_mix = true;
  o.stddev = 0.05f;
  CheckMixAgainstDequantized(o, "iqmix.gguf", [](const ModelWeights& w) {
    EXPECT_EQ(w.token_embd.type, TensorType::IQ3_XXS);
    EXPECT_EQ(w.layers[0].wq.type, TensorType::IQ3_XXS);
    EXPECT_EQ(w.layers[0].wv.type, TensorType::IQ2_XS);
    EXPECT_EQ(w.layers[0].wo.type, TensorType::IQ3_S);
    EXPECT_EQ(w.layers[0].w_up.type, TensorType::IQ2_XXS);
    EXPECT_EQ(w.layers[1].w_down.type, TensorType::IQ2_S);
    EXPECT_EQ(w.output.type, TensorType::Q6_K);
  });
}

// The synthesizer's lattice encoder is a quantizer, not noise: N(0, 1)
// weights come back within the relative L2 error of a 2- or 3-bit code.
TEST(Synth, LatticeEncodingFollowsTheWeights) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(4096), y(4096);
  for (float& v : x) v = nd(rng);
  for (auto [t, bound] : {std::pair{TensorType::IQ2_XXS, 0.45}, std::pair{TensorType::IQ2_XS, 0.4},
                          std::pair{TensorType::IQ2_S, 0.4}, std::pair{TensorType::IQ3_XXS, 0.25},
                          std::pair{TensorType::IQ3_S, 0.25}}) {
    std::vector<char> enc(synth::EncodedBytes(t, 4096));
    synth::EncodeQuant(t, x.data(), 4096, 1.0f, enc.data());
    cpu::DequantizeBlocks(t, enc.data(), 4096, y.data());
    double num = 0, den = 0;
    for (int i = 0; i < 4096; ++i) num += (y[i] - x[i]) * (y[i] - x[i]), den += x[i] * x[i];
    std::printf("type %d: relative L2 error %.4f\n", static_cast<int>(t), std::sqrt(num / den));
    EXPECT_LT(std::sqrt(num / den), bound) << static_cast<int>(t);
  }
}

}  // namespace
}  // namespace llm::test
