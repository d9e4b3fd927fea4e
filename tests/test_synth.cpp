// llm-synth's model files: a synthesised `tiny` model loads through our GGUF
// loader (config, weights, tokenizer) and runs a forward pass on the CPU
// backend; the same seed gives the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "backend/backend.h"
#include "model/model.h"
#include "support/test_paths.h"
#include "synth_model.h"

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

}  // namespace
}  // namespace llm::test
