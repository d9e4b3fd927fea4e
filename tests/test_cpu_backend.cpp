// CPU backend: golden greedy runs against llama.cpp, reference logits,
// batching / chunking / thread-count invariance, batch validation, KV block
// copies, and every weight type on a synthetic model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/encoder_matmul.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/rope.h"
#include "backend/validate.h"
#include "model/gguf.h"
#include "support/test_paths.h"
#include "util/fp16.h"
#include "util/json.h"

namespace llm {
namespace {

// ============================================================== helpers

struct LoadedModel {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
};

std::unique_ptr<LoadedModel> LoadModel(const std::string& name) {
  auto m = std::make_unique<LoadedModel>();
  auto file = GgufFile::Open(test::RepoDir() + "/models/" + name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  m->file = std::move(file).value();
  auto config = ModelConfig::FromGguf(*m->file);
  EXPECT_TRUE(config.ok()) << config.status().message();
  if (!config.ok()) return nullptr;
  m->config = config.value();
  auto weights = ModelWeights::FromGguf(*m->file, m->config);
  EXPECT_TRUE(weights.ok()) << weights.status().message();
  if (!weights.ok()) return nullptr;
  m->weights = std::move(weights).value();
  return m;
}

std::unique_ptr<Backend> MakeBackend(const LoadedModel& m, int n_blocks, int block_size, int n_threads) {
  KvCacheSpec kv;
  kv.block_size = block_size;
  kv.n_blocks = n_blocks;
  auto b = CreateCpuBackend(m.config, m.weights, kv, n_threads);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(b).value() : nullptr;
}

// One sequence driven through a backend: feeds tokens, returns the logits of
// every token fed (rows × n_vocab).
struct SeqRunner {
  Backend* backend;
  int32_t n_vocab;
  std::vector<int32_t> table;
  int32_t n_past = 0;

  std::vector<float> Feed(const std::vector<int32_t>& tokens, bool all_logits = true) {
    BatchSeq s;
    s.first = 0;
    s.n_tokens = static_cast<int32_t>(tokens.size());
    s.n_past = n_past;
    s.block_table = table;
    std::vector<int32_t> rows;
    if (all_logits) {
      rows.resize(tokens.size());
      std::iota(rows.begin(), rows.end(), 0);
    } else {
      rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
    Batch b;
    b.tokens = tokens;
    b.seqs = std::span<const BatchSeq>(&s, 1);
    b.logit_rows = rows;
    std::vector<float> logits(rows.size() * n_vocab);
    Status st = backend->Forward(b, logits.data());
    EXPECT_TRUE(st.ok()) << st.message();
    n_past += s.n_tokens;
    return logits;
  }
};

std::vector<int32_t> Iota(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

int ArgMax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

double LogSoftmaxAt(const float* v, int n, int i) {
  const double mx = *std::max_element(v, v + n);
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += std::exp(static_cast<double>(v[j]) - mx);
  return static_cast<double>(v[i]) - mx - std::log(sum);
}

std::vector<int32_t> JsonInts(const Json& a) {
  std::vector<int32_t> v;
  for (const Json& e : a.array()) v.push_back(static_cast<int32_t>(e.as_int()));
  return v;
}

// A deterministic token sequence of length n within the vocabulary.
std::vector<int32_t> SomeTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  v[0] = 1;
  for (int i = 1; i < n; ++i) v[i] = static_cast<int32_t>(rng() % vocab);
  return v;
}

void ExpectBitwiseEqual(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t mismatches = 0;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      ++mismatches;
      worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
  }
  EXPECT_EQ(mismatches, 0u) << what << ": largest difference " << worst;
}

// ============================================================== golden runs

// Every entry of the llama.cpp greedy golden file: prefill the prompt in one
// batch, then decode 200 tokens one at a time.
// The batch check both backends run (backend/validate.h): what it learns
// for the layouts, and the faults only it names now (the CPU and CUDA
// backends each had their own copy of these loops).
TEST(BatchCheck, OwnershipExtentAndFirstFault) {
  const BatchLimits lim{/*n_vocab=*/10, /*capacity=*/64, /*block_size=*/4, /*n_blocks=*/16};
  const std::vector<int32_t> t0 = {0, 1}, t1 = {2, 3, 4};
  const std::vector<llm_token> tok = {1, 2, 3, 4, 5};
  std::vector<BatchSeq> seqs = {{0, 2, 5, t0}, {2, 3, 0, t1}};  // positions 5..6 and 0..2
  const std::vector<int32_t> rows = {1, 4};
  std::vector<int32_t> seq_of;
  auto e = CheckBatch(Batch{tok, seqs, rows}, true, lim, &seq_of);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->max_keys, 7);
  EXPECT_EQ(e->n_table_blocks, 2 + 1);
  EXPECT_EQ(seq_of, (std::vector<int32_t>{0, 0, 1, 1, 1}));

  EXPECT_EQ(CheckBatch(Batch{tok, seqs, rows}, false, lim, &seq_of).status().message(), "logits output is NULL");
  seqs[1].first = 1;  // token 1 in both, token 4 in none
  seqs[1].n_tokens = 3;
  EXPECT_EQ(CheckBatch(Batch{tok, seqs, rows}, true, lim, &seq_of).status().message(),
            "batch token 1 belongs to two sequences");
  seqs[1].first = 2;
  seqs[1].n_tokens = 2;
  EXPECT_EQ(CheckBatch(Batch{tok, seqs, rows}, true, lim, &seq_of).status().message(),
            "batch token 4 belongs to no sequence");
}

TEST(CpuBackend, GoldenGreedyMatchesLlamaCpp) {
  auto parsed = ParseJson(test::ReadFile(test::DataDir() + "/llama.cpp/stories260K-greedy.json"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto f32 = LoadModel("stories260K-f32.gguf");
  auto f16 = LoadModel("stories260K-f16.gguf");
  ASSERT_TRUE(f32 && f16);

  int entries = 0;
  for (const Json& e : parsed.value().array()) {
    const bool is_f32 = e.Find("weights")->as_string() == "F32";
    const LoadedModel& m = is_f32 ? *f32 : *f16;
    const std::vector<int32_t> prompt = JsonInts(*e.Find("prompt_ids"));
    const std::vector<int32_t> expected = JsonInts(*e.Find("generated_ids"));
    std::vector<double> expected_lp;
    for (const Json& v : e.Find("generated_logprobs")->array()) expected_lp.push_back(v.as_double());
    const int V = m.config.n_vocab;

    auto backend = MakeBackend(m, 16, 16, 1);
    ASSERT_TRUE(backend);
    SeqRunner run{backend.get(), V, Iota(16)};
    std::vector<float> logits = run.Feed(prompt, /*all_logits=*/false);
    std::vector<int32_t> got;
    double worst_lp = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const int tok = ArgMax(logits.data(), V);
      got.push_back(tok);
      if (is_f32) worst_lp = std::max(worst_lp, std::fabs(LogSoftmaxAt(logits.data(), V, tok) - expected_lp[i]));
      logits = run.Feed({tok});
    }
    EXPECT_EQ(got, expected) << "prompt: \"" << e.Find("prompt")->as_string() << "\" (" << (is_f32 ? "F32" : "F16")
                             << ")";
    if (is_f32) {
      EXPECT_LT(worst_lp, 1e-4) << "prompt: \"" << e.Find("prompt")->as_string() << "\"";
    }
    ++entries;
  }
  EXPECT_EQ(entries, 8);
}

// Logits at positions 0..3 against an independent NumPy float32 forward pass.
TEST(CpuBackend, ReferenceLogitsPositions0To3) {
  auto parsed = ParseJson(test::ReadFile(test::DataDir() + "/stories260K/stories260K-reference-greedy.json"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const std::vector<int32_t> all = JsonInts(*parsed.value().Find("tokens_including_bos"));
  const Json& ref = *parsed.value().Find("logits_pos0_3");
  ASSERT_EQ(ref.size(), 4u);
  const int V = m->config.n_vocab;

  auto backend = MakeBackend(*m, 4, 16, 1);
  SeqRunner run{backend.get(), V, Iota(4)};
  const std::vector<float> logits = run.Feed({all.begin(), all.begin() + 4});
  double worst = 0;
  for (int p = 0; p < 4; ++p) {
    ASSERT_EQ(ref[p].size(), static_cast<size_t>(V));
    for (int i = 0; i < V; ++i) worst = std::max(worst, std::fabs(logits[p * V + i] - ref[p][i].as_double()));
  }
  EXPECT_LT(worst, 1e-4);

  // The 257-token greedy run from BOS.
  auto backend2 = MakeBackend(*m, 17, 16, 1);
  SeqRunner run2{backend2.get(), V, Iota(17)};
  std::vector<float> lg = run2.Feed({all[0]});
  for (size_t i = 1; i < all.size(); ++i) {
    const int tok = ArgMax(lg.data(), V);
    ASSERT_EQ(tok, all[i]) << "at generated index " << i - 1;
    lg = run2.Feed({tok});
  }
}

// ============================================================== invariances

// Three sequences mixed in each step (prefill chunks beside decode tokens),
// with shuffled, non-contiguous block tables, give bitwise the logits each
// sequence gets alone in one prefill.
TEST(CpuBackend, BatchCompositionDoesNotChangeLogits) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  const int kBlock = 4;
  const std::vector<int> lengths = {23, 9, 14};
  std::vector<std::vector<int32_t>> toks;
  std::vector<std::vector<float>> alone;
  for (size_t s = 0; s < lengths.size(); ++s) {
    toks.push_back(SomeTokens(lengths[s], V, 100 + static_cast<uint32_t>(s)));
    auto b = MakeBackend(*m, 8, kBlock, 1);
    SeqRunner r{b.get(), V, Iota(8)};
    alone.push_back(r.Feed(toks[s]));
  }

  // Shuffled pool of 24 blocks handed out 8 per sequence.
  std::vector<int32_t> ids = Iota(24);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  std::vector<std::vector<int32_t>> tables(3);
  for (int s = 0; s < 3; ++s) tables[s].assign(ids.begin() + 8 * s, ids.begin() + 8 * (s + 1));

  auto backend = MakeBackend(*m, 24, kBlock, 2);
  // Tokens each sequence takes per step (0: sits out).
  const std::vector<std::vector<int>> plan = {{5, 9, 1}, {7, 0, 1}, {1, 0, 12}, {10, 0, 0}};
  std::vector<int> done(3, 0);
  std::vector<std::vector<float>> mixed(3);
  for (const auto& step : plan) {
    std::vector<int32_t> tokens, rows;
    std::vector<BatchSeq> seqs;
    for (int s : {2, 0, 1}) {  // not in sequence-id order
      if (step[s] == 0) continue;
      BatchSeq q;
      q.first = static_cast<int32_t>(tokens.size());
      q.n_tokens = step[s];
      q.n_past = done[s];
      q.block_table = tables[s];
      seqs.push_back(q);
      for (int i = 0; i < step[s]; ++i) tokens.push_back(toks[s][done[s] + i]);
    }
    rows = Iota(static_cast<int>(tokens.size()));
    Batch b{tokens, seqs, rows};
    std::vector<float> logits(rows.size() * V);
    ASSERT_TRUE(backend->Forward(b, logits.data()).ok());
    for (const BatchSeq& q : seqs) {
      const int s = q.block_table.data() == tables[0].data() ? 0 : q.block_table.data() == tables[1].data() ? 1 : 2;
      mixed[s].insert(mixed[s].end(), logits.begin() + q.first * V, logits.begin() + (q.first + q.n_tokens) * V);
      done[s] += q.n_tokens;
    }
  }
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(done[s], lengths[s]);
    ExpectBitwiseEqual(mixed[s], alone[s], "sequence " + std::to_string(s));
  }
}

// Batches of many sequences run as one lane per thread, each a whole pass
// over its share (forward.cpp, SplitBySequences): every sequence's logits must
// be those of the sequence run alone, for lanes of even and uneven shares,
// and for batches the split refuses (one sequence too long to balance).
TEST(CpuBackend, SequenceLanesGiveEachSequenceItsOwnLogits) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  const int kBlock = 8, kPer = 8;
  const std::vector<int> prompt = {3, 17, 1, 6, 9, 2, 30, 4, 1, 11, 5, 2, 7};
  const int S = static_cast<int>(prompt.size()), kDecode = 4;
  std::vector<std::vector<int32_t>> toks;
  std::vector<std::vector<float>> alone;
  for (int s = 0; s < S; ++s) {
    toks.push_back(SomeTokens(prompt[s] + kDecode, V, 500 + static_cast<uint32_t>(s)));
    auto b = MakeBackend(*m, kPer, kBlock, 1);
    SeqRunner r{b.get(), V, Iota(kPer)};
    alone.push_back(r.Feed(toks[s]));
  }
  for (int threads : {2, 3}) {
    auto backend = MakeBackend(*m, S * kPer, kBlock, threads);
    const std::vector<int32_t> ids = Iota(S * kPer);
    std::vector<std::vector<int32_t>> tables(S);
    for (int s = 0; s < S; ++s) tables[s].assign(ids.begin() + kPer * s, ids.begin() + kPer * (s + 1));
    std::vector<int> done(S, 0);
    std::vector<std::vector<float>> got(S);
    for (int step = 0; step <= kDecode; ++step) {  // the prompts, then one token each
      std::vector<int32_t> tokens;
      std::vector<BatchSeq> seqs;
      for (int s = 0; s < S; ++s) {
        BatchSeq q;
        q.first = static_cast<int32_t>(tokens.size());
        q.n_tokens = step == 0 ? prompt[s] : 1;
        q.n_past = done[s];
        q.block_table = tables[s];
        seqs.push_back(q);
        for (int i = 0; i < q.n_tokens; ++i) tokens.push_back(toks[s][done[s] + i]);
      }
      const std::vector<int32_t> rows = Iota(static_cast<int>(tokens.size()));
      std::vector<float> logits(rows.size() * V);
      ASSERT_TRUE(backend->Forward(Batch{tokens, seqs, rows}, logits.data()).ok());
      for (int s = 0; s < S; ++s) {
        const BatchSeq& q = seqs[s];
        got[s].insert(got[s].end(), logits.begin() + q.first * V, logits.begin() + (q.first + q.n_tokens) * V);
        done[s] += q.n_tokens;
      }
    }
    for (int s = 0; s < S; ++s)
      ExpectBitwiseEqual(got[s], alone[s], std::to_string(threads) + " threads, sequence " + std::to_string(s));
  }
}

TEST(CpuBackend, ChunkedPrefillEqualsOneShot) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  const std::vector<int32_t> prompt = SomeTokens(40, V, 3);
  auto a = MakeBackend(*m, 4, 16, 1);
  SeqRunner one{a.get(), V, Iota(4)};
  const std::vector<float> ref = one.Feed(prompt);

  auto b = MakeBackend(*m, 4, 16, 1);
  SeqRunner chunked{b.get(), V, {3, 1, 0, 2}};
  std::vector<float> got;
  for (size_t i = 0; i < prompt.size(); i += 3) {
    const size_t e = std::min(prompt.size(), i + 3);
    const std::vector<float> l = chunked.Feed({prompt.begin() + i, prompt.begin() + e});
    got.insert(got.end(), l.begin(), l.end());
  }
  ExpectBitwiseEqual(got, ref, "chunks of 3");
}

// Long enough that the matmuls and attention take the multi-threaded path.
TEST(CpuBackend, ThreadCountDoesNotChangeLogits) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  const std::vector<int32_t> prompt = SomeTokens(150, V, 11);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    auto b = MakeBackend(*m, 16, 16, threads);
    SeqRunner r{b.get(), V, Iota(16)};
    std::vector<float> l = r.Feed(prompt);
    for (int i = 0; i < 5; ++i) {
      const std::vector<float> d = r.Feed({ArgMax(l.data() + l.size() - V, V)});
      l.insert(l.end(), d.begin(), d.end());
    }
    results.push_back(std::move(l));
  }
  ExpectBitwiseEqual(results[1], results[0], "2 threads vs 1");
  ExpectBitwiseEqual(results[2], results[0], "3 threads vs 1");
}

// ============================================================== validation

TEST(CpuBackend, BadBatchesAreRejectedAndLeaveTheBackendUsable) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  auto backend = MakeBackend(*m, 4, 16, 1);
  std::vector<float> logits(4 * V);
  const std::vector<int32_t> table = {0, 1};
  auto forward = [&](std::vector<int32_t> tokens, BatchSeq s, std::vector<int32_t> rows) {
    Batch b{tokens, std::span<const BatchSeq>(&s, 1), rows};
    return backend->Forward(b, logits.data()).code();
  };
  BatchSeq ok_seq{0, 3, 0, table};
  EXPECT_EQ(forward({1, V, 5}, ok_seq, {2}), LLM_ERR_INVALID_ARGUMENT);       // token id too large
  EXPECT_EQ(forward({1, -1, 5}, ok_seq, {2}), LLM_ERR_INVALID_ARGUMENT);      // negative token id
  const std::vector<int32_t> bad_block = {0, 4};
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, 16, bad_block}, {2}), LLM_ERR_INVALID_ARGUMENT);  // block id out of range
  const std::vector<int32_t> neg_block = {-1};
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, 0, neg_block}, {2}), LLM_ERR_INVALID_ARGUMENT);
  const std::vector<int32_t> short_table = {0};
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, 14, short_table}, {2}), LLM_ERR_INVALID_ARGUMENT);  // table too short
  const std::vector<int32_t> full = {0, 1, 2, 3, 0};
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, 63, full}, {2}), LLM_ERR_INVALID_ARGUMENT);  // beyond the pool
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, 0, table}, {3}), LLM_ERR_INVALID_ARGUMENT);  // logit row out of range
  EXPECT_EQ(forward({1, 2, 3}, {0, 2, 0, table}, {1}), LLM_ERR_INVALID_ARGUMENT);  // token 2 in no sequence
  EXPECT_EQ(forward({1, 2, 3}, {1, 3, 0, table}, {1}), LLM_ERR_INVALID_ARGUMENT);  // range past the end
  EXPECT_EQ(forward({1, 2, 3}, {0, 3, -1, table}, {1}), LLM_ERR_INVALID_ARGUMENT);  // negative n_past
  {
    const std::vector<int32_t> tokens = {1, 2, 3};
    const std::vector<int32_t> row0 = {0};
    const BatchSeq two[2] = {{0, 2, 0, table}, {1, 2, 0, table}};  // overlapping
    Batch b{tokens, two, row0};
    EXPECT_EQ(backend->Forward(b, logits.data()).code(), LLM_ERR_INVALID_ARGUMENT);
    Batch c{tokens, std::span<const BatchSeq>(two, 1), row0};
    EXPECT_EQ(backend->Forward(c, nullptr).code(), LLM_ERR_INVALID_ARGUMENT);  // NULL logits
  }
  EXPECT_EQ(backend->CopyKvBlock(0, 4).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(backend->CopyKvBlock(-1, 0).code(), LLM_ERR_INVALID_ARGUMENT);

  // Still works, and gives what a fresh backend gives.
  const std::vector<int32_t> prompt = SomeTokens(20, V, 5);
  SeqRunner r{backend.get(), V, table};
  const std::vector<float> got = r.Feed(prompt);
  auto fresh = MakeBackend(*m, 4, 16, 1);
  SeqRunner f{fresh.get(), V, {2, 3}};
  ExpectBitwiseEqual(got, f.Feed(prompt), "after rejected batches");
}

// ============================================================== KV blocks

// Copy-on-write fork: a sequence continued from a copy of a partially filled
// block gives the logits of the original continued.
TEST(CpuBackend, CopyKvBlockForksASequence) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  auto backend = MakeBackend(*m, 8, 16, 1);
  const std::vector<int32_t> prompt = SomeTokens(20, V, 9);  // block 0 full, block 1 holds 4
  SeqRunner a{backend.get(), V, {0, 1}};
  a.Feed(prompt, false);
  ASSERT_TRUE(backend->CopyKvBlock(1, 5).ok());
  SeqRunner b{backend.get(), V, {0, 5}, 20};
  const std::vector<int32_t> cont = {42, 17, 300};
  const std::vector<float> lb = b.Feed(cont);  // writes into block 5 only
  const std::vector<float> la = a.Feed(cont);
  ExpectBitwiseEqual(lb, la, "forked sequence");
}

// Swapping: a sequence's blocks go to the host swap space, the pool blocks
// are overwritten by another sequence, and the blocks come back into other
// pool blocks (in another order): the sequence continues exactly as if it
// had never left.
TEST(CpuBackend, SwappedOutBlocksComeBackIntoOtherBlocks) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  auto backend = MakeBackend(*m, 8, 16, 1);
  auto twin = MakeBackend(*m, 8, 16, 1);  // the same sequence, never swapped
  EXPECT_EQ(backend->kv_block_bytes(), CpuKvBlockBytes(m->config, 16, LLM_KV_F32));
  ASSERT_TRUE(backend->ReserveSwapSpace(4).ok());
  const std::vector<int32_t> prompt = SomeTokens(20, V, 9);  // block 0 full, block 1 holds 4
  SeqRunner a{backend.get(), V, {0, 1}};
  a.Feed(prompt, false);
  SeqRunner t{twin.get(), V, {0, 1}};
  t.Feed(prompt, false);
  const KvSwap outs[] = {{0, 3}, {1, 2}};
  ASSERT_TRUE(backend->SwapOutKvBlocks(outs).ok());
  SeqRunner other{backend.get(), V, {0, 1}};
  other.Feed(SomeTokens(30, V, 4), false);  // overwrites blocks 0 and 1
  const KvSwap ins[] = {{6, 3}, {4, 2}};
  ASSERT_TRUE(backend->SwapInKvBlocks(ins).ok());
  a.table = {6, 4};
  const std::vector<int32_t> cont = {42, 17, 300};
  ExpectBitwiseEqual(a.Feed(cont), t.Feed(cont), "swapped-in sequence");

  // Ids out of range are refused before anything is copied.
  const KvSwap bad_slot[] = {{0, 4}};
  const KvSwap bad_block[] = {{8, 0}};
  const KvSwap neg[] = {{0, 0}, {-1, 1}};
  EXPECT_EQ(backend->SwapOutKvBlocks(bad_slot).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(backend->SwapInKvBlocks(bad_block).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(backend->SwapInKvBlocks(neg).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(backend->ReserveSwapSpace(-1).code(), LLM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(backend->ReserveSwapSpace(0).ok());  // freed: no slot is valid
  const KvSwap first[] = {{0, 0}};
  EXPECT_EQ(backend->SwapOutKvBlocks(first).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(backend->SwapOutKvBlocks({}).ok());
}

// ============================================================== RoPE

TEST(CpuBackend, LinearRopeScalingStretchesPositions) {
  ModelConfig c;
  c.head_dim = 16;
  c.rope_dim = 16;
  c.rope_theta = 10000.0f;
  auto plain = cpu::Rope::Create(c);
  c.rope_scaling.type = RopeScalingType::kLinear;
  c.rope_scaling.factor = 4.0f;
  auto scaled = cpu::Rope::Create(c);
  ASSERT_TRUE(plain.ok() && scaled.ok());
  float a[16], b[16];
  plain->Angles(25, a);
  scaled->Angles(100, b);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  c.rope_scaling.type = RopeScalingType::kYarn;  // YaRN needs its original context (test_rope_freq: the rest)
  EXPECT_EQ(cpu::Rope::Create(c).status().code(), LLM_ERR_INVALID_ARGUMENT);

  // Llama 3: the highest frequencies are kept, the lowest divided by factor.
  c.rope_dim = c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {RopeScalingType::kLlama3, 8.0f, 8192, 1.0f, 4.0f};
  auto l3 = cpu::Rope::Create(c);
  c.rope_scaling = {};
  auto base = cpu::Rope::Create(c);
  ASSERT_TRUE(l3.ok() && base.ok());
  std::vector<float> x(128), y(128);
  l3->Angles(1000, x.data());
  base->Angles(1000, y.data());
  EXPECT_FLOAT_EQ(x[0], y[0]);  // pair 0: wavelength 2π, unchanged
  EXPECT_FLOAT_EQ(x[1], y[1]);
  base->Angles(125, y.data());  // pair 63: wavelength far above 8192, 1000/8
  EXPECT_NEAR(x[126], y[126], 1e-5);
  EXPECT_NEAR(x[127], y[127], 1e-5);
}

// ============================================================== weight types

// A random Llama (n_embd 128, 4 heads of 32, 2 KV heads, n_ff 256) in F32,
// converted to F16, BF16 and Q8_0.
struct SyntheticModel {
  ModelConfig config;
  std::vector<std::vector<uint8_t>> storage;
  ModelWeights weights;
};

std::vector<uint8_t> Encode(const std::vector<float>& v, int64_t rows, int64_t cols, TensorType type,
                            size_t* row_bytes) {
  std::vector<uint8_t> out;
  switch (type) {
    case TensorType::F32:
      *row_bytes = cols * 4;
      out.resize(v.size() * 4);
      std::memcpy(out.data(), v.data(), out.size());
      break;
    case TensorType::F16:
    case TensorType::BF16: {
      *row_bytes = cols * 2;
      out.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h;
        if (type == TensorType::F16) {
          h = F32ToF16Portable(v[i]);
        } else {
          const uint32_t bits = FloatBits(v[i]);
          h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // nearest even
        }
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    }
    case TensorType::Q8_0: {
      *row_bytes = cols / 32 * sizeof(BlockQ8_0);
      out.resize(rows * *row_bytes);
      auto* blocks = reinterpret_cast<BlockQ8_0*>(out.data());
      for (int64_t b = 0; b < rows * cols / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b * 32 + i]));
        const float d = amax / 127.0f;
        blocks[b].d = F32ToF16Portable(d);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; ++i) blocks[b].qs[i] = static_cast<int8_t>(std::lround(v[b * 32 + i] * id));
      }
      break;
    }
    default:
      break;
  }
  return out;
}

// Values of an encoded tensor back in F32 (exactly what the kernels see).
std::vector<float> Decode(const std::vector<uint8_t>& bytes, int64_t n, TensorType type) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case TensorType::F32: std::memcpy(&out[i], bytes.data() + 4 * i, 4); break;
      case TensorType::F16:
      case TensorType::BF16: {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = type == TensorType::F16 ? F16ToF32Portable(h) : BitsFloat(static_cast<uint32_t>(h) << 16);
        break;
      }
      case TensorType::Q8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(bytes.data()) + i / 32;
        out[i] = F16ToF32Portable(b->d) * static_cast<float>(b->qs[i % 32]);
        break;
      }
      default: break;
    }
  }
  return out;
}

// `type`: the matrices' type; `dequantized`: store the matrices as F32 holding
// exactly the values `type` represents.
std::unique_ptr<SyntheticModel> MakeSynthetic(TensorType type, bool dequantized) {
  auto m = std::make_unique<SyntheticModel>();
  ModelConfig& c = m->config;
  c.arch = "llama";
  c.n_vocab = 320;
  c.n_ctx_train = 256;
  c.n_embd = 128;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 32;
  c.n_ff = 256;
  c.rope_dim = 32;
  c.rms_eps = 1e-5f;
  std::mt19937 rng(1234);  // the same values for every type
  auto matrix = [&](int64_t rows, int64_t cols, float scale) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(rows * cols);
    for (float& x : v) x = dist(rng);
    WeightView w;
    w.rows = rows;
    w.cols = cols;
    w.type = dequantized ? TensorType::F32 : type;
    std::vector<uint8_t> bytes = Encode(v, rows, cols, type, &w.row_bytes);
    if (dequantized) bytes = Encode(Decode(bytes, rows * cols, type), rows, cols, TensorType::F32, &w.row_bytes);
    m->storage.push_back(std::move(bytes));
    w.data = m->storage.back().data();
    return w;
  };
  auto norm = [&](int64_t n) {
    std::uniform_real_distribution<float> dist(0.5f, 1.5f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    WeightView w;
    w.rows = 1;
    w.cols = n;
    std::vector<uint8_t> bytes = Encode(v, 1, n, TensorType::F32, &w.row_bytes);
    m->storage.push_back(std::move(bytes));
    w.data = m->storage.back().data();
    return w;
  };
  m->storage.reserve(64);  // views point into the vectors' heap buffers, which do not move anyway
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  m->weights.token_embd = matrix(c.n_vocab, E, 1.0f);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights L;
    L.attn_norm = norm(E);
    L.wq = matrix(Q, E, 0.08f);
    L.wk = matrix(KV, E, 0.08f);
    L.wv = matrix(KV, E, 0.08f);
    L.wo = matrix(E, Q, 0.08f);
    L.ffn_norm = norm(E);
    L.w_gate = matrix(F, E, 0.08f);
    L.w_up = matrix(F, E, 0.08f);
    L.w_down = matrix(E, F, 0.06f);
    m->weights.layers.push_back(L);
  }
  m->weights.output_norm = norm(E);
  m->weights.output = matrix(c.n_vocab, E, 0.08f);
  return m;
}

std::vector<float> RunSynthetic(const SyntheticModel& m, int n_threads) {
  KvCacheSpec kv{16, 8};
  auto b = CreateCpuBackend(m.config, m.weights, kv, n_threads);
  EXPECT_TRUE(b.ok()) << b.status().message();
  if (!b.ok()) return {};
  SeqRunner r{b.value().get(), m.config.n_vocab, Iota(8)};
  const std::vector<int32_t> prompt = SomeTokens(37, m.config.n_vocab, 21);
  std::vector<float> l = r.Feed(prompt);
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> d = r.Feed({(i * 37 + 5) % m.config.n_vocab});
    l.insert(l.end(), d.begin(), d.end());
  }
  return l;
}

TEST(CpuBackend, EveryWeightTypeMatchesF32) {
  const std::vector<float> ref = RunSynthetic(*MakeSynthetic(TensorType::F32, false), 1);
  ASSERT_FALSE(ref.empty());
  float ref_scale = 0;
  for (float v : ref) ref_scale = std::max(ref_scale, std::fabs(v));
  struct Case {
    TensorType type;
    const char* name;
    float tol;  // relative to the largest |logit|
  };
  for (const Case& c : {Case{TensorType::F16, "F16", 2e-3f}, Case{TensorType::BF16, "BF16", 2e-2f},
                        Case{TensorType::Q8_0, "Q8_0", 2e-2f}}) {
    SCOPED_TRACE(c.name);
    const std::vector<float> got = RunSynthetic(*MakeSynthetic(c.type, false), 2);
    ASSERT_EQ(got.size(), ref.size());
    float worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]));
    EXPECT_LT(worst, c.tol * ref_scale) << "largest |logit| " << ref_scale;
    if (IsBlockQuantized(c.type)) {
      // Block-quantized matmuls quantize their activations too (quant.h), so
      // only the thread count must not matter.
      ExpectBitwiseEqual(got, RunSynthetic(*MakeSynthetic(c.type, false), 1), "1 vs 2 threads");
    } else {
      // F16 / BF16 matmuls read their inputs rounded to the weights' type, as
      // llama.cpp's (act_rounding.h): not what the same values stored as F32
      // give. With LLM_CPU_ACT=own they read F32 inputs, and conversion inside
      // the kernels is exact: the same values stored as F32 give bitwise the
      // same logits.
      const std::vector<float> as_f32 = RunSynthetic(*MakeSynthetic(c.type, true), 1);
      ASSERT_EQ(got.size(), as_f32.size());
      EXPECT_NE(std::memcmp(got.data(), as_f32.data(), got.size() * sizeof(float)), 0) << "inputs not rounded";
      setenv("LLM_CPU_ACT", "own", 1);
      const std::vector<float> own = RunSynthetic(*MakeSynthetic(c.type, false), 2);
      unsetenv("LLM_CPU_ACT");
      ExpectBitwiseEqual(own, as_f32, "LLM_CPU_ACT=own vs dequantized F32");
    }
  }
}

// The portable kernels agree with the SIMD ones within rounding.
// The attention kernel alone against a double-precision reference, on both
// kernel tables: GQA groups of 1-4 query heads (a lone head after the pairs),
// head_dim on and off the vector paths, block sizes with and without whole
// groups of 8 keys, contexts ending mid-block, sliding windows, attention
// sinks (a logit per head in the softmax's denominator). Each head's
// output must also be bitwise the same whatever group it is computed in.
TEST(CpuBackend, AttentionKernelMatchesReferenceForEveryGroupShape) {
  std::mt19937 rng(77);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const std::vector<const cpu::Kernels*> tables = {&cpu::GenericKernels(), &cpu::BestKernels()};
  for (int hd : {8, 12, 16, 40, 64}) {
    for (int bs : {16, 5, 8}) {
      const int n_blocks = 80 / bs + 2;
      const int64_t tile = static_cast<int64_t>(hd) * bs, block_floats = 2 * tile;  // one layer, one KV head
      std::vector<float> pool(static_cast<size_t>(block_floats) * n_blocks);
      for (float& x : pool) x = dist(rng);
      std::vector<int32_t> table(n_blocks);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);  // blocks out of order, as in the pool
      for (int64_t n_keys : {1, 7, 33, 80}) {
        for (int64_t first : {int64_t{0}, n_keys / 3}) {
          cpu::AttnArgs a;
          a.pool = reinterpret_cast<const uint8_t*>(pool.data());
          a.block_stride = block_floats * 4;
          a.k_tile_bytes = tile * 4;
          a.v_tile_bytes = tile * 4;
          a.k_offset = 0;
          a.v_offset = tile * 4;
          a.block_table = table.data();
          a.block_size = bs;
          a.head_dim = hd;
          a.n_keys = n_keys;
          a.first_key = first;
          a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
          auto key = [&](int64_t j, int d) { return pool[table[j / bs] * block_floats + d * bs + j % bs]; };
          auto val = [&](int64_t j, int d) { return pool[table[j / bs] * block_floats + tile + (j % bs) * hd + d]; };
          for (int n_q : {1, 2, 3, 4}) {
            for (bool with_sinks : {false, true}) {  // gpt-oss's per-head sink logits
              std::vector<float> q(static_cast<size_t>(n_q) * hd), sinks(n_q);
              for (float& x : q) x = dist(rng);
              for (float& x : sinks) x = 1.0f + 2.0f * dist(rng);
              a.sinks = with_sinks ? sinks.data() : nullptr;
              for (const cpu::Kernels* k : tables) {
                std::vector<float> scores(static_cast<size_t>(n_q) * n_keys), out(q.size());
                k->attention(a, n_q, q.data(), scores.data(), out.data());
                for (int g = 0; g < n_q; ++g) {
                  // reference
                  std::vector<double> s;
                  double mx = -1e300;
                  for (int64_t j = first; j < n_keys; ++j) {
                    double dot = 0;
                    for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[g * hd + d]) * key(j, d);
                    s.push_back(dot * a.scale);
                    mx = std::max(mx, s.back());
                  }
                  if (with_sinks) mx = std::max(mx, static_cast<double>(sinks[g]));
                  double z = with_sinks ? std::exp(sinks[g] - mx) : 0.0;
                  for (double& x : s) z += x = std::exp(x - mx);
                  for (int d = 0; d < hd; ++d) {
                    double want = 0;
                    for (int64_t j = first; j < n_keys; ++j) want += s[j - first] * val(j, d);
                    want /= z;
                    ASSERT_NEAR(out[g * hd + d], want, 1e-5)
                        << k->name << " hd " << hd << " bs " << bs << " n_keys " << n_keys << " first " << first
                        << " n_q " << n_q << " head " << g << " d " << d;
                  }
                  // the same head alone: bitwise equal
                  std::vector<float> s1(n_keys), o1(hd);
                  cpu::AttnArgs a1 = a;
                  a1.sinks = with_sinks ? sinks.data() + g : nullptr;
                  k->attention(a1, 1, q.data() + g * hd, s1.data(), o1.data());
                  ASSERT_EQ(0, std::memcmp(o1.data(), out.data() + g * hd, hd * sizeof(float)))
                      << k->name << " hd " << hd << " bs " << bs << " n_q " << n_q << " head " << g;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(CpuBackend, PortableKernelsAgreeWithSimd) {
  auto m = LoadModel("stories260K-f32.gguf");
  ASSERT_TRUE(m);
  const int V = m->config.n_vocab;
  const std::vector<int32_t> prompt = SomeTokens(30, V, 77);
  auto simd = MakeBackend(*m, 4, 16, 1);
  SeqRunner a{simd.get(), V, Iota(4)};
  const std::vector<float> la = a.Feed(prompt);
  setenv("LLM_CPU_ISA", "generic", 1);
  auto generic = MakeBackend(*m, 4, 16, 1);
  unsetenv("LLM_CPU_ISA");
  SeqRunner b{generic.get(), V, Iota(4)};
  const std::vector<float> lb = b.Feed(prompt);
  float worst = 0;
  for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::fabs(la[i] - lb[i]));
  EXPECT_LT(worst, 1e-4);
  // And the synthetic model exercises every weight type on the portable path.
  // Q8_0 runs the block-quantized path, whose activations are re-quantized to
  // int8 before every matmul: a rounding difference between the two kernels'
  // summation orders (each within 2e-6 of the reference per matmul:
  // test_quant) can flip an int8 value and so moves the logits by more than
  // rounding; its bound is the size of such a flip, not of a rounding error.
  // F16 and BF16 matmuls round their inputs to F16 / BF16 (act_rounding.h),
  // where a summation difference upstream can flip one value by an F16 unit
  // in the last place (2^-11 relative): measured 2.7e-4 of the largest logit
  // for F16. So the rounding bound holds with LLM_CPU_ACT=own (F32 inputs),
  // and a flip's bound by default.
  for (const bool own : {true, false}) {
    if (own) setenv("LLM_CPU_ACT", "own", 1);
    setenv("LLM_CPU_ISA", "generic", 1);
    for (TensorType t : {TensorType::F16, TensorType::BF16, TensorType::Q8_0}) {
      const std::vector<float> g = RunSynthetic(*MakeSynthetic(t, false), 1);
      unsetenv("LLM_CPU_ISA");
      const std::vector<float> s = RunSynthetic(*MakeSynthetic(t, false), 1);
      setenv("LLM_CPU_ISA", "generic", 1);
      float w = 0, scale = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        w = std::max(w, std::fabs(g[i] - s[i]));
        scale = std::max(scale, std::fabs(s[i]));
      }
      const double bound = t == TensorType::Q8_0 ? 2e-2 : own ? 1e-4 : t == TensorType::F16 ? 2e-3 : 1e-2;
      EXPECT_LT(w, bound * scale) << static_cast<int>(t) << (own ? " LLM_CPU_ACT=own" : "");
    }
    unsetenv("LLM_CPU_ISA");
    unsetenv("LLM_CPU_ACT");
  }
}

// The GEMM of a decoder's embedding steps (EmbedStepMatMul: the AVX-512
// panel GEMM where the CPU has one, else Kernels::matmul): a token's row is
// bitwise the same whatever else shares the call and however the rows are
// split (panels of 32, tiles of 12 tokens and their remainders), accumulate
// adds to y, and every weight type agrees with a double-precision product.
TEST(CpuBackend, EmbedStepMatMulIsExactlyBatchInvariant) {
  const int64_t R = 77, K = 200, N = 29;  // rows: 2 panels + 13; tokens: 2 tiles + 5; K: 3 blocks of 64 + 8
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(N * K), wf(R * K);
  for (float& v : x) v = u(rng);
  for (float& v : wf) v = u(rng);
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    std::vector<uint16_t> w16(R * K);
    for (int64_t i = 0; i < R * K; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &wf[i], 4);
      w16[i] = type == TensorType::F16 ? F32ToF16(wf[i]) : static_cast<uint16_t>(bits >> 16);
    }
    WeightView w;
    w.type = type;
    w.data = type == TensorType::F32 ? static_cast<const void*>(wf.data()) : w16.data();
    w.rows = R;
    w.cols = K;
    w.row_bytes = static_cast<size_t>(K) * (type == TensorType::F32 ? 4 : 2);
    auto weight = [&](int64_t r, int64_t k) -> double {
      if (type == TensorType::F32) return wf[r * K + k];
      if (type == TensorType::F16) return F16ToF32(w16[r * K + k]);
      const uint32_t bits = static_cast<uint32_t>(w16[r * K + k]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    };
    auto run = [&](int64_t t0, int64_t n, int64_t r0, int64_t r1, float* y, bool acc) {
      cpu::MatMulArgs a;
      a.w = &w;
      a.x = x.data() + t0 * K;
      a.ld_x = K;
      a.n_tok = n;
      a.y = y + t0 * R;
      a.ld_y = R;
      a.row_begin = r0;
      a.row_end = r1;
      a.accumulate = acc;
      cpu::EmbedStepMatMul(cpu::BestKernels(), a);
    };
    std::vector<float> all(N * R, -7.0f);
    run(0, N, 0, R, all.data(), false);
    for (int64_t t = 0; t < N; ++t)
      for (int64_t r = 0; r < R; ++r) {
        double ref = 0.0, mag = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          ref += x[t * K + k] * weight(r, k);
          mag += std::fabs(x[t * K + k] * weight(r, k));
        }
        ASSERT_NEAR(all[t * R + r], ref, 1e-6 * mag) << static_cast<int>(type) << " t " << t << " r " << r;
      }
    // Tokens one at a time and in uneven groups, rows split at uneven points.
    std::vector<float> parts(N * R, 3.0f);
    for (int64_t t = 0; t < N;) {
      const int64_t n = std::min<int64_t>(N - t, 1 + t % 14);
      run(t, n, 0, 5, parts.data(), false);
      run(t, n, 5, 40, parts.data(), false);
      run(t, n, 40, R, parts.data(), false);
      t += n;
    }
    EXPECT_EQ(0, std::memcmp(all.data(), parts.data(), all.size() * sizeof(float))) << static_cast<int>(type);
    // accumulate: y += x·Wᵀ (y enters the sum first), rows outside the
    // range untouched, and again bitwise the same however the call is split
    std::vector<float> acc(N * R, 0.5f), acc_parts(N * R, 0.5f);
    run(0, N, 3, 70, acc.data(), true);
    for (int64_t t = 0; t < N; ++t)
      for (int64_t r = 0; r < R; ++r) {
        if (r < 3 || r >= 70) {
          ASSERT_EQ(acc[t * R + r], 0.5f) << t << " " << r;
        } else {
          ASSERT_NEAR(acc[t * R + r], 0.5 + all[t * R + r], 1e-5) << t << " " << r;
        }
      }
    for (int64_t t = 0; t < N;) {
      const int64_t n = std::min<int64_t>(N - t, 1 + (t * 5) % 13);
      run(t, n, 3, 36, acc_parts.data(), true);
      run(t, n, 36, 70, acc_parts.data(), true);
      t += n;
    }
    EXPECT_EQ(0, std::memcmp(acc.data(), acc_parts.data(), acc.size() * sizeof(float))) << static_cast<int>(type);
  }
}

TEST(CpuBackend, RejectsUnusableModels) {
  auto m = MakeSynthetic(TensorType::F32, false);
  KvCacheSpec kv{16, 4};
  ModelConfig c = m->config;
  c.n_head_kv = 3;  // 4 % 3 != 0
  EXPECT_EQ(CreateCpuBackend(c, m->weights, kv, 1).status().code(), LLM_ERR_INVALID_ARGUMENT);
  ModelWeights w = m->weights;
  w.layers[1].w_up.rows = 100;  // wrong shape
  EXPECT_EQ(CreateCpuBackend(m->config, w, kv, 1).status().code(), LLM_ERR_INVALID_ARGUMENT);
  w = m->weights;
  w.layers[0].wq.type = TensorType::Q4_K;  // rows of 128: not whole 256-weight super-blocks
  EXPECT_EQ(CreateCpuBackend(m->config, w, kv, 1).status().code(), LLM_ERR_UNSUPPORTED);
  w.layers[0].wq.type = static_cast<TensorType>(31);  // a removed ggml type: not read
  EXPECT_EQ(CreateCpuBackend(m->config, w, kv, 1).status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(CreateCpuBackend(m->config, m->weights, KvCacheSpec{0, 4}, 1).status().code(), LLM_ERR_INVALID_ARGUMENT);
  auto ok = CreateCpuBackend(m->config, m->weights, kv, 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value()->kind(), LLM_BACKEND_CPU);
}

}  // namespace
}  // namespace llm
