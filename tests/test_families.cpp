// The model families against llama.cpp (llama with Llama 3.1 rope_freqs,
// qwen2, qwen3, Mistral-style llama, gemma2, phi3, Mixtral-style llama,
// qwen3moe, qwen2moe, phi3 with Phi-3.5's LongRoPE, gpt-oss with MXFP4
// experts): tiny synthesized models (llm-synth,
// F32, sharp attention) run on the CPU backend, compared with the outputs
// llama.cpp gave for the same files (tests/data/families/, written by
// tools/family_reference.py through llama-cpp-python with F32 K/V and flash
// attention off):
//   * logits at every position of each prompt within 1e-3 relative, each
//     prompt alone (prefilled in chunks over a shuffled block table) and all
//     prompts in one batch (two threads: the lanes split by sequence);
//   * the greedy 64-token continuation identical;
//   * the perplexity of the first prompt within 0.5%.
// llama3_rope_freqs is issue 19's defect: a Llama 3.1-style rope_freqs.weight
// that llmrt loaded and never applied; the reference records how far
// llama.cpp's logits move without it, so this test fails on such a runtime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/rope_freq.h"
#include "llm.h"
#include "support/api_helpers.h"
#include "support/gguf_writer.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "synth_model.h"

namespace llm::test {
namespace {

// |a - b| <= tol * max(|b|, 1), tol 1e-3 (a reference's rel_tol may only
// tighten it). gemma2's reference comes from llama.cpp built without its F16
// GELU table (GGML_GELU_FP16), which alone is 2.6e-3 away from an exact GELU.
constexpr double kRelTol = 1e-3;
constexpr double kPplTol = 0.005;  // relative

struct Reference {
  Json json;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> logits;  // per prompt: (n_tokens, n_vocab)
  int32_t n_vocab = 0;
};

Reference LoadReference(const std::string& name) {
  Reference r;
  r.json = LoadReferenceJson("families/" + name);
  const Json* prompts = r.json.Find("prompts");
  if (prompts == nullptr) {
    ADD_FAILURE() << "tests/data/families/" << name << ".json has no prompts";
    return r;
  }
  r.n_vocab = static_cast<int32_t>(r.json.Find("n_vocab")->as_int());
  const std::string bin = ReadFile(RepoDir() + "/tests/data/families/" + r.json.Find("logits_file")->as_string());
  size_t off = 0;
  for (const Json& p : prompts->array()) {
    r.prompts.push_back(JsonInts(p));
    const size_t n = r.prompts.back().size() * static_cast<size_t>(r.n_vocab);
    std::vector<float> v(n);
    if (off + n * sizeof(float) <= bin.size()) std::memcpy(v.data(), bin.data() + off, n * sizeof(float));
    off += n * sizeof(float);
    r.logits.push_back(std::move(v));
  }
  EXPECT_EQ(off, bin.size()) << name << ": logits file size";
  return r;
}

std::string Fnv1a64Hex(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Rebuilds the model llama.cpp ran, from the recorded llm-synth arguments,
// and checks it is byte for byte that file. Returns its path ("" on failure).
std::string SynthesizeFile(const std::string& name, const Json& ref, bool drop_rope_freqs = false) {
  const synth::SynthShape* shape = synth::FindSynthShape(ref.Find("shape")->as_string());
  if (shape == nullptr) {
    ADD_FAILURE() << "unknown shape " << ref.Find("shape")->as_string();
    return "";
  }
  synth::SynthOptions o;
  const std::vector<Json>& args = ref.Find("synth_args")->array();
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string k = args[i].as_string(), v = args[i + 1].as_string();
    if (k == "--type") {
      o.type = v == "f32" ? TensorType::F32 : v == "f16" ? TensorType::F16 : TensorType::BF16;
    } else if (k == "--seed") {
      o.seed = std::stoull(v);
    } else if (k == "--std") {
      o.stddev = std::stof(v);
    } else if (k == "--norm-std") {
      o.norm_std = std::stof(v);
    } else if (k == "--bias-std") {
      o.bias_std = std::stof(v);
    } else {
      ADD_FAILURE() << "unknown llm-synth argument " << k;
    }
  }
  o.drop_rope_freqs = drop_rope_freqs;
  const std::string path = ::testing::TempDir() + "/llmrt_family_" + std::to_string(::getpid()) + "_" + name + ".gguf";
  Status st = synth::WriteSynthModel(*shape, o, path);
  if (!st.ok()) {
    ADD_FAILURE() << st.message();
    return "";
  }
  if (!drop_rope_freqs) {
    EXPECT_EQ(Fnv1a64Hex(ReadFile(path)), ref.Find("model_fnv1a64")->as_string())
        << name << ": llm-synth no longer writes the file llama.cpp ran (regenerate with tools/family_reference.py)";
  }
  return path;
}

std::unique_ptr<Model> SynthesizeAndLoad(const std::string& name, const Json& ref, bool drop_rope_freqs = false) {
  const std::string path = SynthesizeFile(name, ref, drop_rope_freqs);
  if (path.empty()) return nullptr;
  auto m = Model::Load(path.c_str());
  std::remove(path.c_str());
  if (!m.ok()) {
    ADD_FAILURE() << m.status().message();
    return nullptr;
  }
  return std::move(m).value();
}

constexpr int32_t kBlock = 16;
// The context llama.cpp ran the references with (family_reference.py's
// N_CTX, one sequence): LongRoPE picks its factors by it.
constexpr int32_t kRefCtx = 256;

// A shuffled block table with room for n_pos positions, from `next` on.
std::vector<int32_t> Table(int32_t n_pos, int32_t* next, int32_t n_blocks) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < (n_pos + kBlock - 1) / kBlock; ++i) t.push_back((*next)++ % n_blocks);
  std::reverse(t.begin(), t.end());
  return t;
}

// The worst |a - b| / max(|b|, 1) over two (n, n_vocab) logit arrays.
double WorstRel(const float* a, const float* b, size_t n, size_t* where) {
  double worst = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(static_cast<double>(b[i])));
    if (d > worst || std::isnan(d)) {
      worst = std::isnan(d) ? INFINITY : d;
      *where = i;
    }
  }
  return worst;
}

double Perplexity(const std::vector<float>& logits, const std::vector<int32_t>& ids, int32_t V) {
  double nll = 0.0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data() + t * V;
    const double m = *std::max_element(row, row + V);
    double s = 0.0;
    for (int32_t i = 0; i < V; ++i) s += std::exp(row[i] - m);
    nll += m + std::log(s) - row[ids[t + 1]];
  }
  return std::exp(nll / static_cast<double>(ids.size() - 1));
}

// Every position's logits of `prompt`, prefilled in chunks of `chunk` tokens.
std::vector<float> PromptLogits(Backend& b, const std::vector<int32_t>& prompt, int32_t chunk, int32_t V,
                                std::span<const int32_t> table) {
  std::vector<float> out(prompt.size() * V);
  for (int32_t p = 0; p < static_cast<int32_t>(prompt.size()); p += chunk) {
    const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(prompt.size()) - p);
    std::vector<int32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    BatchSeq s{0, n, p, table};
    Batch batch{std::span<const llm_token>(prompt.data() + p, n), std::span<const BatchSeq>(&s, 1), rows};
    Status st = b.Forward(batch, out.data() + static_cast<size_t>(p) * V);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

class Families : public ::testing::TestWithParam<const char*> {};

TEST_P(Families, LogitsGreedyAndPerplexityMatchLlamaCpp) {
  const std::string name = GetParam();
  const Reference ref = LoadReference(name);
  ASSERT_FALSE(ref.prompts.empty());
  std::unique_ptr<Model> m = SynthesizeAndLoad(name, ref.json);
  ASSERT_NE(m, nullptr);
  const int32_t V = m->config.n_vocab;
  ASSERT_EQ(V, ref.n_vocab);
  if (name == "mistral") {
    // heads wider than n_embd / n_head; the file's window not applied, as
    // llama.cpp applies none for `llama` (its n_swa, recorded, is 0)
    EXPECT_EQ(m->config.head_dim, 32);
    EXPECT_EQ(m->config.n_embd / m->config.n_head, 16);
    EXPECT_EQ(ref.json.Find("llama_cpp_n_swa")->as_int(), 0);
    EXPECT_EQ(m->config.sliding_window, 0);
    EXPECT_GT(ref.prompts[0].size(), 32u);  // longer than the file's window
  }
  const double tol = ref.json.Find("rel_tol") != nullptr ? ref.json.Find("rel_tol")->as_double() : kRelTol;
  EXPECT_LE(tol, kRelTol) << name << ": a reference may not loosen the tolerance";
  if (name == "phi3") {
    // fused tensors split into views, 24 of 32 dimensions rotated, and the
    // file's window (32, under a 96-token prompt) not applied, as llama.cpp
    // applies none for phi3 (its n_swa, recorded, is 0)
    EXPECT_TRUE(m->config.fused_qkv && m->config.fused_gate_up);
    EXPECT_EQ(m->config.rope_dim, 24);
    EXPECT_EQ(m->config.head_dim, 32);
    EXPECT_EQ(ref.json.Find("llama_cpp_n_swa")->as_int(), 0);
    EXPECT_EQ(m->config.sliding_window, 0);
  }
  if (name.rfind("gpt_oss", 0) == 0) {
    // gpt-oss as llama.cpp reads it: even layers local (window 32, shorter
    // than both prompts: llama.cpp's n_swa, recorded), sinks, biases, YaRN
    // on every layer, 32 MXFP4 experts of which 4 per token
    EXPECT_EQ(m->config.arch_kind, ModelArch::kGptOss);
    EXPECT_EQ(ref.json.Find("llama_cpp_n_swa")->as_int(), 32);
    EXPECT_EQ(m->config.sliding_window, 32);
    EXPECT_TRUE(m->config.IsLocalLayer(0) && !m->config.IsLocalLayer(1) && m->config.IsLocalLayer(2));
    EXPECT_GT(ref.prompts[1].size(), 32u);
    EXPECT_TRUE(m->config.attn_sinks && m->config.out_bias && m->config.qkv_bias && m->config.expert_bias);
    EXPECT_TRUE(m->config.swa_rope_global);
    EXPECT_EQ(m->config.rope_scaling.type, RopeScalingType::kYarn);
    EXPECT_EQ(m->config.n_expert, 32);
    EXPECT_EQ(m->config.n_expert_used, 4);
    const TensorType experts = name == "gpt_oss" ? TensorType::MXFP4 : TensorType::F32;
    EXPECT_EQ(m->weights.layers[0].exp_down[0].type, experts);
    EXPECT_EQ(m->weights.layers[0].exp_gate[31].type, experts);
  }
  const int32_t n_blocks = 64;
  if (name == "phi35" || name == "phi35_short") {
    // LongRoPE: both factor tensors and the converter's attention factor
    EXPECT_TRUE(m->config.has_longrope);
    EXPECT_NEAR(m->config.rope_attn_factor, name == "phi35" ? std::sqrt(2.0) : std::sqrt(1.2), 1e-6);
  }
  auto b = CreateCpuBackend(m->config, m->weights, KvCacheSpec{kBlock, n_blocks, kRefCtx}, 2);
  ASSERT_TRUE(b.ok()) << b.status().message();

  // ---- the vocabulary llm-synth wrote tokenizes a text as llama.cpp does
  if (const Json* tk = ref.json.Find("tokenize"); tk != nullptr) {
    auto ids = m->tokenizer->Encode(tk->Find("text")->as_string(), false, false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(*ids, JsonInts(*tk->Find("ids"))) << name << ": tokenization";
  }

  // ---- each prompt alone, in chunks of 7 (blocks straddled)
  int32_t next_block = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p) {
    const std::vector<int32_t>& ids = ref.prompts[p];
    const std::vector<int32_t> table = Table(static_cast<int32_t>(ids.size()), &next_block, n_blocks);
    const std::vector<float> got = PromptLogits(**b, ids, 7, V, table);
    size_t at = 0;
    const double worst = WorstRel(got.data(), ref.logits[p].data(), got.size(), &at);
    EXPECT_LE(worst, tol) << name << " prompt " << p << ": position " << at / V << " token " << at % V
                              << " llmrt " << got[at] << " llama.cpp " << ref.logits[p][at];
    std::printf("%s prompt %zu (%zu tokens): worst relative logit difference %.3g\n", name.c_str(), p, ids.size(),
                worst);
    if (p == 0) {
      const double want = ref.json.Find("perplexity")->Find("ppl")->as_double();
      const double ppl = Perplexity(got, ids, V);
      EXPECT_NEAR(ppl / want, 1.0, kPplTol) << name << ": perplexity " << ppl << ", llama.cpp " << want;
    }
  }

  // ---- all prompts in one batch, every row's logits
  {
    std::vector<llm_token> tokens;
    std::vector<BatchSeq> seqs;
    std::vector<std::vector<int32_t>> tables;
    for (const auto& ids : ref.prompts) tables.push_back(Table(static_cast<int32_t>(ids.size()), &next_block, n_blocks));
    for (size_t p = 0; p < ref.prompts.size(); ++p) {
      seqs.push_back(BatchSeq{static_cast<int32_t>(tokens.size()), static_cast<int32_t>(ref.prompts[p].size()), 0,
                              tables[p]});
      tokens.insert(tokens.end(), ref.prompts[p].begin(), ref.prompts[p].end());
    }
    std::vector<int32_t> rows(tokens.size());
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> got(tokens.size() * V);
    ASSERT_TRUE((*b)->Forward(Batch{tokens, seqs, rows}, got.data()).ok());
    size_t off = 0;
    for (size_t p = 0; p < ref.prompts.size(); ++p) {
      size_t at = 0;
      const double worst = WorstRel(got.data() + off, ref.logits[p].data(), ref.logits[p].size(), &at);
      EXPECT_LE(worst, tol) << name << " batched prompt " << p << ": position " << at / V;
      off += ref.logits[p].size();
    }
  }

  // ---- greedy continuation, one decode step per token
  {
    const Json& g = *ref.json.Find("greedy");
    std::vector<int32_t> seq = JsonInts(*g.Find("prompt_ids"));
    const std::vector<int32_t> want = JsonInts(*g.Find("ids"));
    const std::vector<int32_t> table = Table(static_cast<int32_t>(seq.size() + want.size()), &next_block, n_blocks);
    std::vector<float> logits(V);
    std::vector<int32_t> got;
    int32_t n_past = 0;
    std::vector<llm_token> step = seq;
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t last = static_cast<int32_t>(step.size()) - 1;
      BatchSeq s{0, static_cast<int32_t>(step.size()), n_past, table};
      ASSERT_TRUE((*b)->Forward(Batch{step, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&last, 1)},
                                logits.data())
                      .ok());
      n_past += static_cast<int32_t>(step.size());
      const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(best);
      step = {best};
    }
    EXPECT_EQ(got, want) << name << ": greedy continuation";
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, Families, ::testing::Values("llama3_rope_freqs", "qwen2", "qwen3", "mistral", "gemma2",
                                                                    "phi3", "mixtral", "qwen3moe", "qwen2_yarn",
                                                                    "qwen2moe", "phi35", "phi35_short",
                                                                    "gpt_oss_plain"));

// gpt-oss with its experts in MXFP4, as its files ship them. llama.cpp
// multiplies MXFP4 by Q8_0-quantized activations, and so does llmrt (the
// same blocks: F16 scale, x · 127/max rounded to nearest even; forward.cpp).
// Where the two runtimes' F32 inputs to that rounding differ in their last
// bits, an 8-bit activation lands one step apart, and the random model
// carries the step on, to the later positions too through the K/V (an F64
// evaluation of the same file with the same rounding shows such jumps
// against llama.cpp as well). Measured: prompt 0 (96 tokens) within 1e-5 at
// every position; prompt 1 from position 4 on up to 2.2e-2. So here: every
// position within 5e-2 (the parts GptOssPartsEachMatter removes move the
// logits by 1 to 5), the greedy continuation identical, the perplexity
// within 0.5%. The architecture itself is held to 1e-3 at every position by
// gpt_oss_plain (the same model with F32 experts) above.
TEST(Families, GptOssMxfp4ExpertsMatchLlamaCpp) {
  const Reference ref = LoadReference("gpt_oss");
  ASSERT_FALSE(ref.prompts.empty());
  std::unique_ptr<Model> m = SynthesizeAndLoad("gpt_oss", ref.json);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->weights.layers[0].exp_up[0].type, TensorType::MXFP4);
  const int32_t V = m->config.n_vocab;
  auto b = CreateCpuBackend(m->config, m->weights, KvCacheSpec{kBlock, 64, kRefCtx}, 2);
  ASSERT_TRUE(b.ok()) << b.status().message();
  int32_t next_block = 0, positions = 0, outside = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p) {
    const std::vector<int32_t>& ids = ref.prompts[p];
    const std::vector<int32_t> table = Table(static_cast<int32_t>(ids.size()), &next_block, 64);
    const std::vector<float> got = PromptLogits(**b, ids, 7, V, table);
    for (size_t t = 0; t < ids.size(); ++t) {
      size_t at = 0;
      const double worst = WorstRel(got.data() + t * V, ref.logits[p].data() + t * V, V, &at);
      EXPECT_LE(worst, 5e-2) << "prompt " << p << " position " << t;
      ++positions;
      if (worst > kRelTol) {
        ++outside;
      }
    }
    if (p == 0) {
      const double want = ref.json.Find("perplexity")->Find("ppl")->as_double();
      EXPECT_NEAR(Perplexity(got, ids, V) / want, 1.0, kPplTol);
    }
  }
  std::printf("gpt_oss (MXFP4): %d of %d positions beyond 1e-3\n", outside, positions);
  const Json& g = *ref.json.Find("greedy");
  std::vector<llm_token> step = JsonInts(*g.Find("prompt_ids"));
  const std::vector<int32_t> want = JsonInts(*g.Find("ids"));
  const std::vector<int32_t> table = Table(static_cast<int32_t>(step.size() + want.size()), &next_block, 64);
  std::vector<float> logits(V);
  std::vector<int32_t> got;
  int32_t n_past = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t last = static_cast<int32_t>(step.size()) - 1;
    BatchSeq s{0, static_cast<int32_t>(step.size()), n_past, table};
    ASSERT_TRUE((*b)->Forward(Batch{step, std::span<const BatchSeq>(&s, 1), std::span<const int32_t>(&last, 1)},
                              logits.data())
                    .ok());
    n_past += static_cast<int32_t>(step.size());
    got.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    step = {got.back()};
  }
  EXPECT_EQ(got, want) << "gpt_oss (MXFP4): greedy continuation";
}

// gpt-oss's parts each move the logits far beyond the tolerance, so the
// family test above fails on a runtime that drops any of them: its
// attention sinks, its sliding windows, its top-k-then-softmax routing, its
// biases on the output projection, its YaRN on the local layers.
TEST(Families, GptOssPartsEachMatter) {
  const Reference ref = LoadReference("gpt_oss_plain");
  ASSERT_FALSE(ref.prompts.empty());
  std::unique_ptr<Model> m = SynthesizeAndLoad("gpt_oss_parts", ref.json);
  ASSERT_NE(m, nullptr);
  const int32_t V = m->config.n_vocab;
  struct Variant {
    const char* what;
    void (*change)(ModelConfig*);
  };
  const Variant variants[] = {
      {"no sinks", [](ModelConfig* c) { c->attn_sinks = false; }},
      {"no windows", [](ModelConfig* c) { c->sliding_window = 0; }},
      {"softmax over every expert", [](ModelConfig* c) { c->expert_softmax_topk = false; }},
      {"no output bias", [](ModelConfig* c) { c->out_bias = false; }},
      {"local layers without YaRN", [](ModelConfig* c) { c->swa_rope_global = false; }},
  };
  for (const Variant& v : variants) {
    ModelConfig c = m->config;
    v.change(&c);
    auto b = CreateCpuBackend(c, m->weights, KvCacheSpec{kBlock, 16, kRefCtx}, 1);
    ASSERT_TRUE(b.ok()) << b.status().message();
    int32_t next = 0;
    const std::vector<int32_t> table = Table(static_cast<int32_t>(ref.prompts[0].size()), &next, 16);
    const std::vector<float> got = PromptLogits(**b, ref.prompts[0], 32, V, table);
    size_t at = 0;
    const double worst = WorstRel(got.data(), ref.logits[0].data(), got.size(), &at);
    EXPECT_GT(worst, 20 * kRelTol) << v.what;
    std::printf("gpt_oss, %s: worst relative logit difference %.3g\n", v.what, worst);
  }
}

// The rope_freqs test can fail: llama.cpp's logits without the tensor are far
// outside the tolerance, and so are llmrt's (the file is read, not ignored).
TEST(Families, RopeFreqsMoveTheLogitsFarBeyondTheTolerance) {
  const Reference ref = LoadReference("llama3_rope_freqs");
  ASSERT_FALSE(ref.prompts.empty());
  const Json* without = ref.json.Find("without_rope_freqs");
  ASSERT_NE(without, nullptr);
  EXPECT_GT(without->Find("max_rel_logit_diff")->as_double(), 100 * kRelTol);

  std::unique_ptr<Model> m = SynthesizeAndLoad("llama3_rope_freqs_plain", ref.json, /*drop_rope_freqs=*/true);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->config.has_rope_freqs);
  const int32_t V = m->config.n_vocab;
  auto b = CreateCpuBackend(m->config, m->weights, KvCacheSpec{kBlock, 16}, 1);
  ASSERT_TRUE(b.ok()) << b.status().message();
  int32_t next = 0;
  const std::vector<int32_t> table = Table(static_cast<int32_t>(ref.prompts[0].size()), &next, 16);
  const std::vector<float> got = PromptLogits(**b, ref.prompts[0], 32, V, table);
  size_t at = 0;
  EXPECT_GT(WorstRel(got.data(), ref.logits[0].data(), got.size(), &at), 100 * kRelTol);
}

// Through the C API: the context runs the family (on the CPU under AUTO: the
// CUDA backend runs the Llama block only), its info names the architecture,
// and a greedy request of text runs to its length.
TEST(Families, RunThroughTheCApi) {
  // every family's file, and the general.architecture its info must report
  const std::pair<const char*, const char*> families[] = {
      {"llama3_rope_freqs", "llama"}, {"qwen2", "qwen2"},  {"qwen3", "qwen3"},       {"mistral", "llama"},
      {"gemma2", "gemma2"},           {"phi3", "phi3"},    {"mixtral", "llama"},     {"qwen3moe", "qwen3moe"},
      {"qwen2_yarn", "qwen2"},        {"qwen2moe", "qwen2moe"}, {"phi35", "phi3"}, {"phi35_short", "phi3"},
      {"gpt_oss", "gpt-oss"}, {"gpt_oss_plain", "gpt-oss"}};
  for (const auto& [name, arch] : families) {
    const Reference ref = LoadReference(name);
    ASSERT_FALSE(ref.prompts.empty());
    const std::string path = SynthesizeFile(std::string(name) + "_capi", ref.json);
    ASSERT_FALSE(path.empty());
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.n_threads = 1;
    p.n_ctx = 256;
    llm_ctx* ctx = nullptr;
    ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
    llm_model_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(llm_model_get_info(ctx, &info), LLM_OK);
    EXPECT_STREQ(info.arch, arch) << name;
    const SeqResult r = Generate(ctx, "The capital of France is", 16);
    EXPECT_EQ(r.status, LLM_OK) << r.message;
    EXPECT_EQ(r.tokens.size(), 16u);
    llm_ctx_destroy(ctx);
    std::remove(path.c_str());
  }
}

// ---- what the families' metadata and tensors turn into, and what is refused

StatusOr<ModelConfig> ConfigOf(const GgufWriter& w, std::string* keep) {
  *keep = w.Serialize();
  LLM_ASSIGN_OR_RETURN(auto f, GgufFile::FromMemory(keep->data(), keep->size()));
  return ModelConfig::FromGguf(*f);
}

GgufWriter FamilyKeys(const std::string& arch, uint32_t n_layer = 1) {
  GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddUint32(arch + ".context_length", 64).AddUint32(arch + ".embedding_length", 32);
  w.AddUint32(arch + ".block_count", n_layer).AddUint32(arch + ".feed_forward_length", 48);
  w.AddUint32(arch + ".attention.head_count", 4).AddUint32(arch + ".attention.head_count_kv", 2);
  w.AddUint32(arch + ".vocab_size", 100);
  return w;
}

TEST(FamilyConfig, QwenReadsAsTheLlamaBlockWithItsExtras) {
  std::string keep;
  GgufWriter w = FamilyKeys("qwen2");
  w.AddTensor("blk.0.attn_q.bias", TensorType::F32, {32});
  auto c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kQwen2);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm || c->post_norms);
  c = ConfigOf(FamilyKeys("qwen3").AddUint32("qwen3.attention.key_length", 16), &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kQwen3);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c->head_dim, 16);  // key_length, not 32 / 4
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias || c->post_norms);
  // An unknown RoPE scaling type is refused, never ignored.
  c = ConfigOf(FamilyKeys("qwen2").AddString("qwen2.rope.scaling.type", "longrope"), &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(c.status().message().find("longrope"), std::string::npos) << c.status().message();
  c = ConfigOf(FamilyKeys("deepseek2"), &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
}

// Gemma 2 without its optional keys takes llama.cpp's defaults.
TEST(FamilyConfig, Gemma2DefaultsAreLlamaCpps) {
  std::string keep;
  GgufWriter w = FamilyKeys("gemma2", 3);
  auto c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kGemma2);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->attn_logit_softcap, 50.0f);
  EXPECT_EQ(c->final_logit_softcap, 30.0f);
  EXPECT_TRUE(c->post_norms);
  EXPECT_FALSE(c->qk_norm || c->qkv_bias);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c->rope_theta_swa, c->rope_theta);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(c->IsLocalLayer(l), l % 2 == 0) << l;
  w.AddFloat32("gemma2.attn_logit_softcapping", 0.0f);  // 0: no cap, as in llama.cpp
  c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->attn_logit_softcap, 0.0f);
}

// Experts: read for llama and qwen3moe; gating other than softmax and
// shared experts refused.
TEST(FamilyConfig, ExpertsAndTheirRefusals) {
  std::string keep;
  auto c = ConfigOf(FamilyKeys("qwen3moe")
                        .AddUint32("qwen3moe.expert_count", 8)
                        .AddUint32("qwen3moe.expert_used_count", 2)
                        .AddUint32("qwen3moe.expert_feed_forward_length", 24),
                    &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->n_expert_used, 2);
  EXPECT_EQ(c->n_ff_exp, 24);
  EXPECT_TRUE(c->qk_norm);
  c = ConfigOf(FamilyKeys("llama").AddUint32("llama.expert_count", 8).AddUint32("llama.expert_used_count", 2), &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_ff_exp, 48);  // Mixtral: the FFN length
  c = ConfigOf(FamilyKeys("llama").AddUint32("llama.expert_count", 8).AddUint32("llama.expert_used_count", 9), &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_MODEL_FORMAT);
  c = ConfigOf(FamilyKeys("llama")
                   .AddUint32("llama.expert_count", 8)
                   .AddUint32("llama.expert_used_count", 2)
                   .AddUint32("llama.expert_gating_func", 2),
               &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
  c = ConfigOf(FamilyKeys("llama")
                   .AddUint32("llama.expert_count", 8)
                   .AddUint32("llama.expert_used_count", 2)
                   .AddUint32("llama.expert_shared_count", 1),
               &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ConfigOf(FamilyKeys("qwen3moe"), &keep).status().code(), LLM_ERR_MODEL_FORMAT);
  c = ConfigOf(FamilyKeys("qwen2moe")
                   .AddUint32("qwen2moe.expert_count", 8)
                   .AddUint32("qwen2moe.expert_used_count", 2)
                   .AddUint32("qwen2moe.expert_feed_forward_length", 24)
                   .AddUint32("qwen2moe.expert_shared_feed_forward_length", 40),
               &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->expert_weights_norm);
  EXPECT_EQ(c->n_ff_shexp, 40);
}

// gpt-oss's keys: its window is required, its pattern a period (2 unless
// the file says), its local layers' base the global one; experts required.
TEST(FamilyConfig, GptOssKeysAndTheirRefusals) {
  std::string keep;
  auto keys = [] {
    GgufWriter w = FamilyKeys("gpt-oss", 4);
    w.AddUint32("gpt-oss.expert_count", 8).AddUint32("gpt-oss.expert_used_count", 2);
    w.AddUint32("gpt-oss.expert_feed_forward_length", 24);
    return w;
  };
  auto c = ConfigOf(keys().AddUint32("gpt-oss.attention.sliding_window", 16), &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kGptOss);
  EXPECT_EQ(c->sliding_window, 16);
  EXPECT_EQ(c->swa_pattern, 2);
  EXPECT_TRUE(c->IsLocalLayer(0) && !c->IsLocalLayer(1));
  EXPECT_TRUE(c->attn_sinks && c->out_bias && c->expert_bias && c->expert_softmax_topk && c->swa_rope_global);
  EXPECT_FALSE(c->expert_weights_norm);
  EXPECT_EQ(c->n_ff_exp, 24);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c->ffn_act, FfnActivation::kSwigluOai);
  EXPECT_EQ(ConfigOf(keys(), &keep).status().code(), LLM_ERR_MODEL_FORMAT);  // no window
  c = ConfigOf(keys().AddUint32("gpt-oss.attention.sliding_window", 16).AddFloat32("gpt-oss.rope.freq_base_swa", 5.0f),
               &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
  GgufWriter no_experts = FamilyKeys("gpt-oss", 4);
  no_experts.AddUint32("gpt-oss.attention.sliding_window", 16);
  EXPECT_EQ(ConfigOf(no_experts, &keep).status().code(), LLM_ERR_MODEL_FORMAT);
}

// LongRoPE wants both factor tensors; its attention factor is read.
TEST(FamilyConfig, Phi3LongRope) {
  std::string keep;
  GgufWriter w = FamilyKeys("phi3");
  w.AddTensor("rope_factors_long.weight", TensorType::F32, {4});
  auto c = ConfigOf(w, &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(c.status().message().find("LongRoPE"), std::string::npos) << c.status().message();
  w.AddTensor("rope_factors_short.weight", TensorType::F32, {4});
  w.AddFloat32("phi3.rope.scaling.attn_factor", 1.25f);
  c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->has_longrope);
  EXPECT_FLOAT_EQ(c->rope_attn_factor, 1.25f);
  GgufWriter zero = FamilyKeys("phi3");
  zero.AddFloat32("phi3.rope.scaling.attn_factor", 0.0f);
  c = ConfigOf(zero, &keep);
  EXPECT_EQ(c.status().code(), LLM_ERR_MODEL_FORMAT) << c.status().message();
  EXPECT_NE(c.status().message().find("attn_factor"), std::string::npos) << c.status().message();
}

// The LongRoPE details each matter: the same model with the other factor set
// (a context within the original one) or without the attention factor is
// far outside the tolerance of llama.cpp's logits.
TEST(Families, LongRopeFactorsAndAttentionFactorMatter) {
  const Reference ref = LoadReference("phi35");
  ASSERT_FALSE(ref.prompts.empty());
  std::unique_ptr<Model> m = SynthesizeAndLoad("phi35_mutants", ref.json);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->config.has_longrope);
  EXPECT_EQ(RopeFactorsFor(m->config, m->weights, kRefCtx).data, m->weights.rope_factors_long.data);
  EXPECT_EQ(RopeFactorsFor(m->config, m->weights, 64).data, m->weights.rope_factors_short.data);
  EXPECT_EQ(RopeFactorsFor(m->config, m->weights, 0).data, m->weights.rope_factors_long.data);  // n_ctx_train 4096
  const int32_t V = m->config.n_vocab;
  ModelConfig no_attn = m->config;
  no_attn.rope_attn_factor = 1.0f;
  struct Variant { const ModelConfig* config; int32_t n_ctx; const char* what; };
  for (const Variant& v : {Variant{&m->config, 64, "short factors"}, Variant{&no_attn, kRefCtx, "attn_factor 1"}}) {
    auto b = CreateCpuBackend(*v.config, m->weights, KvCacheSpec{kBlock, 16, v.n_ctx}, 1);
    ASSERT_TRUE(b.ok()) << b.status().message();
    int32_t next = 0;
    const std::vector<int32_t> table = Table(static_cast<int32_t>(ref.prompts[0].size()), &next, 16);
    const std::vector<float> got = PromptLogits(**b, ref.prompts[0], 32, V, table);
    size_t at = 0;
    EXPECT_GT(WorstRel(got.data(), ref.logits[0].data(), got.size(), &at), 100 * kRelTol) << v.what;
  }
}

// LongRoPE factors in a file of another family (llama.cpp would apply them
// for `llama` too) are refused, not ignored.
TEST(FamilyConfig, LongRopeFactorsOutsidePhi3AreRefused) {
  GgufWriter w = MakeTinyLlama();
  std::string bytes = w.Serialize();
  auto f0 = GgufFile::FromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(f0.ok());
  auto c0 = ModelConfig::FromGguf(**f0);
  ASSERT_TRUE(c0.ok()) << c0.status().message();
  w.AddTensor("rope_factors_long.weight", TensorType::F32, {c0->rope_dim / 2});
  w.AddTensor("rope_factors_short.weight", TensorType::F32, {c0->rope_dim / 2});
  bytes = w.Serialize();
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->has_longrope);
  auto wt = ModelWeights::FromGguf(**f, *c);
  EXPECT_EQ(wt.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(wt.status().message().find("phi3"), std::string::npos) << wt.status().message();
}

// Bias tensors the backends would not apply are refused, not ignored.
TEST(FamilyConfig, BiasesOnSomeLayersOrUnreadBiasesAreRefused) {
  for (const char* extra : {"blk.1.attn_k.bias", "blk.0.attn_output.bias", "output.bias"}) {
    GgufWriter w = MakeTinyLlama();
    w.AddTensor(extra, TensorType::F32, {std::string(extra) == "output.bias" ? 288 : 32});
    const std::string bytes = w.Serialize();
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok());
    auto c = ModelConfig::FromGguf(**f);
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto wt = ModelWeights::FromGguf(**f, *c);
    EXPECT_FALSE(wt.ok()) << extra;
    EXPECT_NE(wt.status().message().find(extra), std::string::npos) << wt.status().message();
  }
}

}  // namespace
}  // namespace llm::test
