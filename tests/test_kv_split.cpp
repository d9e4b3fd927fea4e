// K and V of different element types (llm_ctx_params.kv_type_v, issue 32;
// llama.cpp's -ctk / -ctv) on the CPU backend: the pool's bytes per block
// as the sum of a K side and a V side of their types (through llm_stats),
// a real model's prompt log-probabilities for mixed pairs beside the
// same-type runs, greedy decoding, the prefix cache and copy-on-write over
// mixed blocks, kv_type_v's defaults and refusals. The attention kernel's
// mixed pairs against a double reference: test_kv_type.cpp; the KV stream
// of a mixed cache (the VELM section): test_kv_state.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/prompt_logprobs.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "synth_model.h"

namespace llm {
namespace {

constexpr int32_t kTypes[] = {LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0};

const char* Name(int32_t t) {
  switch (t) {
    case LLM_KV_F32: return "f32";
    case LLM_KV_F16: return "f16";
    case LLM_KV_Q8_0: return "q8_0";
    case LLM_KV_Q4_0: return "q4_0";
    default: return "auto";
  }
}

struct Ctx {
  llm_ctx* ctx = nullptr;
  Ctx() = default;
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  ~Ctx() { llm_ctx_destroy(ctx); }
};

llm_status Create(const std::string& path, int32_t k, int32_t v, Ctx* c, int32_t backend = LLM_BACKEND_CPU) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.backend = backend;
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_ctx = 256;
  p.kv_type = k;
  p.kv_type_v = v;
  return llm_ctx_create(&p, &c->ctx);
}

std::string Synth(const std::string& shape) {
  const std::string path = ::testing::TempDir() + "/llmrt_kvsplit_" + shape + "_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.seed = 7;
  const synth::SynthShape* s = synth::FindSynthShape(shape);
  EXPECT_NE(s, nullptr) << shape;
  if (s == nullptr) return {};
  const Status st = synth::WriteSynthModel(*s, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// Greedy, n tokens whatever comes (ignore_eos), with their logprobs.
test::SeqResult Greedy(llm_ctx* ctx, const char* prompt, int n) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  llm_request r;
  llm_request_init(&r);
  r.prompt = prompt;
  r.max_tokens = n;
  r.ignore_eos = 1;
  r.sampling = &sp;
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
  if (id == 0) return {};
  std::vector<test::SeqResult> res = test::WaitFor(ctx, id);
  return res.empty() ? test::SeqResult{} : res[0];
}

// Bytes of one token's K or V row per layer and KV head in the CPU pool
// (kv_layout.h): the element bytes, plus Q8_0's F32 row scale or Q4_0's F16
// scale per 32 values.
int64_t RowBytes(int32_t t, int64_t hd) {
  switch (t) {
    case LLM_KV_F32: return 4 * hd;
    case LLM_KV_F16: return 2 * hd;
    case LLM_KV_Q8_0: return hd + 4;
    default: return hd / 32 * 18;
  }
}

// ------------------------------------------------------------ bytes

// Every pair of types on "tiny" (2 layers, 2 KV heads, head_dim 64; blocks
// of 16): a block holds 16 K rows of K's type and 16 V rows of V's per
// layer and head, as llm_stats.kv_pool_bytes / kv_blocks_total says.
TEST(KvSplit, BlockBytesAreTheSumOfBothSides) {
  const std::string path = Synth("tiny");
  for (int32_t k : kTypes) {
    for (int32_t v : kTypes) {
      SCOPED_TRACE(std::string("K ") + Name(k) + " V " + Name(v));
      Ctx c;
      ASSERT_EQ(Create(path, k, v, &c), LLM_OK) << llm_last_error();
      llm_stats s{};
      s.struct_size = sizeof s;
      ASSERT_EQ(llm_get_stats(c.ctx, &s), LLM_OK);
      ASSERT_GT(s.kv_blocks_total, 0);
      EXPECT_EQ(s.kv_pool_bytes % static_cast<uint64_t>(s.kv_blocks_total), 0u);
      const uint64_t per_block = s.kv_pool_bytes / static_cast<uint64_t>(s.kv_blocks_total);
      EXPECT_EQ(per_block, static_cast<uint64_t>(2 * 2 * 16 * (RowBytes(k, 64) + RowBytes(v, 64))));
    }
  }
  std::filesystem::remove(path);
}

// ------------------------------------------------------------ defaults

// kv_type_v 0 is "as kv_type", and naming kv_type's own type (or, on the
// CPU, F16 beside AUTO) is the same pool: log-probabilities bitwise equal.
TEST(KvSplit, KvTypeVOfKsTypeIsTheSingleTypePool) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  EXPECT_EQ(p.kv_type_v, LLM_KV_AUTO);
  const std::string path = test::ModelPathF32();
  auto run = [&](int32_t k, int32_t v) {
    Ctx c;
    EXPECT_EQ(Create(path, k, v, &c), LLM_OK) << llm_last_error();
    if (c.ctx == nullptr) return std::vector<float>{};
    return Greedy(c.ctx, "Once upon a time, there was a little girl named Lily", 24).logprobs;
  };
  const std::vector<float> q8 = run(LLM_KV_Q8_0, LLM_KV_AUTO);
  ASSERT_EQ(q8.size(), 24u);
  EXPECT_EQ(run(LLM_KV_Q8_0, LLM_KV_Q8_0), q8);
  EXPECT_EQ(run(LLM_KV_AUTO, LLM_KV_F16), run(LLM_KV_F16, LLM_KV_AUTO));
  // and a V of another type is another pool: its values differ
  EXPECT_NE(run(LLM_KV_Q8_0, LLM_KV_F32), q8);
}

// A V type that is no LLM_KV_* value is refused naming kv_type_v; Q4_0 on
// either side needs head_dim a multiple of 32 (stories260K: 8); CUDA (which
// stores each side in its type too: test_cuda_kv_types.cpp) refuses an F32
// V as it does an F32 K, before touching a device.
TEST(KvSplit, Refusals) {
  const std::string path = test::ModelPathF32();
  for (int32_t bad : {-1, 6, 77}) {
    Ctx c;
    EXPECT_EQ(Create(path, LLM_KV_F16, bad, &c), LLM_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(llm_last_error()).find("kv_type_v"), std::string::npos) << llm_last_error();
    EXPECT_EQ(c.ctx, nullptr);
  }
  {
    Ctx c;
    EXPECT_EQ(Create(path, LLM_KV_F16, LLM_KV_Q4_0, &c), LLM_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(llm_last_error()).find("head_dim"), std::string::npos) << llm_last_error();
  }
  Ctx g;
  EXPECT_NE(Create(path, LLM_KV_Q8_0, LLM_KV_F32, &g, LLM_BACKEND_CUDA), LLM_OK);
  EXPECT_EQ(g.ctx, nullptr);
}

// ------------------------------------------------------------ a real model

// Prompt log-probabilities of SmolLM2-135M (head_dim 64) over a paragraph,
// as perplexity ratios to F32 KV, for the same-type caches and the mixed
// pairs llama.cpp users pick (-ctk q8_0 -ctv f16, -ctk f16 -ctv q4_0, ...).
// A paragraph is a noisy sample (F16 alone moves it -0.8% here), so the
// bounds are guards, not measurements (those, over 15 chunks beside
// llama.cpp's: bench/results/2026-11-27-kv-types.md): within 2% of F32
// unless K is Q4_0, within 8% with a Q4_0 K (KvQ4's own bound; K carries
// Q4_0's move); and each side really stored in its type (the pair differs
// from both same-type runs). A side read in the wrong type or layout moves
// the ratio by orders of magnitude.
TEST(KvSplit, SmolLM2MixedPairsBesideTheSameTypeRuns) {
  const std::string path = test::RealModelPath(test::kSmolLM2);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models.sh)";
  const std::string text =
      "The paged KV cache keeps each sequence's keys and values in fixed-size blocks, so a request that grows "
      "takes one more block instead of copying its whole cache. Blocks shared by two requests with the same "
      "prefix are counted, and a write to a shared block first copies it. The element type of the cache "
      "decides how many bytes each position takes: keys and values may even be stored in different types.";
  auto logprobs = [&](int32_t k, int32_t v) {
    Ctx c;
    EXPECT_EQ(Create(path, k, v, &c), LLM_OK) << llm_last_error();
    if (c.ctx == nullptr) return std::vector<float>{};
    std::vector<llm_token> ids(256);
    int32_t n = 0;
    EXPECT_EQ(llm_tokenize(c.ctx, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, ids.data(), 256, &n), LLM_OK);
    ids.resize(static_cast<size_t>(n));
    return test::PromptLogprobs(c.ctx, ids.data(), n);
  };
  const std::vector<float> f32 = logprobs(LLM_KV_F32, 0);
  ASSERT_GE(f32.size(), 60u);
  // log of the perplexity ratio to F32 (positive: worse)
  auto log_ratio = [&](const std::vector<float>& lp) {
    EXPECT_EQ(lp.size(), f32.size());
    double d = 0;
    for (size_t i = 0; i < f32.size() && i < lp.size(); ++i) d += f32[i] - lp[i];
    return d / static_cast<double>(f32.size());
  };
  std::vector<std::vector<float>> same(5);  // by LLM_KV_* value
  for (int32_t t : {LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0}) same[t] = logprobs(t, 0);
  const std::pair<int32_t, int32_t> pairs[] = {{LLM_KV_Q8_0, LLM_KV_F16},
                                               {LLM_KV_F16, LLM_KV_Q4_0},
                                               {LLM_KV_Q8_0, LLM_KV_Q4_0},
                                               {LLM_KV_Q4_0, LLM_KV_F16}};
  for (const auto& [k, v] : pairs) {
    SCOPED_TRACE(std::string("K ") + Name(k) + " V " + Name(v));
    const std::vector<float> lp = logprobs(k, v);
    const double r = log_ratio(lp), rk = log_ratio(same[k]), rv = log_ratio(same[v]);
    std::printf("K %-4s V %-4s: perplexity ratio to F32 %.5f (K's type alone %.5f, V's %.5f)\n", Name(k), Name(v),
                std::exp(r), std::exp(rk), std::exp(rv));
    EXPECT_LT(std::fabs(r), k == LLM_KV_Q4_0 ? 0.08 : 0.02);
    EXPECT_NE(lp, same[k]);
    EXPECT_NE(lp, same[v]);
  }
}

// Greedy continuations of SmolLM2 with mixed caches against F32 KV's: the
// answer (" green", and "." unless K is Q4_0) as F32's, and a continuation of
// the requested length for every pair (past the answer the continuations
// part at near-ties: after " green." F32 and K F16 + V Q8_0 pick different
// next lines).
TEST(KvSplit, SmolLM2GreedyWithMixedCaches) {
  const std::string path = test::RealModelPath(test::kSmolLM2);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models.sh)";
  const char* prompt = "The three primary colors are red, blue and";
  auto greedy = [&](int32_t k, int32_t v) {
    Ctx c;
    EXPECT_EQ(Create(path, k, v, &c), LLM_OK) << llm_last_error();
    return c.ctx == nullptr ? test::SeqResult{} : Greedy(c.ctx, prompt, 12);
  };
  const test::SeqResult ref = greedy(LLM_KV_F32, 0);
  ASSERT_EQ(ref.tokens.size(), 12u);
  const std::pair<int32_t, int32_t> pairs[] = {{LLM_KV_Q8_0, LLM_KV_F16}, {LLM_KV_F16, LLM_KV_Q8_0},
                                               {LLM_KV_F16, LLM_KV_Q4_0}, {LLM_KV_Q8_0, LLM_KV_Q4_0},
                                               {LLM_KV_Q4_0, LLM_KV_Q8_0}};
  for (const auto& [k, v] : pairs) {
    SCOPED_TRACE(std::string("K ") + Name(k) + " V " + Name(v));
    const test::SeqResult r = greedy(k, v);
    std::printf("K %-4s V %-4s: %s\n", Name(k), Name(v), r.text.c_str());
    ASSERT_EQ(r.tokens.size(), 12u);
    EXPECT_EQ(r.status, LLM_OK);
    const size_t same = k != LLM_KV_Q4_0 ? 2 : 1;
    for (size_t i = 0; i < same; ++i) EXPECT_EQ(r.tokens[i], ref.tokens[i]) << "token " << i;
  }
}

// ------------------------------------------------------------ prefix cache

// A mixed cache's blocks go through the prefix cache and copy-on-write as
// one-type blocks do: a second request with the same prompt reuses its
// full blocks and continues identically; n = 3 parallel samples share the
// prompt's blocks (the last one partial, so each sample's first write
// copies it) and each equals the single run. "tiny" (head_dim 64) so that
// Q4_0 takes part.
TEST(KvSplit, PrefixCacheAndCopyOnWriteWithMixedTypes) {
  const std::string path = Synth("tiny");
  std::vector<llm_token> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<llm_token>(1 + (i * 37) % 500));  // 2 full blocks + 5
  const std::pair<int32_t, int32_t> pairs[] = {{LLM_KV_Q8_0, LLM_KV_F16}, {LLM_KV_F16, LLM_KV_Q4_0},
                                               {LLM_KV_Q4_0, LLM_KV_Q8_0}};
  for (const auto& [k, v] : pairs) {
    SCOPED_TRACE(std::string("K ") + Name(k) + " V " + Name(v));
    Ctx c;
    ASSERT_EQ(Create(path, k, v, &c), LLM_OK) << llm_last_error();
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = 0;
    auto submit = [&](int32_t n) {
      llm_request r;
      llm_request_init(&r);
      r.prompt_tokens = prompt.data();
      r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
      r.max_tokens = 10;
      r.ignore_eos = 1;
      r.n = n;
      r.sampling = &sp;
      llm_request_id id = 0;
      EXPECT_EQ(llm_submit(c.ctx, &r, &id), LLM_OK) << llm_last_error();
      return test::WaitFor(c.ctx, id, n);
    };
    const auto first = submit(1);
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(first[0].tokens.size(), 10u);
    EXPECT_EQ(first[0].metrics.cached_prompt_tokens, 0);
    const auto again = submit(1);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_GE(again[0].metrics.cached_prompt_tokens, 32);
    EXPECT_EQ(again[0].tokens, first[0].tokens);
    EXPECT_EQ(again[0].logprobs, first[0].logprobs);
    const auto three = submit(3);
    ASSERT_EQ(three.size(), 3u);
    for (const auto& s : three) {
      EXPECT_EQ(s.tokens, first[0].tokens);
      EXPECT_EQ(s.logprobs, first[0].logprobs);
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace llm
