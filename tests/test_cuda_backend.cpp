// The CUDA backend against the CPU reference, model-level:
//   - stories260K (the bundled model; head_dim 8: decode-kernel path): greedy
//     tokens on the golden prompts equal those of the CPU backend on the same
//     BF16-rounded weights, or equal up to a near-tie no wider than twice the
//     logit error measured in the run (the rule is written above the test);
//   - a synthesised `tiny` model (head_dim 64: tensor-core prefill path):
//     logits of chunked prefill, mixed prefill+decode batches and a
//     copied-on-write block within 2e-2 relative L2 of the CPU's;
//   - batch validation errors, device selection and the draft's pool size
//     through the C API; the attention scale and RoPE pairing from the config;
//     device sampling against host sampling.
// CUDA graphs have their own file (test_cuda_graphs.cpp). Everything that
// needs a GPU skips cleanly without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/backend.h"
#include "llm.h"
#include "model/model.h"
#include "sample/sampler.h"
#if LLM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "support/cuda_test_helpers.h"
#include "support/test_paths.h"
#include "util/fp16.h"
#include "util/json.h"

namespace llm::test {
namespace {

// Bound on a greedy run's logit rows (relative L2 against the CPU on the
// same BF16-rounded weights) while the tokens agree. The error grows along
// the 200 generated positions as the BF16 KV cache and activations drift:
// its largest value over the six prompts was 0.0178 on the emulator and
// 0.0211 on an H200 (2026-11-27: the GPU's exp2f/tanhf and fused
// multiply-adds round differently; tokens agreed up to the same positions
// as on the emulator, where the CPU's two candidate tokens were within
// 0.01). The first bound, 2e-2, left the emulator 11% of margin. The
// kernel mutants (bench/results/2026-11-24-cuda-mutants.md) move the model
// tests' logits by 0.8 to 1.2; the subtlest (a stale split plan in a
// graph, 2.8e-2 to 8.5e-2) is the graph tests' to catch, at 2e-2.
constexpr double kGreedyRelL2 = 3e-2;

struct Backends {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> cpu, gpu;
};

// kv_type: both pools' element type (F32, KvCacheSpec's default, is BF16 on CUDA).
void MakeBackends(const std::string& path, int32_t n_blocks, Backends* b, int32_t kv_type = LLM_KV_F32,
                  int32_t kv_type_v = LLM_KV_AUTO) {
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  b->model = std::move(*m);
  KvCacheSpec kv{16, n_blocks};
  kv.kv_type = kv_type;
  kv.kv_type_v = kv_type_v;
  auto cpu = CreateCpuBackend(b->model->config, b->model->weights, kv, 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  b->cpu = std::move(*cpu);
  CudaBackendOptions o;
  auto gpu = CreateCudaBackend(b->model->config, b->model->weights, &kv, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  ASSERT_EQ(kv.n_blocks, n_blocks);
  EXPECT_EQ((*gpu)->kind(), LLM_BACKEND_CUDA);
  b->gpu = std::move(*gpu);
}

// Greedy generation of n tokens after `prompt` (one prefill step, then one
// token per step); the logits of every generated position in *logits.
std::vector<int32_t> Greedy(Backend* be, const std::vector<int32_t>& prompt, int n, int32_t n_vocab,
                            std::vector<std::vector<float>>* logits) {
  std::vector<int32_t> table(64);
  for (int i = 0; i < 64; ++i) table[i] = (i * 7 + 3) % 64;  // scattered blocks
  std::vector<int32_t> out, step = prompt;
  std::vector<float> row(n_vocab);
  int32_t n_past = 0;
  for (int i = 0; i < n; ++i) {
    BatchSeq s{0, static_cast<int32_t>(step.size()), n_past, table};
    const int32_t last = static_cast<int32_t>(step.size()) - 1;
    Batch batch{step, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&last, 1)};
    Status st = be->Forward(batch, row.data());
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return out;
    const int32_t best = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    if (logits) logits->push_back(row);
    out.push_back(best);
    n_past += static_cast<int32_t>(step.size());
    step = {best};
  }
  return out;
}

// The weights as the CUDA backend holds them: every matrix rounded to BF16
// (norm weights stay F32, as the backend uploads them), in F32 storage the
// CPU backend reads. The views point into *storage.
ModelWeights Bf16RoundedWeights(const ModelWeights& w, std::vector<std::vector<float>>* storage) {
  ModelWeights r = w;
  auto round = [&](WeightView* v) {
    if (v->empty() || v->type != TensorType::F32) return;
    std::vector<float> copy(static_cast<size_t>(v->rows * v->cols));
    for (int64_t i = 0; i < v->rows; ++i) {
      const float* src = reinterpret_cast<const float*>(static_cast<const char*>(v->data) + i * v->row_bytes);
      for (int64_t j = 0; j < v->cols; ++j) copy[i * v->cols + j] = Bf16ToF32(F32ToBf16(src[j]));
    }
    storage->push_back(std::move(copy));
    v->data = storage->back().data();
    v->row_bytes = static_cast<size_t>(v->cols) * sizeof(float);
    v->packed = nullptr;
  };
  const bool tied = w.output.data == w.token_embd.data;
  round(&r.token_embd);
  if (tied) {
    r.output = r.token_embd;
  } else {
    round(&r.output);
  }
  for (LayerWeights& l : r.layers)
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) round(v);
  return r;
}

// max |a[i] - b[i]| over i other than skip0 and skip1; NaN counts as huge.
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b, int32_t skip0 = -1, int32_t skip1 = -1) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (static_cast<int32_t>(i) == skip0 || static_cast<int32_t>(i) == skip1) continue;
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    m = std::isnan(d) ? 1e30 : std::max(m, d);
  }
  return m;
}

// The near-tie rule for greedy BF16 generation against the CPU.
//
// The reference is the CPU backend on the CUDA backend's own weights (BF16-
// rounded), which removes the largest difference between the two; what is
// left is the GPU's BF16 KV cache and BF16 GEMM inputs. Positions are
// compared while the tokens agree (both backends then saw the same
// context), and at each such position:
//   - the GPU's logit row is within kGreedyRelL2 (3e-2) relative L2 of the
//     CPU's (a wrong kernel misses it by far);
//   - e = the largest |gpu - cpu| logit difference over the earlier rows
//     and over this row's other logits is the measured error of this run.
// Where the tokens first differ, the CPU's logit of its own token may exceed
// its logit of the GPU's token by at most 2e: two logits each off by about e
// can swap only if they were within 2e. (The two tokens' own errors are left
// out of e: with them, any flip would pass, since the GPU ranked them the
// other way.) A flip between clearly separated logits fails, however the
// run's error compares with a fixed threshold. After the first difference
// the sequences may go anywhere and are not compared.
TEST(CudaBackend, StoriesGreedyMatchesCpu) {
  {
    // Without a device too: the rounded weights are a different model (the
    // rounding took place) whose logits stay close to the F32 model's.
    auto m = Model::Load((RepoDir() + "/models/stories260K-f32.gguf").c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    std::vector<std::vector<float>> storage;
    const ModelWeights rounded = Bf16RoundedWeights((*m)->weights, &storage);
    auto f32 = CreateCpuBackend((*m)->config, (*m)->weights, KvCacheSpec{16, 64}, 1);
    auto b16 = CreateCpuBackend((*m)->config, rounded, KvCacheSpec{16, 64}, 1);
    ASSERT_TRUE(f32.ok() && b16.ok());
    std::vector<std::vector<float>> l32, l16;
    Greedy(f32->get(), {1, 403, 407}, 1, (*m)->config.n_vocab, &l32);
    Greedy(b16->get(), {1, 403, 407}, 1, (*m)->config.n_vocab, &l16);
    ASSERT_EQ(l32.size(), 1u);
    ASSERT_EQ(l16.size(), 1u);
    const double d = RelL2(l16[0], l32[0]);
    std::printf("BF16-rounded weights move the first logits by %.2e relative L2\n", d);
    EXPECT_GT(d, 0.0);
    EXPECT_LT(d, 2e-2);
  }
  SKIP_WITHOUT_DEVICE();
  Backends b;
  MakeBackends(RepoDir() + "/models/stories260K-f32.gguf", 64, &b);
  if (HasFatalFailure()) return;
  std::vector<std::vector<float>> storage;
  const ModelWeights rounded = Bf16RoundedWeights(b.model->weights, &storage);
  auto cpu16 = CreateCpuBackend(b.model->config, rounded, KvCacheSpec{16, 64}, 2);
  ASSERT_TRUE(cpu16.ok()) << cpu16.status().message();
  std::vector<std::pair<std::vector<int32_t>, int>> prompts;
  auto doc = ParseJson(ReadFile(DataDir() + "/llama.cpp/stories260K-greedy.json"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  for (const Json& e : doc->array()) {
    if (e.Find("weights")->as_string() != "F32") continue;
    std::vector<int32_t> ids;
    for (const Json& x : e.Find("prompt_ids")->array()) ids.push_back(static_cast<int32_t>(x.as_int()));
    prompts.push_back({ids, static_cast<int>(e.Find("n_predict")->as_int())});
  }
  ASSERT_FALSE(prompts.empty());
  const int32_t V = b.model->config.n_vocab;
  for (auto& [prompt, n] : prompts) {
    SCOPED_TRACE("prompt of " + std::to_string(prompt.size()) + " tokens");
    std::vector<std::vector<float>> cpu_logits, gpu_logits;
    const std::vector<int32_t> want = Greedy(cpu16->get(), prompt, n, V, &cpu_logits);
    const std::vector<int32_t> got = Greedy(b.gpu.get(), prompt, n, V, &gpu_logits);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(gpu_logits.size(), cpu_logits.size());
    double e = 0, rel = 0;
    size_t i = 0;
    for (; i < want.size(); ++i) {
      const double r = RelL2(gpu_logits[i], cpu_logits[i]);
      rel = std::max(rel, r);
      EXPECT_LT(r, kGreedyRelL2) << "logits at generated position " << i;
      e = std::max(e, MaxAbsDiff(gpu_logits[i], cpu_logits[i], want[i], got[i]));
      if (got[i] != want[i]) break;
      e = std::max(e, MaxAbsDiff(gpu_logits[i], cpu_logits[i]));
    }
    if (i < want.size()) {
      const double gap = static_cast<double>(cpu_logits[i][want[i]]) - cpu_logits[i][got[i]];
      EXPECT_LE(gap, 2 * e) << "CUDA token " << got[i] << " != CPU token " << want[i] << " at generated position "
                            << i << ": the CPU's logits of the two differ by " << gap
                            << ", more than twice the largest logit error measured so far (" << e << ")";
      std::printf("note: tokens agree up to position %zu of %zu (CPU gap of the two tokens %.4f, 2e = %.4f; "
                  "largest relative L2 %.4f)\n",
                  i, want.size(), gap, 2 * e, rel);
    } else {
      std::printf("note: all %zu tokens agree; largest logit error %.4f, relative L2 %.4f\n", want.size(), e, rel);
    }
  }
}

// Runs `batch` on both backends and compares the logits.
void Compare(Backend* cpu, Backend* gpu, int32_t n_vocab, const Batch& batch, const char* what) {
  SCOPED_TRACE(what);
  const size_t n = batch.logit_rows.size() * static_cast<size_t>(n_vocab);
  std::vector<float> want(n), got(n, NAN);
  Status a = cpu->Forward(batch, want.data());
  ASSERT_TRUE(a.ok()) << a.message();
  Status c = gpu->Forward(batch, got.data());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_LT(RelL2(got, want), 2e-2);
}

void Compare(Backends& b, const Batch& batch, const char* what) {
  Compare(b.cpu.get(), b.gpu.get(), b.model->config.n_vocab, batch, what);
}

TEST(CudaBackend, TinyModelBatchesMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthTiny();
  Backends b;
  MakeBackends(path, 64, &b);
  if (HasFatalFailure()) return;
  std::vector<int32_t> ta = {5, 9, 2, 11, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49}, tb = {20, 21, 22, 23, 24, 25, 26, 27}, tc = {60, 61};
  std::vector<llm_token> prompt(300);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<llm_token>((i * 37 + 11) % 512);

  // 1) seq A: prefill 100 tokens (tensor-core kernel, two tiles), logits of every 10th row
  {
    BatchSeq s{0, 100, 0, ta};
    std::vector<int32_t> rows;
    for (int i = 9; i < 100; i += 10) rows.push_back(i);
    Compare(b, Batch{std::span<const llm_token>(prompt.data(), 100), std::span<const BatchSeq>(&s, 1), rows},
            "prefill chunk 1");
  }
  // 2) seq A chunk 2 (reads chunk 1 from the cache, starts mid-block) + seq B prefill 17 + seq C 3 tokens (decode kernel)
  {
    std::vector<llm_token> toks(prompt.begin() + 100, prompt.begin() + 180);
    toks.insert(toks.end(), prompt.begin(), prompt.begin() + 17);
    toks.insert(toks.end(), {7, 8, 9});
    std::vector<BatchSeq> seqs = {{0, 80, 100, ta}, {80, 17, 0, tb}, {97, 3, 0, tc}};
    std::vector<int32_t> rows = {79, 0, 96, 97, 98, 99, 50};
    Compare(b, Batch{toks, seqs, rows}, "chunk 2 + prefill + short");
  }
  // 3) decode steps for all three
  for (int step = 0; step < 20; ++step) {
    std::vector<llm_token> toks = {static_cast<llm_token>(step + 1), static_cast<llm_token>(step + 100),
                                   static_cast<llm_token>(step + 200)};
    std::vector<BatchSeq> seqs = {{0, 1, 180 + step, ta}, {1, 1, 17 + step, tb}, {2, 1, 3 + step, tc}};
    std::vector<int32_t> rows = {0, 1, 2};
    Compare(b, Batch{toks, seqs, rows}, ("decode step " + std::to_string(step)).c_str());
  }
  // 4) copy-on-write: seq B's second block (positions 16..31) copied to a fresh block
  //    that seq D's table uses; D continues from B's 37 tokens.
  {
    ASSERT_TRUE(b.cpu->CopyKvBlock(tb[1], 63).ok());
    ASSERT_TRUE(b.gpu->CopyKvBlock(tb[1], 63).ok());
    std::vector<int32_t> td = {tb[0], 63, tb[2]};
    std::vector<llm_token> toks = {300};
    std::vector<BatchSeq> seqs = {{0, 1, 37, td}};
    std::vector<int32_t> rows = {0};
    Compare(b, Batch{toks, seqs, rows}, "after CopyKvBlock");
  }
  // 5) no logits wanted: K/V stored only
  {
    std::vector<llm_token> toks = {1, 2, 3};
    BatchSeq s{0, 3, 0, tc};
    std::vector<float> none;
    EXPECT_TRUE(b.gpu->Forward(Batch{toks, std::span<const BatchSeq>(&s, 1), {}}, nullptr).ok());
  }
  std::remove(path.c_str());
}

// The attention scale and the RoPE pairing come from the model config, as
// on the CPU backend: the tiny model with NEOX pairs, and with a scale other
// than 1/sqrt(head_dim), matches the CPU through the prefill kernel, the
// decode kernel and a decode step. The first half runs without a device: it
// proves each variant moves the CPU's logits well past the comparison's
// tolerance, so a backend that ignored the config could not pass.
TEST(CudaBackend, AttentionScaleAndRopePairingFromTheConfig) {
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<int32_t> ta = {3, 1, 4, 0, 5, 9}, tb = {10, 11};
  std::vector<llm_token> toks(90);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<llm_token>((i * 37 + 11) % 512);
  toks.insert(toks.end(), {7, 8, 9});
  const std::vector<BatchSeq> seqs = {{0, 90, 0, ta}, {90, 3, 0, tb}};  // prefill kernel + decode kernel
  const std::vector<int32_t> rows = {0, 45, 89, 90, 92};
  const std::vector<llm_token> next = {1, 2};
  const std::vector<BatchSeq> step = {{0, 1, 90, ta}, {1, 1, 3, tb}};
  const std::vector<int32_t> both = {0, 1};
  const ModelConfig base = (*m)->config;
  const int32_t V = base.n_vocab;
  auto cpu_logits = [&](const ModelConfig& c) {
    std::vector<float> out(rows.size() * static_cast<size_t>(V));
    auto cpu = CreateCpuBackend(c, (*m)->weights, KvCacheSpec{16, 32}, 2);
    EXPECT_TRUE(cpu.ok()) << cpu.status().message();
    if (cpu.ok()) {
      EXPECT_TRUE((*cpu)->Forward(Batch{toks, seqs, rows}, out.data()).ok());
    }
    return out;
  };
  const std::vector<float> plain = cpu_logits(base);
  for (int variant = 0; variant < 2; ++variant) {
    ModelConfig c = base;
    if (variant == 0) c.rope_style = RopeStyle::kNeox;
    if (variant == 1) c.attn_scale = 3.0f / std::sqrt(static_cast<float>(c.head_dim));
    SCOPED_TRACE(variant == 0 ? "NEOX pairs" : "attn_scale 3/sqrt(head_dim)");
    const double moved = RelL2(cpu_logits(c), plain);
    std::printf("CPU logits move by %.3f relative L2 with this variant\n", moved);
    EXPECT_GT(moved, 0.1) << "the variant must change the logits far beyond the CUDA tolerance (2e-2)";
    if (!HaveDevice()) continue;
    KvCacheSpec kv{16, 32};
    auto cpu = CreateCpuBackend(c, (*m)->weights, kv, 2);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    CudaBackendOptions o;
    o.cuda_graphs = false;
    auto gpu = CreateCudaBackend(c, (*m)->weights, &kv, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    Compare(cpu->get(), gpu->get(), V, Batch{toks, seqs, rows}, "prefill + short sequence");
    Compare(cpu->get(), gpu->get(), V, Batch{next, step, both}, "decode step");
  }
  std::remove(path.c_str());
  SKIP_WITHOUT_DEVICE();
}

// Swapping through page-locked host memory: blocks out, overwritten, back
// into other blocks (consecutive runs go as one copy), a block copied
// (copy-on-write), then the sequence continues as on the CPU backend, which
// swaps and copies the same way. Each pool type: BF16 (against the CPU's
// F32), F16 and Q8_0 (against the CPU's own F16, Q8_0), and K Q8_0 with V
// F16 (kv_type_v: a block of two tile sizes, moved whole).
void SwapAndCopy(int32_t kv_type, int32_t kv_type_v = LLM_KV_AUTO) {
  SCOPED_TRACE("kv_type " + std::to_string(kv_type) + " kv_type_v " + std::to_string(kv_type_v));
  Backends b;
  MakeBackends(RepoDir() + "/models/stories260K-f32.gguf", 16, &b, kv_type, kv_type_v);
  if (::testing::Test::HasFatalFailure()) return;
  if (kv_type == LLM_KV_Q8_0) {
    EXPECT_EQ(b.gpu->kv_block_bytes(), b.cpu->kv_block_bytes());  // the same Q8_0 rows (the CPU pads tiles: 0 B here)
  } else {
    EXPECT_EQ(b.gpu->kv_block_bytes(), b.cpu->kv_block_bytes() / (kv_type == LLM_KV_F32 ? 2 : 1));  // BF16 vs F32, F16 vs F16
  }
  for (Backend* be : {b.cpu.get(), b.gpu.get()}) ASSERT_TRUE(be->ReserveSwapSpace(6).ok());
  std::vector<llm_token> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<llm_token>((i * 37 + 11) % 512);
  std::vector<int32_t> table = {0, 1, 2}, rows = {39};
  BatchSeq s{0, 40, 0, table};
  Compare(b, Batch{prompt, std::span<const BatchSeq>(&s, 1), rows}, "prefill");
  const KvSwap outs[] = {{0, 1}, {1, 2}, {2, 3}};
  for (Backend* be : {b.cpu.get(), b.gpu.get()}) ASSERT_TRUE(be->SwapOutKvBlocks(outs).ok());
  BatchSeq other{0, 40, 0, table};  // other tokens into the same blocks
  std::vector<llm_token> junk(prompt.rbegin(), prompt.rend());
  Compare(b, Batch{junk, std::span<const BatchSeq>(&other, 1), rows}, "overwrite");
  const KvSwap ins[] = {{9, 1}, {10, 2}, {4, 3}};
  for (Backend* be : {b.cpu.get(), b.gpu.get()}) ASSERT_TRUE(be->SwapInKvBlocks(ins).ok());
  for (Backend* be : {b.cpu.get(), b.gpu.get()}) ASSERT_TRUE(be->CopyKvBlock(4, 12).ok());
  std::vector<int32_t> moved = {9, 10, 12};
  std::vector<llm_token> next = {7};
  std::vector<int32_t> row0 = {0};
  BatchSeq cont{0, 1, 40, moved};
  Compare(b, Batch{next, std::span<const BatchSeq>(&cont, 1), row0}, "after swap-in and a block copy");
  const KvSwap bad[] = {{0, 6}};
  EXPECT_EQ(b.gpu->SwapOutKvBlocks(bad).code(), LLM_ERR_INVALID_ARGUMENT);
}

TEST(CudaBackend, SwappedOutBlocksComeBackLikeOnTheCpu) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t t : {LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0}) SwapAndCopy(t);
  SwapAndCopy(LLM_KV_Q8_0, LLM_KV_F16);  // the same rows as the CPU's: equal block bytes
}

TEST(CudaBackend, RejectsInvalidBatches) {
  SKIP_WITHOUT_DEVICE();
  Backends b;
  MakeBackends(RepoDir() + "/models/stories260K-f32.gguf", 8, &b);
  if (HasFatalFailure()) return;
  std::vector<int32_t> table = {0, 1};
  std::vector<float> logits(512);
  std::vector<llm_token> bad_tok = {600};
  BatchSeq s{0, 1, 0, table};
  const int32_t row = 0;
  Status st = b.gpu->Forward(Batch{bad_tok, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&row, 1)}, logits.data());
  EXPECT_EQ(st.code(), LLM_ERR_INVALID_ARGUMENT);
  std::vector<llm_token> tok = {5};
  std::vector<int32_t> bad_table = {8};
  BatchSeq s2{0, 1, 0, bad_table};
  st = b.gpu->Forward(Batch{tok, std::span<const BatchSeq>(&s2, 1), std::span<const int32_t>(&row, 1)}, logits.data());
  EXPECT_EQ(st.code(), LLM_ERR_INVALID_ARGUMENT);
  BatchSeq s3{0, 1, 40, table};  // table too short for position 40
  st = b.gpu->Forward(Batch{tok, std::span<const BatchSeq>(&s3, 1), std::span<const int32_t>(&row, 1)}, logits.data());
  EXPECT_EQ(st.code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.gpu->CopyKvBlock(0, 8).code(), LLM_ERR_INVALID_ARGUMENT);
  // still usable after the errors
  EXPECT_TRUE(b.gpu->Forward(Batch{tok, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&row, 1)}, logits.data()).ok());
}

// Runs everywhere: without a device an explicit CUDA request fails with a
// clear status and AUTO falls back to the CPU; with one, AUTO picks CUDA.
TEST(CudaBackend, DeviceSelectionThroughTheCApi) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = nullptr;
  p.n_threads = 1;
  p.backend = LLM_BACKEND_CUDA;
  llm_ctx* ctx = nullptr;
  llm_status s = llm_ctx_create(&p, &ctx);
  if (!HaveDevice()) {
    EXPECT_EQ(s, LLM_ERR_UNSUPPORTED);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find("CUDA"), std::string::npos) << llm_last_error();
  } else if (s == LLM_OK) {
    llm_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
    EXPECT_EQ(st.backend, LLM_BACKEND_CUDA);
    llm_ctx_destroy(ctx);
  } else {
    ADD_FAILURE() << "CUDA context: " << llm_last_error();
  }

  // AUTO, with the test suite's LLM_BACKEND=cpu override lifted
  const char* saved = std::getenv("LLM_BACKEND");
  std::string keep = saved ? saved : "";
  ::unsetenv("LLM_BACKEND");
  p.backend = LLM_BACKEND_AUTO;
  ctx = nullptr;
  s = llm_ctx_create(&p, &ctx);
  if (saved) ::setenv("LLM_BACKEND", keep.c_str(), 1);
  if (s == LLM_ERR_UNSUPPORTED) GTEST_SKIP() << "this build embeds no model";
  ASSERT_EQ(s, LLM_OK) << llm_last_error();
  llm_stats st;
  std::memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
#if LLM_CUDA_EMULATED
  const bool auto_is_cuda = false;  // AUTO never picks the emulator (capi.cpp): it is a test harness
#else
  const bool auto_is_cuda = HaveDevice();
#endif
  EXPECT_EQ(st.backend, auto_is_cuda ? LLM_BACKEND_CUDA : LLM_BACKEND_CPU);
  llm_ctx_destroy(ctx);
}

// A CPU draft model beside a CUDA target: its pool, addressed by the target's
// block ids, has as many blocks as the target's. The default block count is
// held to the draft's host budget (256 MiB of its blocks, F16 by default,
// at least one full-length sequence) instead of whatever fits on the GPU:
// here a 128K-token context asks for 8192 blocks per sequence, far more
// draft KV than the budget. Self-drafting is held the same way. The same
// context without a draft says what the device fits, so the expectation
// holds on a device of any size (a small one never reaches the cap).
int32_t KvBlocksOf(const llm_ctx_params& p) {
  llm_ctx* ctx = nullptr;
  const llm_status s = llm_ctx_create(&p, &ctx);
  EXPECT_EQ(s, LLM_OK) << llm_last_error();
  if (s != LLM_OK) return -1;
  llm_stats st;
  std::memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  llm_ctx_destroy(ctx);
  return st.kv_blocks_total;
}

TEST(CudaBackend, DraftModelPoolIsSizedByTheDraft) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = RepoDir() + "/models/stories260K-f32.gguf";
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  llm_ctx_params base;
  llm_ctx_params_init(&base);
  base.model_path = path.c_str();
  base.backend = LLM_BACKEND_CUDA;
  base.n_threads = 1;
  // Large enough that the draft's 256 MiB budget binds even with the F16
  // blocks (half of F32's) a context's CPU draft pool now holds.
  constexpr int32_t kCtx = 131072;
  base.n_ctx = kCtx;
  base.max_seqs = 16;
  const int64_t per_seq = kCtx / 16;
  const int32_t fits = KvBlocksOf(base);  // no draft: min(kCtx, what the device fits)
  ASSERT_GT(fits, 0);
  ModelConfig two = (*m)->config;
  two.n_layer = 2;
  for (int self : {0, 1}) {
    SCOPED_TRACE(self ? "self-drafting (2 layers)" : "draft model");
    const int64_t draft_block = CpuKvBlockBytes(self ? two : (*m)->config, 16, LLM_KV_AUTO);
    const int64_t cap = std::max<int64_t>((int64_t{256} << 20) / draft_block, per_seq);
    ASSERT_LT(cap, kCtx) << "the case must ask for more blocks than the draft's budget";
    llm_ctx_params p = base;
    if (self) {
      p.self_draft_layers = 2;
    } else {
      p.draft_model_path = path.c_str();
    }
    EXPECT_EQ(KvBlocksOf(p), std::min<int64_t>(cap, fits));
    if (fits <= cap) std::printf("note: this device fits only %d blocks: the draft's cap (%lld) was not reached\n",
                                 fits, static_cast<long long>(cap));
  }
  // An explicit block count is taken as given.
  llm_ctx_params p = base;
  p.n_ctx = 0;
  p.max_seqs = 0;
  p.draft_model_path = path.c_str();
  p.n_kv_blocks = 300;
  EXPECT_EQ(KvBlocksOf(p), 300);
}

// ------------------------------------------------------------ device sampling

#if LLM_HAVE_CUDA
// ForwardSample against host sampling of the same backend's Forward logits:
// greedy rows give the host's token (unless the top-2 gap is a near-tie),
// sampled rows a token the host's distribution allows, logprobs agree.
// (A CudaBackend method, not a Backend one: cuda_backend.h says why.)
TEST(CudaBackend, ForwardSampleMatchesHostSampling) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = SynthTiny();
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const int32_t V = (*m)->config.n_vocab;
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    std::unique_ptr<Backend> backend = MakeGpu(**m, 80, graphs);
    ASSERT_TRUE(backend);
    auto* gpu = dynamic_cast<cuda::CudaBackend*>(backend.get());
    ASSERT_NE(gpu, nullptr);
    std::vector<DecodeSeq> seqs(3);
    std::vector<std::vector<int32_t>> hist(3);
    for (size_t s = 0; s < 3; ++s) {
      for (int i = 0; i < 16; ++i) seqs[s].table.push_back(static_cast<int32_t>(s * 16 + i));
      std::vector<llm_token> toks(24);
      for (int i = 0; i < 24; ++i) toks[i] = static_cast<llm_token>((i * 17 + s) % V);
      BatchSeq q{0, 24, 0, seqs[s].table};
      ASSERT_TRUE(gpu->Forward(Batch{toks, std::span<const BatchSeq>(&q, 1), {}}, nullptr).ok());
      seqs[s].n_past = 24;
      hist[s].assign(toks.begin(), toks.end());
    }
    std::vector<cuda::DeviceSampling> ds(3);
    ds[0].params.temperature = 0.0f;  // greedy with penalties
    ds[0].params.repetition_penalty = 1.3f;
    ds[0].params.frequency_penalty = 0.2f;
    ds[1].params.temperature = 0.9f;  // top-k / top-p / min-p
    ds[1].params.top_k = 30;
    ds[1].params.top_p = 0.9f;
    ds[1].params.min_p = 0.05f;
    ds[1].params.seed = 7;
    ds[2].params.temperature = 1.0f;  // everything on, no filters
    ds[2].params.top_k = 0;
    ds[2].params.top_p = 1.0f;
    ds[2].params.min_p = 0.0f;
    ds[2].params.presence_penalty = 0.5f;
    ds[2].params.seed = 9;
    std::vector<float> probs(V);
    for (int step = 0; step < 12; ++step) {
      std::vector<llm_token> toks;
      std::vector<BatchSeq> bs;
      for (int s = 0; s < 3; ++s) {
        toks.push_back(hist[s].back());
        bs.push_back(BatchSeq{s, 1, seqs[s].n_past, seqs[s].table});
        ds[s].history = hist[s];
        ds[s].step = static_cast<uint64_t>(step);
      }
      const std::vector<int32_t> rows = {0, 1, 2};
      std::vector<float> logits(3 * static_cast<size_t>(V));
      ASSERT_TRUE(gpu->Forward(Batch{toks, bs, rows}, logits.data()).ok());
      int32_t got[3] = {-1, -1, -1};
      float lp[3] = {0, 0, 0};
      Status st = gpu->ForwardSample(Batch{toks, bs, rows}, ds, got, lp);  // same K/V written again
      ASSERT_TRUE(st.ok()) << st.message();
      for (int s = 0; s < 3; ++s) {
        std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(s) * V,
                               logits.begin() + static_cast<std::ptrdiff_t>(s + 1) * V);
        EXPECT_NEAR(lp[s], TokenLogprob(row.data(), V, got[s]), 2e-3) << "step " << step << " row " << s;
        Sampler sampler(ds[s].params, V);
        std::vector<float> pen = row;
        if (sampler.greedy()) {
          const int32_t want = sampler.Sample(pen.data(), hist[s]);
          if (got[s] != want) {
            EXPECT_LT(std::fabs(pen[want] - pen[got[s]]), 1e-3) << "greedy step " << step << ": " << got[s] << " vs " << want;
          }
        } else {
          sampler.Distribution(pen.data(), hist[s], probs.data());
          EXPECT_GT(probs[got[s]], 0.0f) << "step " << step << " row " << s << " token " << got[s];
        }
      }
      for (int s = 0; s < 3; ++s) {
        hist[s].push_back(got[s]);
        ++seqs[s].n_past;
      }
    }
    // bad calls: sampling entries must match the logit rows
    std::vector<llm_token> toks = {1};
    BatchSeq q{0, 1, seqs[0].n_past, seqs[0].table};
    const int32_t row = 0;
    int32_t out = 0;
    EXPECT_EQ(gpu->ForwardSample(Batch{toks, std::span<const BatchSeq>(&q, 1), std::span<const int32_t>(&row, 1)},
                                 std::span<const cuda::DeviceSampling>(ds.data(), 2), &out, nullptr)
                  .code(),
              LLM_ERR_INVALID_ARGUMENT);
  }
  std::remove(path.c_str());
}
#endif  // LLM_HAVE_CUDA

}  // namespace
}  // namespace llm::test
