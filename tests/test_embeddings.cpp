// Embedding models against llama.cpp (issue 31): the encoder families' tiny
// synthesized models (llm-synth, F32; tiny-bert with sharp attention, its
// LayerNorms and biases far from 1 and 0, a non-zero token-type row) run on
// the CPU through the C API, compared with what llama.cpp gave for the same
// files (tests/data/embeddings/, written by tools/embed_reference.py through
// llama-cpp-python):
//   * every pooled value within 1e-3 relative (|a - b| <= 1e-3 max(|b|, 1))
//     of llama.cpp's raw output, for every pooling and each length, one
//     input per call and all of a pooling's inputs in one batched call;
//   * the L2-normalised vectors' cosine to llama.cpp's >= 0.9999;
//   * rank pooling (a cross-encoder's classifier head): the scores within
//     1e-3 and in the same order.
// Then what the API promises around them: results independent of the batch
// (bitwise), Matryoshka truncation, truncation of long inputs on request,
// and a clear status for every bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "gguf_stream_writer.h"
#include "synth_model.h"
#include "util/json.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;
constexpr double kMinCosine = 0.9999;

std::string Fnv1a64Hex(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct Case {
  std::string pooling;
  std::string text;  // non-empty: llama.cpp tokenized this text into `tokens`
  std::string query, document;  // a rerank pair (query non-empty): llama.cpp's layout of it is `tokens`
  std::vector<int32_t> tokens;
  int32_t rows = 0, dim = 0;
  std::vector<float> ref;  // (rows, dim)
};

struct Reference {
  Json json;
  std::vector<Case> cases;
};

Reference LoadReference(const std::string& name) {
  Reference r;
  r.json = LoadReferenceJson("embeddings/" + name);
  const std::string bin = ReadFile(DataDir() + "/embeddings/" + r.json.Find("vectors_file")->as_string());
  for (const Json& c : r.json.Find("cases")->array()) {
    Case k;
    k.pooling = c.Find("pooling")->as_string();
    if (const Json* t = c.Find("text")) k.text = t->as_string();
    if (const Json* q = c.Find("query")) k.query = q->as_string(), k.document = c.Find("document")->as_string();
    for (const Json& t : c.Find("tokens")->array()) k.tokens.push_back(static_cast<int32_t>(t.as_int()));
    k.rows = static_cast<int32_t>(c.Find("rows")->as_int());
    k.dim = static_cast<int32_t>(c.Find("dim")->as_int());
    const size_t off = static_cast<size_t>(c.Find("offset")->as_int()) * sizeof(float);
    k.ref.resize(static_cast<size_t>(k.rows) * k.dim);
    if (off + k.ref.size() * sizeof(float) > bin.size()) {
      ADD_FAILURE() << name << ": vectors file too short";
      return r;
    }
    std::memcpy(k.ref.data(), bin.data() + off, k.ref.size() * sizeof(float));
    r.cases.push_back(std::move(k));
  }
  return r;
}

// Rebuilds the model llama.cpp ran and checks it is byte for byte that file.
std::string SynthesizeFile(const std::string& name, const Json& ref, const std::string& shape_name = "",
                           const TensorType* type = nullptr) {
  const synth::SynthShape* shape = synth::FindSynthShape(shape_name.empty() ? ref.Find("shape")->as_string() : shape_name);
  if (shape == nullptr) {
    ADD_FAILURE() << "unknown shape";
    return "";
  }
  synth::SynthOptions o;
  std::unique_ptr<GgufFile> vocab;
  const std::vector<Json>& args = ref.Find("synth_args")->array();
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string k = args[i].as_string(), v = args[i + 1].as_string();
    if (k == "--type") {
      o.type = v == "f32" ? TensorType::F32 : v == "f16" ? TensorType::F16 : TensorType::BF16;
    } else if (k == "--seed") {
      o.seed = std::stoull(v);
    } else if (k == "--vocab-from") {  // a path below the repository root
      auto f = GgufFile::Open(RepoDir() + "/" + v);
      if (!f.ok()) {
        ADD_FAILURE() << v << ": " << f.status().message();
        return "";
      }
      vocab = std::move(*f);
      o.vocab = vocab.get();
    } else {
      ADD_FAILURE() << "unknown llm-synth argument " << k;
    }
  }
  if (type != nullptr) o.type = *type;
  const std::string path = ::testing::TempDir() + "/llmrt_embed_" + std::to_string(::getpid()) + "_" + name + ".gguf";
  Status st = synth::WriteSynthModel(*shape, o, path);
  if (!st.ok()) {
    ADD_FAILURE() << st.message();
    return "";
  }
  if (shape_name.empty()) {
    EXPECT_EQ(Fnv1a64Hex(ReadFile(path)), ref.Find("model_fnv1a64")->as_string())
        << name << ": llm-synth no longer writes the file llama.cpp ran (regenerate with tools/embed_reference.py)";
  }
  return path;
}

struct Ctx {
  llm_ctx* ctx = nullptr;
  ~Ctx() { llm_ctx_destroy(ctx); }
};

llm_status Open(const std::string& path, Ctx* c, int32_t n_ctx = 0, int32_t backend = LLM_BACKEND_CPU,
                int32_t kv_type = LLM_KV_AUTO) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.kv_type = kv_type;
  p.model_path = path.c_str();
  p.backend = backend;
  p.n_threads = 2;
  p.n_ctx = n_ctx;
  return llm_ctx_create(&p, &c->ctx);
}

int32_t PoolingOf(const std::string& s) {
  if (s == "none") return LLM_POOLING_NONE;
  if (s == "mean") return LLM_POOLING_MEAN;
  if (s == "cls") return LLM_POOLING_CLS;
  if (s == "last") return LLM_POOLING_LAST;
  return LLM_POOLING_RANK;
}

// llm_embed over token arrays: (n, *dim) floats, or empty with *status set.
std::vector<float> Embed(llm_ctx* ctx, const std::vector<std::vector<int32_t>>& inputs, int32_t pooling,
                         int32_t normalize, int32_t* dim, llm_status* status, int32_t dimensions = 0,
                         int32_t truncate = 0) {
  std::vector<const llm_token*> ptrs;
  std::vector<int32_t> lens;
  for (const auto& in : inputs) ptrs.push_back(in.data()), lens.push_back(static_cast<int32_t>(in.size()));
  llm_embed_params p;
  llm_embed_params_init(&p);
  p.pooling = pooling;
  p.normalize = normalize;
  p.dimensions = dimensions;
  p.truncate = truncate;
  *status = llm_embed(ctx, nullptr, ptrs.data(), lens.data(), static_cast<int32_t>(inputs.size()), &p, nullptr, 0, dim);
  if (*status != LLM_ERR_BUFFER_TOO_SMALL) return {};
  std::vector<float> out(inputs.size() * static_cast<size_t>(*dim));
  *status = llm_embed(ctx, nullptr, ptrs.data(), lens.data(), static_cast<int32_t>(inputs.size()), &p, out.data(),
                      out.size(), dim);
  if (*status != LLM_OK) out.clear();
  return out;
}

// One EMBED request through llm_submit / llm_poll: the final event's rows.
std::vector<float> SubmitEmbed(llm_ctx* ctx, const std::vector<int32_t>& tokens, int32_t pooling, int32_t normalize,
                               int32_t* rows, int32_t* dim, llm_status* status) {
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = tokens.data();
  r.n_prompt_tokens = static_cast<int32_t>(tokens.size());
  r.task = LLM_TASK_EMBED;
  r.pooling = pooling;
  r.normalize = normalize;
  llm_request_id id = 0;
  *status = llm_submit(ctx, &r, &id);
  if (*status != LLM_OK) return {};
  std::vector<llm_event> evs(8);
  for (int tries = 0; tries < 600; ++tries) {
    evs[0].struct_size = sizeof(llm_event);
    uint32_t n = 0;
    EXPECT_EQ(llm_poll(ctx, evs.data(), static_cast<uint32_t>(evs.size()), &n, 100), LLM_OK);
    for (uint32_t i = 0; i < n; ++i) {
      if (evs[i].request_id != id) continue;
      EXPECT_EQ(evs[i].type, LLM_EVENT_FINAL);
      *status = evs[i].status;
      *rows = evs[i].n_embedding_rows;
      *dim = evs[i].n_embedding;
      if (evs[i].embedding == nullptr) return {};
      return std::vector<float>(evs[i].embedding, evs[i].embedding + static_cast<size_t>(*rows) * *dim);
    }
  }
  ADD_FAILURE() << "no final event";
  *status = LLM_ERR_INTERNAL;
  return {};
}

// Worst |a - b| / max(|b|, 1) over the values.
double MaxRelErr(const float* a, const float* b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::abs(double{a[i]} - b[i]) / std::max(std::abs(double{b[i]}), 1.0));
  return worst;
}

double Cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) ab += double{a[i]} * b[i], aa += double{a[i]} * a[i], bb += double{b[i]} * b[i];
  return ab / std::sqrt(aa * bb);
}

class EmbedReference : public ::testing::TestWithParam<const char*> {};

TEST_P(EmbedReference, MatchesLlamaCpp) {
  const std::string name = GetParam();
  Reference ref = LoadReference(name);
  ASSERT_FALSE(ref.cases.empty());
  const std::string path = SynthesizeFile(name, ref.json);
  ASSERT_FALSE(path.empty());
  // A decoder's reference ran with an F32 KV cache (tools/embed_reference.py): so does llmrt.
  const Json* kv = ref.json.Find("kv_type");
  Ctx c;
  ASSERT_EQ(Open(path, &c, 0, LLM_BACKEND_CPU, kv != nullptr && kv->as_string() == "f32" ? LLM_KV_F32 : LLM_KV_AUTO),
            LLM_OK)
      << llm_last_error();
  std::remove(path.c_str());

  double worst_alone = 0, worst_batched = 0, min_cos = 1;
  std::vector<std::string> poolings;
  for (const Case& k : ref.cases)
    if (std::find(poolings.begin(), poolings.end(), k.pooling) == poolings.end()) poolings.push_back(k.pooling);
  for (const std::string& pooling : poolings) {
    std::vector<const Case*> cases;
    for (const Case& k : ref.cases)
      if (k.pooling == pooling) cases.push_back(&k);
    const int32_t pool = PoolingOf(pooling);
    std::vector<std::vector<float>> alone;
    for (const Case* k : cases) {
      SCOPED_TRACE(name + " " + pooling + " n=" + std::to_string(k->tokens.size()));
      int32_t rows = 1, dim = 0;
      llm_status st;
      std::vector<float> v = pool == LLM_POOLING_NONE ? SubmitEmbed(c.ctx, k->tokens, pool, 0, &rows, &dim, &st)
                                                      : Embed(c.ctx, {k->tokens}, pool, 0, &dim, &st);
      ASSERT_EQ(st, LLM_OK) << llm_last_error();
      ASSERT_EQ(rows, k->rows);
      ASSERT_EQ(dim, k->dim);
      const double err = MaxRelErr(v.data(), k->ref.data(), v.size());
      EXPECT_LE(err, kRelTol);
      worst_alone = std::max(worst_alone, err);
      if (pool != LLM_POOLING_RANK) {
        for (int32_t r = 0; r < rows; ++r) {
          const double cs = Cosine(v.data() + r * dim, k->ref.data() + r * dim, dim);
          EXPECT_GE(cs, kMinCosine);
          min_cos = std::min(min_cos, cs);
        }
      }
      if (pool != LLM_POOLING_NONE && pool != LLM_POOLING_RANK) {
        // the normalised vector: llama.cpp's, normalised, within the same cosine
        std::vector<float> n = Embed(c.ctx, {k->tokens}, pool, 1, &dim, &st);
        ASSERT_EQ(st, LLM_OK);
        double norm = 0;
        for (float x : n) norm += double{x} * x;
        EXPECT_NEAR(norm, 1.0, 1e-5);
        EXPECT_GE(Cosine(n.data(), k->ref.data(), dim), kMinCosine);
      }
      alone.push_back(std::move(v));
    }
    if (pool == LLM_POOLING_NONE) continue;
    // all of this pooling's inputs in one batched call: the same values, bitwise
    std::vector<std::vector<int32_t>> inputs;
    for (const Case* k : cases) inputs.push_back(k->tokens);
    int32_t dim = 0;
    llm_status st;
    std::vector<float> batch = Embed(c.ctx, inputs, pool, 0, &dim, &st);
    ASSERT_EQ(st, LLM_OK) << llm_last_error();
    for (size_t i = 0; i < cases.size(); ++i) {
      worst_batched = std::max(worst_batched, MaxRelErr(batch.data() + i * dim, cases[i]->ref.data(), dim));
      EXPECT_EQ(std::memcmp(batch.data() + i * dim, alone[i].data(), dim * sizeof(float)), 0)
          << pooling << " input " << i << " differs batched";
    }
    if (pool == LLM_POOLING_RANK) {  // the scores in llama.cpp's order
      std::vector<size_t> ours(cases.size()), theirs(cases.size());
      for (size_t i = 0; i < cases.size(); ++i) ours[i] = theirs[i] = i;
      std::sort(ours.begin(), ours.end(), [&](size_t a, size_t b) { return batch[a * dim] > batch[b * dim]; });
      std::sort(theirs.begin(), theirs.end(), [&](size_t a, size_t b) { return cases[a]->ref[0] > cases[b]->ref[0]; });
      EXPECT_EQ(ours, theirs);
    }
  }
  // Text: llmrt's WordPiece gives llama.cpp's ids, and the text's vector is theirs.
  for (const Case& k : ref.cases) {
    if (k.text.empty()) continue;
    SCOPED_TRACE("text \"" + k.text + "\"");
    std::vector<llm_token> ids(k.text.size() + 8);
    int32_t n = 0;
    ASSERT_EQ(llm_tokenize(c.ctx, k.text.data(), k.text.size(), LLM_TOKENIZE_ADD_SPECIAL, ids.data(),
                           static_cast<int32_t>(ids.size()), &n),
              LLM_OK)
        << llm_last_error();
    ids.resize(static_cast<size_t>(n));
    EXPECT_EQ(ids, k.tokens);
    llm_embed_params p;
    llm_embed_params_init(&p);
    p.pooling = PoolingOf(k.pooling);
    p.normalize = 0;
    const char* text = k.text.c_str();
    std::vector<float> v(static_cast<size_t>(k.dim));
    int32_t dim = 0;
    ASSERT_EQ(llm_embed(c.ctx, &text, nullptr, nullptr, 1, &p, v.data(), v.size(), &dim), LLM_OK) << llm_last_error();
    const double err = MaxRelErr(v.data(), k.ref.data(), v.size());
    EXPECT_LE(err, kRelTol);
    worst_alone = std::max(worst_alone, err);
  }
  // Rerank pairs: llm_rerank_tokenize lays them out as llama.cpp's server
  // does, and their scores match, in the same order.
  std::vector<float> ours, theirs;
  for (const Case& k : ref.cases) {
    if (k.query.empty()) continue;
    SCOPED_TRACE("pair \"" + k.query + "\" / \"" + k.document + "\"");
    std::vector<llm_token> ids(4096);
    int32_t n = 0;
    ASSERT_EQ(llm_rerank_tokenize(c.ctx, k.query.c_str(), k.document.c_str(), ids.data(),
                                  static_cast<int32_t>(ids.size()), &n),
              LLM_OK)
        << llm_last_error();
    ids.resize(static_cast<size_t>(n));
    EXPECT_EQ(ids, k.tokens);
    llm_status st;
    int32_t dim = 0;
    std::vector<float> v = Embed(c.ctx, {ids}, LLM_POOLING_RANK, 0, &dim, &st);
    ASSERT_EQ(st, LLM_OK) << llm_last_error();
    const double err = MaxRelErr(v.data(), k.ref.data(), v.size());
    EXPECT_LE(err, kRelTol);
    worst_alone = std::max(worst_alone, err);
    ours.push_back(v[0]);
    theirs.push_back(k.ref[0]);
  }
  for (size_t i = 0; i < ours.size(); ++i)
    for (size_t j = 0; j < ours.size(); ++j)
      if (theirs[i] > theirs[j]) {
        EXPECT_GT(ours[i], ours[j]) << "pairs " << i << ", " << j << " in another order";
      }
  EXPECT_LE(worst_batched, kRelTol);
  std::printf("%s: max rel err %.3g alone, %.3g batched; min cosine %.8f (%zu cases)\n", name.c_str(), worst_alone,
              worst_batched, min_cos, ref.cases.size());
  RecordProperty("max_rel_err", std::to_string(worst_alone));
  RecordProperty("min_cosine", std::to_string(min_cos));
}

// bert (BGE / E5 / MiniLM, WordPiece) and its cross-encoder; nomic-bert
// (nomic-embed-text: RoPE, SwiGLU); XLM-RoBERTa (BGE-M3 / multilingual-E5:
// Unigram with the charsmap) and its cross-encoder (BGE-reranker-v2-m3).
INSTANTIATE_TEST_SUITE_P(Encoders, EmbedReference,
                         ::testing::Values("bert", "bert_rerank", "nomic_bert", "xlmr", "xlmr_rerank"));
// Causal decoders as embedding models: Qwen3-Embedding (last-token pooling,
// instruction-prefixed query text) and Qwen3-Reranker (rank: softmax over
// the [yes, no] head at the last token).
INSTANTIATE_TEST_SUITE_P(Decoders, EmbedReference, ::testing::Values("qwen3_embed", "qwen3_rerank"));
// A bidirectional decoder: EmbeddingGemma (`gemma-embedding`: Gemma 3's
// block with no causal mask, local layers in a symmetric window, mean
// pooling, then the dense_2 / dense_3 projections).
INSTANTIATE_TEST_SUITE_P(Bidirectional, EmbedReference, ::testing::Values("gemma_embed"));

// ------------------------------------------------------------ the API around it

class BertApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = LoadReference("bert");
    ASSERT_FALSE(ref_.cases.empty());
    path_ = SynthesizeFile("bert_api", ref_.json, "tiny-bert");
    ASSERT_FALSE(path_.empty());
    ASSERT_EQ(Open(path_, &c_, 128), LLM_OK) << llm_last_error();
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::vector<int32_t> Tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t = {2};
    while (static_cast<int>(t.size()) < n) t.push_back(5 + static_cast<int32_t>(rng() % 295));
    return t;
  }

  Reference ref_;
  std::string path_;
  Ctx c_;
};

// A text's vector is the same alone and in a batch of 64 of mixed lengths.
TEST_F(BertApi, BatchCompositionDoesNotMatter) {
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(5);
  for (int i = 0; i < 64; ++i) inputs.push_back(Tokens(1 + static_cast<int>(rng() % 128), 100 + i));
  int32_t dim = 0;
  llm_status st;
  std::vector<float> batch = Embed(c_.ctx, inputs, LLM_POOLING_MEAN, 1, &dim, &st);
  ASSERT_EQ(st, LLM_OK) << llm_last_error();
  for (size_t i = 0; i < inputs.size(); i += 7) {
    std::vector<float> one = Embed(c_.ctx, {inputs[i]}, LLM_POOLING_MEAN, 1, &dim, &st);
    ASSERT_EQ(st, LLM_OK);
    EXPECT_EQ(std::memcmp(one.data(), batch.data() + i * dim, dim * sizeof(float)), 0) << "input " << i;
  }
}

TEST_F(BertApi, MatryoshkaDimensions) {
  const std::vector<int32_t> t = Tokens(20, 1);
  int32_t dim = 0;
  llm_status st;
  std::vector<float> raw = Embed(c_.ctx, {t}, LLM_POOLING_MEAN, 0, &dim, &st);
  ASSERT_EQ(st, LLM_OK);
  ASSERT_EQ(dim, 64);
  std::vector<float> cut = Embed(c_.ctx, {t}, LLM_POOLING_MEAN, 1, &dim, &st, 16);
  ASSERT_EQ(st, LLM_OK);
  ASSERT_EQ(dim, 16);
  double norm = 0;
  for (int i = 0; i < 16; ++i) norm += double{raw[i]} * raw[i];
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(cut[i], raw[i] / std::sqrt(norm), 1e-6);
  Embed(c_.ctx, {t}, LLM_POOLING_MEAN, 1, &dim, &st, 65);
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("dimensions"), std::string::npos) << llm_last_error();
}

TEST_F(BertApi, LongInputsRefusedOrTruncatedOnRequest) {
  const std::vector<int32_t> t = Tokens(200, 2);  // the context is 128
  int32_t dim = 0;
  llm_status st;
  Embed(c_.ctx, {t}, LLM_POOLING_MEAN, 1, &dim, &st);
  EXPECT_EQ(st, LLM_ERR_CONTEXT_OVERFLOW) << llm_last_error();
  std::vector<float> cut = Embed(c_.ctx, {t}, LLM_POOLING_MEAN, 1, &dim, &st, 0, 1);
  ASSERT_EQ(st, LLM_OK) << llm_last_error();
  std::vector<float> first = Embed(c_.ctx, {std::vector<int32_t>(t.begin(), t.begin() + 128)}, LLM_POOLING_MEAN, 1,
                                   &dim, &st);
  ASSERT_EQ(st, LLM_OK);
  EXPECT_EQ(cut, first);
  // 100k tokens: refused at once, nothing runs
  Embed(c_.ctx, {std::vector<int32_t>(100000, 7)}, LLM_POOLING_MEAN, 1, &dim, &st);
  EXPECT_EQ(st, LLM_ERR_CONTEXT_OVERFLOW);
}

TEST_F(BertApi, BadInputsGetClearStatuses) {
  int32_t dim = 0;
  llm_status st;
  {  // an empty token array (a real pointer, no tokens)
    const llm_token none[1] = {0};
    const llm_token* np = none;
    const int32_t zero = 0;
    float o[64];
    EXPECT_EQ(llm_embed(c_.ctx, nullptr, &np, &zero, 1, nullptr, o, 64, &dim), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(llm_last_error()).find("no tokens"), std::string::npos) << llm_last_error();
  }
  Embed(c_.ctx, {{2, 400}}, LLM_POOLING_MEAN, 1, &dim, &st);  // id outside the vocabulary
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  Embed(c_.ctx, {{2, 7}}, LLM_POOLING_RANK, 1, &dim, &st);  // no classifier head
  EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);
  Embed(c_.ctx, {{2, 7}}, LLM_POOLING_NONE, 1, &dim, &st);  // per-token rows need llm_submit
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  Embed(c_.ctx, {{2, 7}}, 9, 1, &dim, &st);
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  // out too small: the row length is reported, nothing runs
  const llm_token t[2] = {2, 7};
  const llm_token* tp = t;
  const int32_t n = 2;
  float out[4];
  EXPECT_EQ(llm_embed(c_.ctx, nullptr, &tp, &n, 1, nullptr, out, 4, &dim), LLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(dim, 64);
  EXPECT_EQ(llm_embed(c_.ctx, nullptr, nullptr, nullptr, 1, nullptr, out, 4, &dim), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_embed(c_.ctx, nullptr, &tp, &n, 0, nullptr, out, 4, &dim), LLM_ERR_INVALID_ARGUMENT);
  // text: empty is refused, invalid UTF-8 too
  const char* empty = "";
  EXPECT_EQ(llm_embed(c_.ctx, &empty, nullptr, nullptr, 1, nullptr, out, 4, &dim), LLM_ERR_INVALID_ARGUMENT);
  const char* bad_utf8 = "w57 \xC3\x28";
  float row[64];
  EXPECT_EQ(llm_embed(c_.ctx, &bad_utf8, nullptr, nullptr, 1, nullptr, row, 64, &dim), LLM_ERR_INVALID_UTF8);
  // generation on an embedding model
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = t;
  r.n_prompt_tokens = 2;
  llm_request_id id;
  EXPECT_EQ(llm_submit(c_.ctx, &r, &id), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("embedding model"), std::string::npos) << llm_last_error();
  r.task = 7;
  EXPECT_EQ(llm_submit(c_.ctx, &r, &id), LLM_ERR_INVALID_ARGUMENT);
}

// A cross-encoder's pair (no rerank template): [CLS] q [SEP] [SEP] d [SEP];
// bad arguments get their statuses.
TEST_F(BertApi, RerankTokenizeLayoutAndBadInput) {
  std::vector<llm_token> ids(64);
  int32_t n = 0;
  ASSERT_EQ(llm_rerank_tokenize(c_.ctx, "w57", "w99 w12", ids.data(), 64, &n), LLM_OK) << llm_last_error();
  ids.resize(static_cast<size_t>(n));
  std::vector<llm_token> q(8), d(8);
  int32_t nq = 0, nd = 0;
  ASSERT_EQ(llm_tokenize(c_.ctx, "w57", 3, 0, q.data(), 8, &nq), LLM_OK);
  ASSERT_EQ(llm_tokenize(c_.ctx, "w99 w12", 7, 0, d.data(), 8, &nd), LLM_OK);
  std::vector<llm_token> want = {2};
  want.insert(want.end(), q.begin(), q.begin() + nq);
  want.insert(want.end(), {3, 3});
  want.insert(want.end(), d.begin(), d.begin() + nd);
  want.push_back(3);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, "w57", "w99 w12", ids.data(), 2, &n), LLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, static_cast<int32_t>(want.size()));
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, nullptr, "x", ids.data(), 2, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, "x", nullptr, ids.data(), 2, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, "x", "y", nullptr, 2, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, "x", "y", ids.data(), -1, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_rerank_tokenize(c_.ctx, "x", "w57 \xC3\x28", ids.data(), 2, &n), LLM_ERR_INVALID_UTF8);
}

// EMBED requests through submit / poll: many in flight, cancellable.
TEST_F(BertApi, SubmitPollAndCancel) {
  std::vector<std::vector<int32_t>> inputs;
  std::vector<llm_request_id> ids;
  for (int i = 0; i < 40; ++i) {
    inputs.push_back(Tokens(100, 300 + i));
    llm_request r;
    llm_request_init(&r);
    r.prompt_tokens = inputs.back().data();
    r.n_prompt_tokens = 100;
    r.task = LLM_TASK_EMBED;
    r.pooling = LLM_POOLING_CLS;
    llm_request_id id;
    ASSERT_EQ(llm_submit(c_.ctx, &r, &id), LLM_OK) << llm_last_error();
    ids.push_back(id);
  }
  const llm_status cancel = llm_cancel(c_.ctx, ids.back());  // may already be done
  EXPECT_TRUE(cancel == LLM_OK || cancel == LLM_ERR_NOT_FOUND);
  int finals = 0, cancelled = 0;
  std::vector<llm_event> evs(16);
  for (int tries = 0; tries < 600 && finals < 40; ++tries) {
    evs[0].struct_size = sizeof(llm_event);
    uint32_t n = 0;
    ASSERT_EQ(llm_poll(c_.ctx, evs.data(), 16, &n, 100), LLM_OK);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(evs[i].type, LLM_EVENT_FINAL);
      ++finals;
      if (evs[i].finish_reason == LLM_FINISH_CANCELLED) {
        ++cancelled;
        EXPECT_EQ(evs[i].embedding, nullptr);
        continue;
      }
      ASSERT_EQ(evs[i].status, LLM_OK);
      ASSERT_NE(evs[i].embedding, nullptr);
      EXPECT_EQ(evs[i].n_embedding, 64);
      EXPECT_EQ(evs[i].n_embedding_rows, 1);
      EXPECT_EQ(evs[i].metrics.prompt_tokens, 100);
    }
  }
  EXPECT_EQ(finals, 40);
  EXPECT_LE(cancelled, 1);
  // an older caller's llm_event (before 0.4) gets no embedding fields written
}

// A decoder embedding model (Qwen3-Embedding): vectors independent of the
// batch (bitwise; 64 inputs of mixed lengths, several engine steps), and the
// model still generates; CUDA refuses it with a message (AUTO: the CPU).
// The other encoder blocks (nomic-bert's RoPE and SwiGLU, XLM-R's
// vocabulary and one token type): a vector is bitwise the same alone and
// in a batch of 64 inputs of mixed lengths, for the file's pooling and mean.
class EncoderBatch : public ::testing::TestWithParam<const char*> {};

TEST_P(EncoderBatch, CompositionDoesNotMatter) {
  const std::string name = GetParam();
  Reference ref = LoadReference(name);
  ASSERT_FALSE(ref.cases.empty());
  const std::string path = SynthesizeFile(name + "_batch", ref.json);
  ASSERT_FALSE(path.empty());
  Ctx c;
  ASSERT_EQ(Open(path, &c, 128), LLM_OK) << llm_last_error();
  std::remove(path.c_str());
  llm_model_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(llm_model_get_info(c.ctx, &info), LLM_OK);
  const int32_t n_vocab = info.n_vocab;
  ASSERT_GT(n_vocab, 5);
  const int32_t first = ref.cases[1].tokens.front();  // [CLS] / <s> of a 2-token case
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(11);
  for (int i = 0; i < 64; ++i) {
    std::vector<int32_t> t = {first};
    const int n = 1 + static_cast<int>(rng() % 128);
    while (static_cast<int>(t.size()) < n) t.push_back(5 + static_cast<int32_t>(rng() % (n_vocab - 5)));
    inputs.push_back(std::move(t));
  }
  for (int32_t pool : {LLM_POOLING_MODEL, LLM_POOLING_MEAN}) {
    int32_t dim = 0;
    llm_status st;
    std::vector<float> batch = Embed(c.ctx, inputs, pool, 1, &dim, &st);
    ASSERT_EQ(st, LLM_OK) << llm_last_error();
    for (size_t i = 0; i < inputs.size(); i += 7) {
      std::vector<float> one = Embed(c.ctx, {inputs[i]}, pool, 1, &dim, &st);
      ASSERT_EQ(st, LLM_OK);
      EXPECT_EQ(std::memcmp(one.data(), batch.data() + i * dim, dim * sizeof(float)), 0) << "input " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderBatch, ::testing::Values("nomic_bert", "xlmr", "xlmr_rerank"));

// A nomic-bert file llmrt cannot run exactly as llama.cpp would is refused
// with a message, never run with a tensor ignored: a tiny file (8 wide, one
// layer) written here, whole and then with one thing changed.
llm_status OpenNomic(const std::string& variant, std::string* message) {
  synth::GgufStreamWriter w;
  const std::string a = "nomic-bert.";
  w.AddString("general.architecture", "nomic-bert");
  w.AddUint32(a + "context_length", 64);
  w.AddUint32(a + "embedding_length", 8);
  w.AddUint32(a + "block_count", 1);
  w.AddUint32(a + "feed_forward_length", 16);
  w.AddUint32(a + "attention.head_count", 2);
  w.AddFloat32(a + "attention.layer_norm_epsilon", 1e-12f);
  w.AddBool(a + "attention.causal", false);
  w.AddUint32(a + "pooling_type", 1);
  w.AddFloat32(a + "rope.freq_base", 1000.0f);
  if (variant == "rope-scaling") {
    w.AddString(a + "rope.scaling.type", "linear");
    w.AddFloat32(a + "rope.scaling.factor", 2.0f);
  }
  const std::vector<std::string_view> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81" "a", "a"};
  w.AddString("tokenizer.ggml.model", "bert");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", {3, 2, 3, 3, 1, 1});
  w.AddUint32("tokenizer.ggml.token_type_count", 2);
  w.AddUint32("tokenizer.ggml.unknown_token_id", 1);
  w.AddUint32("tokenizer.ggml.cls_token_id", 2);
  w.AddUint32("tokenizer.ggml.seperator_token_id", 3);
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {
      {"token_embd.weight", {8, 6}}, {"token_types.weight", {8, 2}},
      {"token_embd_norm.weight", {8}}, {"token_embd_norm.bias", {8}},
      {"blk.0.attn_output.weight", {8, 8}}, {"blk.0.attn_output_norm.weight", {8}},
      {"blk.0.attn_output_norm.bias", {8}}, {"blk.0.ffn_up.weight", {8, 16}},
      {"blk.0.ffn_down.weight", {16, 8}}, {"blk.0.layer_output_norm.weight", {8}},
      {"blk.0.layer_output_norm.bias", {8}}};
  if (variant == "split-qkv") {
    for (const char* n : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) t.push_back({n, {8, 8}});
  } else {
    t.push_back({"blk.0.attn_qkv.weight", {8, 24}});
  }
  if (variant != "no-gate") t.push_back({"blk.0.ffn_gate.weight", {8, 16}});
  if (variant == "ffn-bias") t.push_back({"blk.0.ffn_up.bias", {16}});
  uint64_t bytes = 0;
  for (const auto& [name, dims] : t) bytes += w.AddTensor(name, TensorType::F32, dims);
  const std::string path = ::testing::TempDir() + "/llmrt_nomic_" + std::to_string(::getpid()) + "_" + variant + ".gguf";
  const std::vector<float> ones(bytes / sizeof(float), 1.0f);
  if (!w.Begin(path).ok() || !w.Write(ones.data(), bytes).ok() || !w.Finish().ok()) return LLM_ERR_IO;
  Ctx c;
  const llm_status st = Open(path, &c);
  *message = st == LLM_OK ? "" : llm_last_error();
  std::remove(path.c_str());
  return st;
}

TEST(NomicBertFile, RefusesWhatItCannotRunExactly) {
  std::string msg;
  ASSERT_EQ(OpenNomic("whole", &msg), LLM_OK) << msg;  // the file itself is fine
  EXPECT_EQ(OpenNomic("split-qkv", &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("fused attn_qkv"), std::string::npos) << msg;
  EXPECT_EQ(OpenNomic("ffn-bias", &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("blk.0.ffn_up.bias"), std::string::npos) << msg;
  EXPECT_EQ(OpenNomic("rope-scaling", &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("RoPE scaling"), std::string::npos) << msg;
  EXPECT_EQ(OpenNomic("no-gate", &msg), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(msg.find("blk.0.ffn_gate.weight"), std::string::npos) << msg;
}

TEST(DecoderEmbed, BatchCompositionDoesNotMatterAndItStillGenerates) {
  Reference ref = LoadReference("qwen3_embed");
  ASSERT_FALSE(ref.cases.empty());
  const std::string path = SynthesizeFile("qwen3_api", ref.json, "tiny-qwen3-embed");
  ASSERT_FALSE(path.empty());
  Ctx c;
  ASSERT_EQ(Open(path, &c, 256), LLM_OK) << llm_last_error();
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(9);
  for (int i = 0; i < 64; ++i) {
    std::vector<int32_t> t(1 + rng() % 200);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 297);
    t.back() = 297;  // <|endoftext|>
    inputs.push_back(std::move(t));
  }
  int32_t dim = 0;
  llm_status st;
  for (int32_t pool : {LLM_POOLING_LAST, LLM_POOLING_MEAN}) {
    std::vector<float> batch = Embed(c.ctx, inputs, pool, 1, &dim, &st);
    ASSERT_EQ(st, LLM_OK) << llm_last_error();
    ASSERT_EQ(dim, 64);
    for (size_t i = 0; i < inputs.size(); i += 5) {
      std::vector<float> one = Embed(c.ctx, {inputs[i]}, pool, 1, &dim, &st);
      ASSERT_EQ(st, LLM_OK);
      EXPECT_EQ(std::memcmp(one.data(), batch.data() + i * dim, dim * sizeof(float)), 0) << "input " << i;
    }
  }
  // the model's own pooling (last) is the default; no rank head
  std::vector<float> deflt = Embed(c.ctx, {inputs[0]}, LLM_POOLING_MODEL, 0, &dim, &st);
  std::vector<float> last = Embed(c.ctx, {inputs[0]}, LLM_POOLING_LAST, 0, &dim, &st);
  EXPECT_EQ(deflt, last);
  Embed(c.ctx, {inputs[0]}, LLM_POOLING_RANK, 0, &dim, &st);
  EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);
  Embed(c.ctx, {std::vector<int32_t>(300, 7)}, LLM_POOLING_LAST, 0, &dim, &st);  // longer than n_ctx 256
  EXPECT_EQ(st, LLM_ERR_CONTEXT_OVERFLOW);
  // generation on the same context
  const SeqResult gen = Generate(c.ctx, "the cat", 4);
  EXPECT_EQ(gen.status, LLM_OK) << gen.message;
  EXPECT_EQ(gen.n_final, 1);
  EXPECT_FALSE(gen.tokens.empty());
  Ctx cuda;
  EXPECT_EQ(Open(path, &cuda, 256, LLM_BACKEND_CUDA), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("CUDA"), std::string::npos) << llm_last_error();
  Ctx autoc;  // AUTO runs it on the CPU
  EXPECT_EQ(Open(path, &autoc, 256, LLM_BACKEND_AUTO), LLM_OK) << llm_last_error();
  std::remove(path.c_str());
}

// The same with F16 weights, whose embedding-step GEMMs take the AMX tiles
// where the CPU has them (src/backend/cpu/embed_matmul_amx.h), else the
// AVX-512 panels: a vector is bitwise the same alone and in the batch.
TEST(DecoderEmbed, F16BatchCompositionDoesNotMatter) {
  Reference ref = LoadReference("qwen3_embed");
  ASSERT_FALSE(ref.cases.empty());
  const TensorType f16 = TensorType::F16;
  const std::string path = SynthesizeFile("qwen3_f16", ref.json, "tiny-qwen3-embed", &f16);
  ASSERT_FALSE(path.empty());
  Ctx c;
  ASSERT_EQ(Open(path, &c, 256), LLM_OK) << llm_last_error();
  std::remove(path.c_str());
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(13);
  for (int i = 0; i < 64; ++i) {
    std::vector<int32_t> t(1 + rng() % 200);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 297);
    t.back() = 297;  // <|endoftext|>
    inputs.push_back(std::move(t));
  }
  int32_t dim = 0;
  llm_status st;
  std::vector<float> batch = Embed(c.ctx, inputs, LLM_POOLING_LAST, 1, &dim, &st);
  ASSERT_EQ(st, LLM_OK) << llm_last_error();
  ASSERT_EQ(dim, 64);
  for (size_t i = 0; i < inputs.size(); i += 5) {
    std::vector<float> one = Embed(c.ctx, {inputs[i]}, LLM_POOLING_LAST, 1, &dim, &st);
    ASSERT_EQ(st, LLM_OK);
    EXPECT_EQ(std::memcmp(one.data(), batch.data() + i * dim, dim * sizeof(float)), 0) << "input " << i;
  }
}

// EmbeddingGemma: a text's vector is bitwise the same alone and among 64
// inputs of mixed lengths (its tokens see every token of their own
// sequence, none of another's); the file's pooling (mean) is the default;
// it cannot generate (nothing causal to sample from).
TEST(DecoderEmbed, BidirectionalBatchCompositionDoesNotMatterAndItCannotGenerate) {
  Reference ref = LoadReference("gemma_embed");
  ASSERT_FALSE(ref.cases.empty());
  const std::string path = SynthesizeFile("gemma_api", ref.json, "tiny-gemma-embed");
  ASSERT_FALSE(path.empty());
  Ctx c;
  ASSERT_EQ(Open(path, &c, 256), LLM_OK) << llm_last_error();
  std::remove(path.c_str());
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(11);
  for (int i = 0; i < 64; ++i) {
    std::vector<int32_t> t(1 + rng() % 200);
    for (int32_t& x : t) x = static_cast<int32_t>(3 + rng() % 297);
    inputs.push_back(std::move(t));
  }
  int32_t dim = 0;
  llm_status st;
  for (int32_t pool : {LLM_POOLING_MEAN, LLM_POOLING_LAST}) {
    std::vector<float> batch = Embed(c.ctx, inputs, pool, 1, &dim, &st);
    ASSERT_EQ(st, LLM_OK) << llm_last_error();
    ASSERT_EQ(dim, 64);
    for (size_t i = 0; i < inputs.size(); i += 3) {
      std::vector<float> one = Embed(c.ctx, {inputs[i]}, pool, 1, &dim, &st);
      ASSERT_EQ(st, LLM_OK);
      EXPECT_EQ(std::memcmp(one.data(), batch.data() + i * dim, dim * sizeof(float)), 0) << "input " << i;
    }
  }
  std::vector<float> deflt = Embed(c.ctx, {inputs[0]}, LLM_POOLING_MODEL, 0, &dim, &st);
  std::vector<float> mean = Embed(c.ctx, {inputs[0]}, LLM_POOLING_MEAN, 0, &dim, &st);
  EXPECT_EQ(deflt, mean);
  Embed(c.ctx, {inputs[0]}, LLM_POOLING_RANK, 0, &dim, &st);
  EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = inputs[0].data();
  r.n_prompt_tokens = static_cast<int32_t>(inputs[0].size());
  r.max_tokens = 4;
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(c.ctx, &r, &id), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("cannot generate"), std::string::npos) << llm_last_error();
}

TEST(EmbedContexts, GenerativeModelRefusesEmbeddings) {
  Ctx c;
  ASSERT_EQ(Open(ModelPathF32(), &c), LLM_OK) << llm_last_error();
  const llm_token t[3] = {1, 50, 60};
  const llm_token* tp = t;
  const int32_t n = 3;
  float out[512];
  int32_t dim = 0;
  EXPECT_EQ(llm_embed(c.ctx, nullptr, &tp, &n, 1, nullptr, out, 512, &dim), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("does not make embeddings"), std::string::npos) << llm_last_error();
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = t;
  r.n_prompt_tokens = 3;
  r.task = LLM_TASK_EMBED;
  llm_request_id id;
  EXPECT_EQ(llm_submit(c.ctx, &r, &id), LLM_ERR_UNSUPPORTED);
}

TEST(EmbedContexts, CudaRefusesAnEncoderWithAMessage) {
  Reference ref = LoadReference("bert");
  ASSERT_FALSE(ref.cases.empty());
  const std::string path = SynthesizeFile("bert_cuda", ref.json, "tiny-bert");
  Ctx c;
  EXPECT_EQ(Open(path, &c, 0, LLM_BACKEND_CUDA), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("CUDA"), std::string::npos) << llm_last_error();
  Ctx a;  // AUTO runs it on the CPU
  EXPECT_EQ(Open(path, &a, 0, LLM_BACKEND_AUTO), LLM_OK) << llm_last_error();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llm::test
