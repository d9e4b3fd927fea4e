// CUDA graphs of decode steps against eager launches and the CPU backend:
//   - decode steps of 1..5 sequences (buckets 1, 2, 4, 8: padding rows in
//     most): the logits agree, and the graph backend did replay graphs;
//   - one sequence's context growing far past the step a graph was captured
//     at (what the graph must not have baked);
//   - LLM_CUDA_GRAPHS=0 turns capture off;
//   - a Mixture-of-Experts model (tiny-qwen2moe: router, grouping, expert
//     GEMVs, shared expert): replayed steps give the eager steps' logits bit
//     for bit, whatever the tokens route to (the launches' shapes follow the
//     bucket, never the routing);
//   - a head_dim-128, GQA 4:1 model end to end (chunked prefill across block
//     and 64x64 tile boundaries, a shared prefix, graph replay over growing
//     contexts) against the CPU backend.
// Everything that needs a GPU skips cleanly without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#if LLM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "support/cuda_test_helpers.h"

namespace llm::test {
namespace {

// Prefills every sequence with 20 tokens, then runs `steps` decode steps of
// 1 + step % 5 sequences on every backend; returns the largest relative L2
// distance of each backend's logits from backends[0]'s.
std::vector<double> DecodeSteps(const std::vector<Backend*>& backends, int32_t n_vocab, int steps) {
  std::vector<DecodeSeq> seqs(5);
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int i = 0; i < 16; ++i) seqs[s].table.push_back(static_cast<int32_t>((s * 16 + i * 5 + 1) % 80));
  std::vector<double> worst(backends.size(), 0.0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    std::vector<llm_token> toks(20);
    for (int i = 0; i < 20; ++i) toks[i] = static_cast<llm_token>((i * 31 + s * 7 + 3) % n_vocab);
    BatchSeq q{0, 20, 0, seqs[s].table};
    for (Backend* b : backends) EXPECT_TRUE(b->Forward(Batch{toks, std::span<const BatchSeq>(&q, 1), {}}, nullptr).ok());
    seqs[s].n_past = 20;
  }
  for (int step = 0; step < steps; ++step) {
    const int n = 1 + step % 5;
    std::vector<llm_token> toks;
    std::vector<BatchSeq> bs;
    std::vector<int32_t> rows;
    for (int i = 0; i < n; ++i) {
      const int s = (step + i) % 5;  // a different subset, in a different order, each step
      toks.push_back(static_cast<llm_token>((step * 13 + s * 5 + 1) % n_vocab));
      bs.push_back(BatchSeq{i, 1, seqs[s].n_past, seqs[s].table});
      rows.push_back(n - 1 - i);  // logit rows in reverse: row order is the caller's
      ++seqs[s].n_past;
    }
    std::vector<std::vector<float>> out(backends.size(), std::vector<float>(static_cast<size_t>(n) * n_vocab, NAN));
    for (size_t k = 0; k < backends.size(); ++k) {
      Status st = backends[k]->Forward(Batch{toks, bs, rows}, out[k].data());
      EXPECT_TRUE(st.ok()) << "backend " << k << " step " << step << ": " << st.message();
      if (k > 0) worst[k] = std::max(worst[k], RelL2(out[k], out[0]));
    }
  }
  return worst;
}

TEST(CudaGraphs, DecodeGraphsMatchEagerAndCpu) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  KvCacheSpec kv{16, 80};
  auto cpu = CreateCpuBackend((*m)->config, (*m)->weights, kv, 2);
  ASSERT_TRUE(cpu.ok());
  std::unique_ptr<Backend> eager = MakeGpu(**m, 80, false), graphs = MakeGpu(**m, 80, true);
  ASSERT_TRUE(eager && graphs);
  const std::vector<double> worst =
      DecodeSteps({cpu->get(), eager.get(), graphs.get()}, (*m)->config.n_vocab, 30);
  EXPECT_LT(worst[1], 2e-2) << "eager CUDA vs CPU";
  EXPECT_LT(worst[2], 2e-2) << "graph CUDA vs CPU";
#if LLM_HAVE_CUDA
  const auto& gs = dynamic_cast<cuda::CudaBackend*>(graphs.get())->graph_stats();
  std::printf("graphs: %lld replays, %lld captures, %lld capture failures, %lld eager steps\n",
              static_cast<long long>(gs.replays), static_cast<long long>(gs.captures),
              static_cast<long long>(gs.capture_failures), static_cast<long long>(gs.eager_steps));
  EXPECT_EQ(gs.capture_failures, 0);
  EXPECT_EQ(gs.captures, 4);   // buckets 1, 2, 4, 8 (5 sequences pad to 8)
  EXPECT_GE(gs.replays, 20);   // 30 decode steps, 4 of them warm-ups
  const auto& es = dynamic_cast<cuda::CudaBackend*>(eager.get())->graph_stats();
  EXPECT_EQ(es.replays + es.captures, 0);
#endif
  std::remove(path.c_str());
}

TEST(CudaGraphs, ExpertDecodeGraphsMatchEagerBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = ::testing::TempDir() + "/llmrt_graphs_moe_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions so;
  so.type = TensorType::BF16;
  so.seed = 7;
  so.stddev = 0.08f;
  so.norm_std = 0.1f;
  so.bias_std = 0.5f;
  ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny-qwen2moe"), so, path).ok());
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_GT((*m)->config.n_expert, 0);
  std::unique_ptr<Backend> eager = MakeGpu(**m, 80, false), graphs = MakeGpu(**m, 80, true);
  ASSERT_TRUE(eager && graphs);
  const std::vector<double> worst = DecodeSteps({eager.get(), graphs.get()}, (*m)->config.n_vocab, 20);
  EXPECT_EQ(worst[1], 0.0) << "graph replay vs eager launches";
#if LLM_HAVE_CUDA
  const auto& gs = dynamic_cast<cuda::CudaBackend*>(graphs.get())->graph_stats();
  EXPECT_EQ(gs.capture_failures, 0);
  EXPECT_EQ(gs.captures, 4);
  EXPECT_GE(gs.replays, 12);
#endif
}

// One sequence's context grows from 101 to 220 keys under graph replay: past
// the key tiles (64) of the step the graph was captured at, so a graph that
// baked that step's split plan (keys per split, a host value) would drop the
// newest keys on later replays; the device-side split must follow the
// context. Every step's logits match the CPU's and the eager backend's.
TEST(CudaGraphs, DecodeGraphsFollowGrowingContexts) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const int32_t V = (*m)->config.n_vocab;
  auto cpu = CreateCpuBackend((*m)->config, (*m)->weights, KvCacheSpec{16, 80}, 2);
  ASSERT_TRUE(cpu.ok());
  std::unique_ptr<Backend> eager = MakeGpu(**m, 80, false), graphs = MakeGpu(**m, 80, true);
  ASSERT_TRUE(eager && graphs);
  std::vector<Backend*> all = {cpu->get(), eager.get(), graphs.get()};
  std::vector<int32_t> table;
  for (int i = 0; i < 16; ++i) table.push_back((i * 7 + 2) % 80);
  std::vector<llm_token> prompt(100);
  for (int i = 0; i < 100; ++i) prompt[i] = static_cast<llm_token>((i * 29 + 5) % V);
  BatchSeq pre{0, 100, 0, table};
  for (Backend* b : all) ASSERT_TRUE(b->Forward(Batch{prompt, std::span<const BatchSeq>(&pre, 1), {}}, nullptr).ok());
  double worst_cpu = 0, worst_eager = 0;
  const int32_t row = 0;
  for (int32_t n_past = 100; n_past < 220; ++n_past) {
    const std::vector<llm_token> tok = {static_cast<llm_token>((n_past * 13 + 1) % V)};
    BatchSeq s{0, 1, n_past, table};
    std::vector<std::vector<float>> out(3, std::vector<float>(V, NAN));
    for (size_t k = 0; k < 3; ++k) {
      Status st = all[k]->Forward(Batch{tok, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&row, 1)},
                                  out[k].data());
      ASSERT_TRUE(st.ok()) << "backend " << k << " at " << n_past << ": " << st.message();
    }
    worst_cpu = std::max(worst_cpu, RelL2(out[2], out[0]));
    worst_eager = std::max(worst_eager, RelL2(out[2], out[1]));
  }
  EXPECT_LT(worst_cpu, 2e-2) << "graph CUDA vs CPU";
  EXPECT_LT(worst_eager, 2e-2) << "graph CUDA vs eager CUDA";
#if LLM_HAVE_CUDA
  const auto& gs = dynamic_cast<cuda::CudaBackend*>(graphs.get())->graph_stats();
  EXPECT_EQ(gs.captures, 1);
  EXPECT_GE(gs.replays, 118);  // every step after the bucket's warm-up
#endif
  std::remove(path.c_str());
}

TEST(CudaGraphs, GraphsOffWithEnvironment) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ::setenv("LLM_CUDA_GRAPHS", "0", 1);
  std::unique_ptr<Backend> gpu = MakeGpu(**m, 80, true);
  ::unsetenv("LLM_CUDA_GRAPHS");
  ASSERT_TRUE(gpu);
  DecodeSteps({gpu.get()}, (*m)->config.n_vocab, 6);
#if LLM_HAVE_CUDA
  const auto& gs = dynamic_cast<cuda::CudaBackend*>(gpu.get())->graph_stats();
  EXPECT_EQ(gs.replays + gs.captures, 0);
#endif
  std::remove(path.c_str());
}

// The head_dim-128 path (the prefill kernel's second instantiation) with GQA
// 4:1 (8 query heads over 2 KV heads, so a query head reading the wrong KV
// head changes the logits), end to end against the CPU backend:
//   1) seq A prefills 70 tokens: two 64-row query tiles and two key tiles,
//      ending mid-block (block size 16);
//   2) seq A's second chunk (60 tokens from position 70: starts mid-block and
//      mid-tile, reads chunk 1 from the cache) beside seq B, whose block table
//      starts with A's first 4 blocks (a cached 64-token prefix, as prefix
//      caching shares it) and which prefills 45 tokens of its own from 64;
//   3) 40 graph-replayed decode steps of A and B (contexts 130..170 and
//      109..149), then 32 of A alone (to 202 keys: past the 3 key tiles of
//      64 that a split plan made at the capture step would cover).
// The weights are BF16 in the file, so both backends multiply the same
// weights; what differs is the GPU's BF16 KV cache and BF16 activations into
// the GEMMs, which stay below 2e-2 relative L2 (the bound of the other model
// tests; the run prints the measured worst, 6.7e-3 on the emulator), while a
// wrong head, block or tile moves the logits by far more.
TEST(CudaGraphs, HeadDim128Gqa4ModelMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  synth::SynthShape shape{"hd128-gqa4", 320, 256, 2, 8, 2, 128, 512, 2048, 10000.0f, 1e-5f, false, 0.0f, 8192};
  const std::string path = ::testing::TempDir() + "/llmrt_cuda_hd128_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions so;
  so.stddev = 0.05f;
  const Status written = synth::WriteSynthModel(shape, so, path);
  ASSERT_TRUE(written.ok()) << written.message();
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ((*m)->config.head_dim, 128);
  ASSERT_EQ((*m)->config.n_head, 4 * (*m)->config.n_head_kv);
  const int32_t V = (*m)->config.n_vocab;
  auto cpu = CreateCpuBackend((*m)->config, (*m)->weights, KvCacheSpec{16, 64}, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  std::unique_ptr<Backend> gpu = MakeGpu(**m, 64, true);
  ASSERT_TRUE(gpu);

  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 16; ++i) ta.push_back(i * 4 + 2);          // scattered, 256 positions
  tb.assign(ta.begin(), ta.begin() + 4);                        // A's first 64 positions, shared
  for (int i = 0; i < 8; ++i) tb.push_back(i * 4 + 1);          // then B's own (A's are 2 mod 4)
  std::vector<llm_token> prompt(200);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<llm_token>((i * 37 + 11) % V);

  double worst = 0;
  auto compare = [&](const Batch& batch, const std::string& what) {
    const size_t n = batch.logit_rows.size() * static_cast<size_t>(V);
    std::vector<float> want(n), got(n, NAN);
    Status a = (*cpu)->Forward(batch, want.data());
    ASSERT_TRUE(a.ok()) << what << ": " << a.message();
    Status c = gpu->Forward(batch, got.data());
    ASSERT_TRUE(c.ok()) << what << ": " << c.message();
    const double d = RelL2(got, want);
    EXPECT_LT(d, 2e-2) << what;
    worst = std::isnan(d) ? d : std::max(worst, d);
  };
  // 1) seq A, chunk 1
  {
    BatchSeq s{0, 70, 0, ta};
    const std::vector<int32_t> rows = {0, 15, 16, 63, 64, 69};
    compare(Batch{std::span<const llm_token>(prompt.data(), 70), std::span<const BatchSeq>(&s, 1), rows}, "chunk 1");
  }
  // 2) seq A chunk 2 + seq B on the shared prefix
  {
    std::vector<llm_token> toks(prompt.begin() + 70, prompt.begin() + 130);
    for (int i = 0; i < 45; ++i) toks.push_back(static_cast<llm_token>((i * 11 + 7) % V));
    const std::vector<BatchSeq> seqs = {{0, 60, 70, ta}, {60, 45, 64, tb}};
    const std::vector<int32_t> rows = {0, 5, 6, 57, 59, 60, 63, 76, 104};
    compare(Batch{toks, seqs, rows}, "chunk 2 + shared prefix");
  }
  // 3) decode under graph replay, contexts growing
  int32_t na = 130, nb = 109;
  for (int step = 0; step < 72; ++step) {
    const bool both = step < 40;
    std::vector<llm_token> toks = {static_cast<llm_token>((step * 13 + 1) % V)};
    std::vector<BatchSeq> seqs = {{0, 1, na, ta}};
    std::vector<int32_t> rows = {0};
    if (both) {
      toks.push_back(static_cast<llm_token>((step * 7 + 2) % V));
      seqs.push_back({1, 1, nb, tb});
      rows = {1, 0};
    }
    compare(Batch{toks, seqs, rows}, "decode step " + std::to_string(step));
    ++na;
    if (both) ++nb;
  }
  std::printf("head_dim 128, GQA 4:1: worst relative L2 vs CPU %.3g\n", worst);
#if LLM_HAVE_CUDA
  const auto& gs = dynamic_cast<cuda::CudaBackend*>(gpu.get())->graph_stats();
  EXPECT_EQ(gs.capture_failures, 0);
  EXPECT_GE(gs.replays, 64);  // both buckets replay after their warm-up steps
#endif
}

}  // namespace
}  // namespace llm::test
