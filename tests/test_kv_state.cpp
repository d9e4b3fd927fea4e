// KV state export/import through the C API (llm_kv_*; kvstate/, docs/KV_FORMAT.md):
// round trips that must continue bitwise like the context that computed the
// prompt, element-type conversions, and every refusal a reader owes (another
// model, another geometry, a newer version, truncation, flipped bytes).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "backend/kv_rotation.h"
#include "kvstate/kv_convert.h"
#include "kvstate/kv_format.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/real_models.h"
#include "synth_model.h"
#include "util/fp16.h"

namespace llm {
namespace {

using test::ApiGreedy;
using test::ApiGreedyRun;

struct CtxOptions {
  int32_t kv_type = LLM_KV_AUTO;
  int32_t block_size = 16;
  int32_t n_blocks = 0;
  int32_t kv_type_v = LLM_KV_AUTO;  // V's type when it differs (0: as kv_type)
};

struct Ctx {
  llm_ctx* p = nullptr;
  Ctx() = default;
  Ctx(const std::string& path, CtxOptions o = {}) {
    llm_ctx_params cp;
    llm_ctx_params_init(&cp);
    cp.model_path = path.c_str();
    cp.backend = LLM_BACKEND_CPU;
    cp.n_threads = 2;
    cp.n_ctx = 256;
    cp.kv_type = o.kv_type;
    cp.kv_type_v = o.kv_type_v;
    cp.kv_block_size = o.block_size;
    cp.n_kv_blocks = o.n_blocks;
    const llm_status st = llm_ctx_create(&cp, &p);
    EXPECT_EQ(st, LLM_OK) << llm_last_error();
  }
  ~Ctx() { llm_ctx_destroy(p); }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
};

int32_t WriteToString(void* user, const void* data, size_t n) {
  static_cast<std::string*>(user)->append(static_cast<const char*>(data), n);
  return 0;
}

struct MemReader {
  const std::string* s;
  size_t at = 0;
};
int32_t ReadFromString(void* user, void* buf, size_t n, size_t* got) {
  auto* r = static_cast<MemReader*>(user);
  *got = std::min(n, r->s->size() - r->at);
  std::memcpy(buf, r->s->data() + r->at, *got);
  r->at += *got;
  return 0;
}

std::string Export(llm_ctx* ctx, const std::vector<llm_token>& tokens, int32_t* n, uint64_t salt = 0) {
  std::string out;
  *n = -1;
  EXPECT_EQ(llm_kv_export(ctx, tokens.data(), static_cast<int32_t>(tokens.size()), salt, WriteToString, &out, n),
            LLM_OK)
      << llm_last_error();
  return out;
}

llm_status Import(llm_ctx* ctx, const std::string& stream, int32_t* n, uint64_t salt = 0) {
  MemReader r{&stream};
  *n = -1;
  return llm_kv_import(ctx, salt, ReadFromString, &r, n);
}

// A deterministic prompt of `n` ids in [3, 3 + 250) after BOS (1): every
// model here has at least 256 tokens.
std::vector<llm_token> Prompt(int n) {
  std::vector<llm_token> p{1};
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11) % 250 + 3);
  return p;
}

std::string SynthPath(const std::string& shape, uint64_t seed = 1234) {
  const std::string path = ::testing::TempDir() + "/llmrt_kv_" + shape + "_" + std::to_string(seed) + "_" +
                           std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.seed = seed;
  o.stddev = 0.05f;
  o.norm_std = 0.1f;
  const synth::SynthShape* s = synth::FindSynthShape(shape);
  EXPECT_NE(s, nullptr) << shape;
  if (s == nullptr) return {};
  const Status st = synth::WriteSynthModel(*s, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// The conversation a context holds after a greedy request: prompt + output
// (its last token is never computed, so its blocks hold the tokens before).
std::vector<llm_token> Converse(llm_ctx* ctx, int n_prompt, int n_gen) {
  std::vector<llm_token> conv = Prompt(n_prompt);
  const ApiGreedyRun run = ApiGreedy(ctx, conv, n_gen);
  EXPECT_EQ(run.status, LLM_OK);
  EXPECT_EQ(run.tokens.size(), static_cast<size_t>(n_gen));
  conv.insert(conv.end(), run.tokens.begin(), run.tokens.end());
  return conv;
}

// The round trip: A computes a conversation, exports it; a fresh B imports
// it; both continue the conversation greedily and must agree bitwise
// (tokens and their log-probabilities), both serving the same cached prefix.
// B's re-export must be byte-identical to A's stream.
void RoundTrip(const std::string& path, CtxOptions o, int n_prompt = 40, int n_gen = 24) {
  Ctx a(path, o);
  ASSERT_NE(a.p, nullptr);
  const std::vector<llm_token> conv = Converse(a.p, n_prompt, n_gen);
  const int32_t want = (n_prompt + n_gen - 1) / o.block_size * o.block_size;  // full computed blocks
  int32_t n_out = 0;
  const std::string stream = Export(a.p, conv, &n_out);
  ASSERT_EQ(n_out, want);

  Ctx b(path, o);
  ASSERT_NE(b.p, nullptr);
  int32_t n_in = 0;
  ASSERT_EQ(Import(b.p, stream, &n_in), LLM_OK) << llm_last_error();
  EXPECT_EQ(n_in, want);
  int32_t n_again = 0;
  const std::string again = Export(b.p, conv, &n_again);
  EXPECT_EQ(again.size(), stream.size());
  const auto diff = std::mismatch(again.begin(), again.end(), stream.begin(), stream.end());
  EXPECT_TRUE(again == stream) << "B's re-export differs from A's stream at byte " << (diff.first - again.begin());
  EXPECT_EQ(n_again, want);

  const ApiGreedyRun ra = ApiGreedy(a.p, conv, 16);
  const ApiGreedyRun rb = ApiGreedy(b.p, conv, 16);
  ASSERT_EQ(ra.status, LLM_OK);
  ASSERT_EQ(rb.status, LLM_OK);
  EXPECT_EQ(ra.metrics.cached_prompt_tokens, want);
  EXPECT_EQ(rb.metrics.cached_prompt_tokens, want) << "the imported prefix was not reused";
  EXPECT_EQ(rb.tokens, ra.tokens);
  ASSERT_EQ(rb.top.size(), ra.top.size());
  for (size_t i = 0; i < ra.top.size(); ++i) {
    ASSERT_FALSE(ra.top[i].empty());
    ASSERT_FALSE(rb.top[i].empty());
    EXPECT_EQ(rb.top[i][0].logprob, ra.top[i][0].logprob) << "position " << i << " (CPU: bitwise)";
  }
  // Control: a fresh context without the import serves nothing from a cache.
  Ctx c(path, o);
  const ApiGreedyRun rc = ApiGreedy(c.p, conv, 1);
  EXPECT_EQ(rc.metrics.cached_prompt_tokens, 0);
}

TEST(KvState, RoundTripStoriesF32) { RoundTrip(test::ModelPathF32(), {LLM_KV_F32}); }
TEST(KvState, RoundTripStoriesF16) { RoundTrip(test::ModelPathF32(), {LLM_KV_F16}); }
TEST(KvState, RoundTripStoriesQ8) { RoundTrip(test::ModelPathF32(), {LLM_KV_Q8_0}); }
TEST(KvState, RoundTripStoriesBlock32) { RoundTrip(test::ModelPathF32(), {LLM_KV_F16, 32}, 50, 30); }

class KvStateFamily : public ::testing::TestWithParam<const char*> {};
TEST_P(KvStateFamily, RoundTrip) {
  const std::string path = SynthPath(GetParam());
  // 40 + 24 tokens: past the 32-token sliding windows of the mistral,
  // gemma and phi3 shapes. Every pool type.
  RoundTrip(path, {LLM_KV_F32});
  RoundTrip(path, {LLM_KV_F16});
  RoundTrip(path, {LLM_KV_Q8_0});
  std::filesystem::remove(path);
}
// Every generative family llm-synth writes (tiny-bert is an encoder: no KV).
INSTANTIATE_TEST_SUITE_P(Synth, KvStateFamily,
                         ::testing::Values("tiny", "tiny-llama3", "tiny-qwen2", "tiny-qwen2-yarn", "tiny-qwen3",
                                           "tiny-mistral", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-mixtral",
                                           "tiny-qwen2moe", "tiny-qwen3moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// Q4_0 (CPU, head_dim a multiple of 32): GGUF blocks on the wire, the pool's
// nibble pairs re-indexed both ways; windows past 32 tokens on tiny-mistral.
TEST(KvState, RoundTripQ4) {
  for (const char* shape : {"tiny-qwen3", "tiny-mistral", "tiny"}) {  // tiny: head_dim 64, rotated rows
    SCOPED_TRACE(shape);
    const std::string path = SynthPath(shape);
    RoundTrip(path, {LLM_KV_Q4_0});
    RoundTrip(path, {LLM_KV_Q4_0, 32}, 50, 30);
    std::filesystem::remove(path);
  }
}

TEST(KvState, RoundTripSmolLM2) {
  const std::string path = test::RealModelPath(test::kSmolLM2);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models.sh)";
  for (int32_t kv : {LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_F32}) RoundTrip(path, {kv}, 40, 8);
}

TEST(KvState, RoundTripGemma3) {
  const std::string path = test::RealModelPath(test::kGemma3);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "Gemma 3 270M not fetched (scripts/fetch-models.sh)";
  // 40 + 8 tokens: not past its 512-token sliding window (the synthesized
  // gemma shapes above cross theirs).
  for (int32_t kv : {LLM_KV_Q8_0, LLM_KV_F16, LLM_KV_F32}) RoundTrip(path, {kv}, 40, 8);
}

// ---------------------------------------------------------------- conversions

// Every block of a stream, parsed by the library's own reader.
std::vector<kvstate::BlockRecord> Blocks(const std::string& s, kvstate::StreamHeader* h) {
  size_t at = 0;
  kvstate::StreamReader r([&](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t k = std::min(n, s.size() - at);
    std::memcpy(buf, s.data() + at, k);
    at += k;
    return k;
  });
  std::vector<kvstate::BlockRecord> out;
  Status st = r.ReadHeader(h);
  EXPECT_TRUE(st.ok()) << st.message();
  while (st.ok()) {
    kvstate::BlockRecord b;
    StatusOr<bool> more = r.NextBlock(&b);
    EXPECT_TRUE(more.ok()) << more.status().message();
    if (!more.ok() || !*more) break;
    out.push_back(std::move(b));
  }
  return out;
}

// Export from a `from` pool, import into a `to` pool, re-export: the values
// must be those of the source converted — F16/Q8_0 -> F32 exactly, F32 ->
// F16 within half an F16 ulp, any -> Q8_0 within half a quantization step
// of its row (max|x| / 254) — and the converted import must serve requests.
void Convert(int32_t from, int32_t to) {
  SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to));
  const std::string path = test::ModelPathF32();
  Ctx a(path, {from});
  const std::vector<llm_token> conv = Converse(a.p, 40, 24);
  int32_t n = 0;
  const std::string src = Export(a.p, conv, &n);
  ASSERT_EQ(n, 48);
  Ctx b(path, {to});
  int32_t n_in = 0;
  ASSERT_EQ(Import(b.p, src, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  const std::string dst = Export(b.p, conv, &n);
  ASSERT_EQ(n, 48);

  kvstate::StreamHeader hs, hd;
  const auto bs = Blocks(src, &hs), bd = Blocks(dst, &hd);
  ASSERT_EQ(bs.size(), 3u);
  ASSERT_EQ(bd.size(), 3u);
  ASSERT_EQ(hs.geometry.elem, from);
  ASSERT_EQ(hd.geometry.elem, to);
  const KvWireLayout ws = hs.geometry.wire(), wd = hd.geometry.wire();
  std::vector<float> x(static_cast<size_t>(ws.head_dim)), y(x.size());
  double worst = 0;
  for (size_t i = 0; i < bs.size(); ++i) {
    EXPECT_EQ(bd[i].tokens, bs[i].tokens);
    EXPECT_EQ(bd[i].hash, bs[i].hash);
    for (int64_t l = 0; l < ws.n_layer; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < ws.n_head_kv; ++h)
          for (int64_t p = 0; p < ws.block_size; ++p) {
            kvstate::DecodeKvRow(ws, kv, bs[i].kv.data() + ws.TileOffset(l, kv, h), p, x.data());
            kvstate::DecodeKvRow(wd, kv, bd[i].kv.data() + wd.TileOffset(l, kv, h), p, y.data());
            float amax = 0;
            for (float v : x) amax = std::max(amax, std::fabs(v));
            for (size_t d = 0; d < x.size(); ++d) {
              double tol = 0;
              if (to == LLM_KV_F16 && from == LLM_KV_F32) tol = std::fabs(x[d]) * (1.0 / 2048) + 6e-8;
              if (to == LLM_KV_F16 && from == LLM_KV_Q8_0) tol = std::fabs(x[d]) * (1.0 / 2048) + 6e-8;
              if (to == LLM_KV_Q8_0) tol = amax / 254.0 * 1.0001 + 1e-12;
              const double err = std::fabs(static_cast<double>(y[d]) - x[d]);
              worst = std::max(worst, err);
              ASSERT_LE(err, tol) << "block " << i << " layer " << l << " kv " << kv << " head " << h << " pos " << p
                                  << " dim " << d << ": " << x[d] << " -> " << y[d];
            }
          }
  }
  if (to == LLM_KV_F32) {
    EXPECT_EQ(worst, 0.0) << "widening must be exact";
  }
  const ApiGreedyRun rb = ApiGreedy(b.p, conv, 8);
  EXPECT_EQ(rb.status, LLM_OK);
  EXPECT_EQ(rb.metrics.cached_prompt_tokens, 48);
  EXPECT_EQ(rb.tokens.size(), 8u);
}

// K and V of different types (kv_type_v): the stream's GEOM names K's type
// and a VELM section V's; each side's tiles keep their own size on the wire
// and come back into a pool of the same pair byte for byte ("tiny":
// head_dim 64, so Q4_0 takes part on either side).
TEST(KvState, RoundTripMixedTypes) {
  const std::string path = SynthPath("tiny");
  const std::pair<int32_t, int32_t> pairs[] = {{LLM_KV_Q8_0, LLM_KV_F16}, {LLM_KV_F16, LLM_KV_Q4_0},
                                               {LLM_KV_Q4_0, LLM_KV_Q8_0}, {LLM_KV_F32, LLM_KV_Q8_0}};
  for (const auto& [k, v] : pairs) {
    SCOPED_TRACE("K " + std::to_string(k) + " V " + std::to_string(v));
    RoundTrip(path, {k, 16, 0, v});
    Ctx a(path, {k, 16, 0, v});
    int32_t n = 0;
    const std::string stream = Export(a.p, Converse(a.p, 20, 4), &n);
    ASSERT_EQ(n, 16);
    kvstate::StreamHeader h;
    const auto blocks = Blocks(stream, &h);
    ASSERT_EQ(blocks.size(), 1u);
    auto wire = [](int32_t t) { return t == LLM_KV_Q4_0 ? kKvWireQ4_0 : t; };
    EXPECT_EQ(h.geometry.elem, wire(k));
    EXPECT_EQ(h.geometry.elem_v, wire(v));
    EXPECT_NE(stream.find("VELM"), std::string::npos);
    // 2 layers x 2 KV heads x (a K tile + a V tile) of 16 rows each
    const KvWireLayout w = h.geometry.wire();
    EXPECT_EQ(static_cast<int64_t>(blocks[0].kv.size()), 2 * 2 * (w.TileBytes(wire(k)) + w.TileBytes(wire(v))));
  }
  // a single-type stream carries no VELM (it reads as before kv_type_v)
  Ctx one(path, {LLM_KV_Q8_0, 16, 0, LLM_KV_Q8_0});
  int32_t n = 0;
  EXPECT_EQ(Export(one.p, Converse(one.p, 20, 4), &n).find("VELM"), std::string::npos);
  std::filesystem::remove(path);
}

// A mixed cache's stream (K Q8_0, V F16) into a one-type F32 context: each
// side widens exactly; and that F32 stream back into a mixed context, each
// side converting to its own type; both imports serve their prefix.
TEST(KvState, ConvertMixedTypes) {
  const std::string path = test::ModelPathF32();
  Ctx a(path, {LLM_KV_Q8_0, 16, 0, LLM_KV_F16});
  const std::vector<llm_token> conv = Converse(a.p, 40, 24);
  int32_t n = 0;
  const std::string src = Export(a.p, conv, &n);
  ASSERT_EQ(n, 48);
  Ctx b(path, {LLM_KV_F32});
  int32_t n_in = 0;
  ASSERT_EQ(Import(b.p, src, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  const std::string dst = Export(b.p, conv, &n);
  kvstate::StreamHeader hs, hd;
  const auto bs = Blocks(src, &hs), bd = Blocks(dst, &hd);
  ASSERT_EQ(bs.size(), 3u);
  ASSERT_EQ(bd.size(), 3u);
  ASSERT_EQ(hs.geometry.elem, LLM_KV_Q8_0);
  ASSERT_EQ(hs.geometry.elem_v, LLM_KV_F16);
  ASSERT_EQ(hd.geometry.elem, LLM_KV_F32);
  ASSERT_EQ(hd.geometry.elem_v, 0);
  const KvWireLayout ws = hs.geometry.wire(), wd = hd.geometry.wire();
  std::vector<float> x(static_cast<size_t>(ws.head_dim)), y(x.size());
  for (size_t i = 0; i < bs.size(); ++i)
    for (int64_t l = 0; l < ws.n_layer; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < ws.n_head_kv; ++h)
          for (int64_t p = 0; p < ws.block_size; ++p) {
            kvstate::DecodeKvRow(ws, kv, bs[i].kv.data() + ws.TileOffset(l, kv, h), p, x.data());
            kvstate::DecodeKvRow(wd, kv, bd[i].kv.data() + wd.TileOffset(l, kv, h), p, y.data());
            ASSERT_EQ(x, y) << "block " << i << " layer " << l << " kv " << kv << " head " << h << " pos " << p;
          }
  const ApiGreedyRun rb = ApiGreedy(b.p, conv, 8);
  EXPECT_EQ(rb.metrics.cached_prompt_tokens, 48);
  Ctx c(path, {LLM_KV_Q8_0, 16, 0, LLM_KV_F16});
  ASSERT_EQ(Import(c.p, dst, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  const ApiGreedyRun rc = ApiGreedy(c.p, conv, 8);
  EXPECT_EQ(rc.metrics.cached_prompt_tokens, 48);
  EXPECT_EQ(rc.tokens.size(), 8u);
}

TEST(KvState, ConvertF32ToF16) { Convert(LLM_KV_F32, LLM_KV_F16); }
TEST(KvState, ConvertF32ToQ8) { Convert(LLM_KV_F32, LLM_KV_Q8_0); }
TEST(KvState, ConvertF16ToF32) { Convert(LLM_KV_F16, LLM_KV_F32); }
TEST(KvState, ConvertF16ToQ8) { Convert(LLM_KV_F16, LLM_KV_Q8_0); }
TEST(KvState, ConvertQ8ToF32) { Convert(LLM_KV_Q8_0, LLM_KV_F32); }
TEST(KvState, ConvertQ8ToF16) { Convert(LLM_KV_Q8_0, LLM_KV_F16); }

// A Q4_0 stream imported into F32 and F16 pools: widening to F32 is exact
// (d * (q - 8) of the stream's own blocks), F16 within half an F16 ulp; the
// imports serve the cached prefix.
TEST(KvState, ConvertQ4ToF32AndF16) {
  const std::string path = SynthPath("tiny-qwen3");
  Ctx a(path, {LLM_KV_Q4_0});
  const std::vector<llm_token> conv = Converse(a.p, 40, 24);
  int32_t n = 0;
  const std::string src = Export(a.p, conv, &n);
  ASSERT_EQ(n, 48);
  for (int32_t to : {LLM_KV_F32, LLM_KV_F16}) {
    Ctx b(path, {to});
    int32_t n_in = 0;
    ASSERT_EQ(Import(b.p, src, &n_in), LLM_OK) << llm_last_error();
    ASSERT_EQ(n_in, 48);
    const std::string dst = Export(b.p, conv, &n);
    kvstate::StreamHeader hs, hd;
    const auto bs = Blocks(src, &hs), bd = Blocks(dst, &hd);
    ASSERT_EQ(hs.geometry.elem, kKvWireQ4_0);
    ASSERT_EQ(bs.size(), bd.size());
    const KvWireLayout ws = hs.geometry.wire(), wd = hd.geometry.wire();
    std::vector<float> x(static_cast<size_t>(ws.head_dim)), y(x.size());
    for (size_t i = 0; i < bs.size(); ++i)
      for (int64_t l = 0; l < ws.n_layer; ++l)
        for (int64_t kv = 0; kv < 2; ++kv)
          for (int64_t h = 0; h < ws.n_head_kv; ++h)
            for (int64_t p = 0; p < ws.block_size; ++p) {
              kvstate::DecodeKvRow(ws, kv, bs[i].kv.data() + ws.TileOffset(l, kv, h), p, x.data());
              kvstate::DecodeKvRow(wd, kv, bd[i].kv.data() + wd.TileOffset(l, kv, h), p, y.data());
              for (size_t d = 0; d < x.size(); ++d) {
                const double tol = to == LLM_KV_F32 ? 0.0 : std::fabs(x[d]) * (1.0 / 2048) + 6e-8;
                ASSERT_LE(std::fabs(static_cast<double>(y[d]) - x[d]), tol) << "to " << to << " dim " << d;
              }
            }
    const ApiGreedyRun rb = ApiGreedy(b.p, conv, 8);
    EXPECT_EQ(rb.status, LLM_OK);
    EXPECT_EQ(rb.metrics.cached_prompt_tokens, 48);
  }
  std::filesystem::remove(path);
}

// A Q4_0 pool holds Hadamard-rotated rows (backend/kv_rotation.h), as
// llama.cpp's quantized cache does: on a head_dim-64 model, layer 0's K and V
// (the same F32 values in any pool: they depend on the embeddings alone) are
// stored in the Q4_0 stream as QuantizeBlockQ4 of H·row, byte for byte, not
// as the unrotated row's blocks.
TEST(KvState, Q4PoolHoldsRotatedRows) {
  const std::string path = SynthPath("tiny");
  // both pools compute the same prompt in one step (the same F32 rows)
  const std::vector<llm_token> conv = Prompt(48);
  Ctx f(path, {LLM_KV_F32});
  ASSERT_EQ(ApiGreedy(f.p, conv, 1).status, LLM_OK);
  int32_t n = 0, nq = 0;
  const std::string sf = Export(f.p, conv, &n);
  ASSERT_GE(n, 32);
  Ctx q(path, {LLM_KV_Q4_0});
  ASSERT_EQ(ApiGreedy(q.p, conv, 1).status, LLM_OK);
  const std::string sq = Export(q.p, conv, &nq);
  ASSERT_EQ(nq, n);
  kvstate::StreamHeader hf, hq;
  const auto bf = Blocks(sf, &hf), bq = Blocks(sq, &hq);
  ASSERT_EQ(hq.geometry.elem, kKvWireQ4_0);
  ASSERT_EQ(hq.geometry.head_dim, 64);
  ASSERT_EQ(bf.size(), bq.size());
  const KvWireLayout wf = hf.geometry.wire(), wq = hq.geometry.wire();
  const int64_t hd = wf.head_dim;
  std::vector<float> x(static_cast<size_t>(hd));
  std::vector<uint8_t> want(static_cast<size_t>(wq.block_size * hd / 32 * 18));
  int64_t rows = 0, unrotated_equal = 0;
  for (size_t i = 0; i < bf.size(); ++i)
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < wf.n_head_kv; ++h) {
        const uint8_t* got = bq[i].kv.data() + wq.TileOffset(0, kv, h);
        for (int64_t p = 0; p < wf.block_size; ++p) {
          kvstate::DecodeKvRow(wf, kv, bf[i].kv.data() + wf.TileOffset(0, kv, h), p, x.data());
          kvstate::EncodeKvRow(wq, kv, want.data(), p, x.data());  // unrotated
          unrotated_equal += std::memcmp(want.data() + p * (hd / 32) * 18, got + p * (hd / 32) * 18, hd / 32 * 18) == 0;
          HadamardRotate(x.data(), hd, kv == 0 ? KvRotationK(hd) : KvRotationV(hd));
          kvstate::EncodeKvRow(wq, kv, want.data(), p, x.data());
          ASSERT_EQ(0, std::memcmp(want.data() + p * (hd / 32) * 18, got + p * (hd / 32) * 18, hd / 32 * 18))
              << "block " << i << (kv == 0 ? " K" : " V") << " head " << h << " pos " << p;
          ++rows;
        }
      }
  EXPECT_EQ(rows, 2 * 2 * int64_t{n});
  EXPECT_EQ(unrotated_equal, 0);
  std::filesystem::remove(path);
}

// A rotated Q4_0 stream imported into an F32 pool is rotated back (H is its
// own inverse): the F32 rows are H·(the stream's values) up to F32 rounding,
// and an F32 stream imported into a Q4_0 pool is rotated on the way in.
TEST(KvState, ConvertRotatedQ4BothWays) {
  const std::string path = SynthPath("tiny");
  Ctx a(path, {LLM_KV_Q4_0});
  const std::vector<llm_token> conv = Converse(a.p, 40, 8);
  int32_t n = 0;
  const std::string src = Export(a.p, conv, &n);
  ASSERT_EQ(n, 32);
  Ctx b(path, {LLM_KV_F32});
  int32_t n_in = 0;
  ASSERT_EQ(Import(b.p, src, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 32);
  const std::string dst = Export(b.p, conv, &n);
  kvstate::StreamHeader hs, hd;
  const auto bs = Blocks(src, &hs), bd = Blocks(dst, &hd);
  ASSERT_EQ(hd.geometry.elem, LLM_KV_F32);
  ASSERT_EQ(bs.size(), bd.size());
  const KvWireLayout ws = hs.geometry.wire(), wd = hd.geometry.wire();
  const int64_t dim = ws.head_dim;
  std::vector<float> x(static_cast<size_t>(dim)), y(x.size());
  for (size_t i = 0; i < bs.size(); ++i)
    for (int64_t l = 0; l < ws.n_layer; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < ws.n_head_kv; ++h)
          for (int64_t p = 0; p < ws.block_size; ++p) {
            kvstate::DecodeKvRow(ws, kv, bs[i].kv.data() + ws.TileOffset(l, kv, h), p, x.data());
            kvstate::DecodeKvRow(wd, kv, bd[i].kv.data() + wd.TileOffset(l, kv, h), p, y.data());
            float amax = 0;
            for (float v : x) amax = std::max(amax, std::fabs(v));
            HadamardRotate(x.data(), dim, kvstate::KvRowRotation(ws, kv));
            for (int64_t d = 0; d < dim; ++d)
              ASSERT_NEAR(y[d], x[d], 1e-6 * amax + 1e-12) << "layer " << l << " kv " << kv << " dim " << d;
          }
  // ... and back into a Q4_0 pool: rotated again, the stream's bytes return
  // (a rotated row re-quantizes to its own blocks but for a rounding tie).
  Ctx c(path, {LLM_KV_Q4_0});
  ASSERT_EQ(Import(c.p, dst, &n_in), LLM_OK) << llm_last_error();
  const std::string again = Export(c.p, conv, &n);
  ASSERT_EQ(again.size(), src.size());
  size_t differ = 0;
  for (size_t i = 0; i < src.size(); ++i) differ += again[i] != src[i];
  EXPECT_LE(differ, src.size() / 1000) << "bytes differing after Q4_0 -> F32 -> Q4_0";
  const ApiGreedyRun rc = ApiGreedy(c.p, conv, 4);
  EXPECT_EQ(rc.status, LLM_OK);
  EXPECT_EQ(rc.metrics.cached_prompt_tokens, 32);
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------- refusals

// A context that refused something still serves, and still imports.
void ExpectServes(llm_ctx* ctx, const std::string& good, int32_t want) {
  const ApiGreedyRun r = ApiGreedy(ctx, Prompt(20), 4);
  EXPECT_EQ(r.status, LLM_OK);
  EXPECT_EQ(r.tokens.size(), 4u);
  int32_t n = 0;
  EXPECT_EQ(Import(ctx, good, &n), LLM_OK) << llm_last_error();
  EXPECT_EQ(n, want);
}

std::string StoriesStream(int32_t kv_type, int n_prompt, int n_gen, int32_t* n) {
  Ctx a(test::ModelPathF32(), {kv_type});
  return Export(a.p, Converse(a.p, n_prompt, n_gen), n);
}

TEST(KvState, RefusesAnotherModel) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_F16, 40, 8, &n);
  ASSERT_EQ(n, 32);
  {  // the same architecture and shapes, F16 weights: a tensor's type differs
    Ctx f16(test::ModelPathF16(), {LLM_KV_F16});
    int32_t got = 0;
    EXPECT_EQ(Import(f16.p, s, &got), LLM_ERR_KV_MISMATCH);
    EXPECT_NE(std::string(llm_last_error()).find("another model: tensor"), std::string::npos) << llm_last_error();
    EXPECT_EQ(got, -1) << "out_n_tokens is left alone when the header is refused";
  }
  // Two synthesized models of one shape, other seeds: only the weights differ.
  const std::string p1 = SynthPath("tiny-llama3", 1), p2 = SynthPath("tiny-llama3", 2);
  {
    Ctx m1(p1), m2(p2);
    const std::string s1 = Export(m1.p, Converse(m1.p, 40, 8), &n);
    ASSERT_EQ(n, 32);
    int32_t got = 0;
    EXPECT_EQ(Import(m2.p, s1, &got), LLM_ERR_KV_MISMATCH);
    EXPECT_NE(std::string(llm_last_error()).find("different weights"), std::string::npos) << llm_last_error();
    EXPECT_EQ(Import(m2.p, s, &got), LLM_ERR_KV_MISMATCH);  // another architecture's shapes
    const std::string s2 = Export(m2.p, Converse(m2.p, 40, 8), &n);
    ExpectServes(m2.p, s2, 32);
  }
  std::filesystem::remove(p1);
  std::filesystem::remove(p2);
}

TEST(KvState, RefusesAnotherGeometry) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_F16, 40, 8, &n);
  Ctx b32(test::ModelPathF32(), {LLM_KV_F16, 32});
  int32_t got = 0;
  EXPECT_EQ(Import(b32.p, s, &got), LLM_ERR_KV_MISMATCH);
  EXPECT_NE(std::string(llm_last_error()).find("block size 16 there, 32 here"), std::string::npos) << llm_last_error();
  ExpectServes(b32.p, Export(b32.p, Converse(b32.p, 40, 8), &n), 32);
}

// Element type 5 was the Q4_0 of one earlier build, its rows not rotated:
// read as today's rotated Q4_0 it would give wrong attention, so it is
// refused by name (KV_MISMATCH), and the context still serves.
TEST(KvState, RefusesUnrotatedQ4Stream) {
  const std::string path = SynthPath("tiny");
  Ctx a(path, {LLM_KV_Q4_0});
  int32_t n = 0;
  std::string s = Export(a.p, Converse(a.p, 40, 8), &n);
  ASSERT_EQ(n, 32);
  const size_t geom = s.find("GEOM");
  ASSERT_NE(geom, std::string::npos);
  const size_t elem_at = geom + 4 + 4 + 8 + 4 * 4;  // tag, flags, length; n_layer .. block_size
  int32_t elem = 0;
  std::memcpy(&elem, s.data() + elem_at, 4);
  ASSERT_EQ(elem, kKvWireQ4_0);
  elem = kKvWireQ4_0Unrotated;
  std::memcpy(s.data() + elem_at, &elem, 4);
  Ctx b(path, {LLM_KV_Q4_0});
  int32_t got = 0;
  EXPECT_EQ(Import(b.p, s, &got), LLM_ERR_KV_MISMATCH);
  EXPECT_NE(std::string(llm_last_error()).find("unrotated"), std::string::npos) << llm_last_error();
  const ApiGreedyRun r = ApiGreedy(b.p, Prompt(20), 4);
  EXPECT_EQ(r.status, LLM_OK);
  EXPECT_EQ(r.metrics.cached_prompt_tokens, 0);
  std::filesystem::remove(path);
}

// A hostile VELM (V's element type): out of range, 0, the refused
// unrotated Q4_0, Q4_0 where head_dim is no multiple of 32, a valid type
// its blocks were not written in, a wrong length, unknown flags, repeated,
// after GEOM, or missing from a mixed stream: each a clear status before
// any block is used, and the context serves on.
TEST(KvState, RefusesHostileVElem) {
  const std::string path = test::ModelPathF32();  // head_dim 8
  Ctx a(path, {LLM_KV_Q8_0, 16, 0, LLM_KV_F16});
  int32_t n = 0;
  const std::string s = Export(a.p, Converse(a.p, 40, 8), &n);
  ASSERT_EQ(n, 32);
  const size_t velm = s.find("VELM"), geom = s.find("GEOM");
  ASSERT_NE(velm, std::string::npos);
  ASSERT_LT(velm, geom);
  const size_t value_at = velm + 16, section = 16 + 4;  // header (tag, flags, u64 length), i32
  auto with_value = [&](int32_t v) {
    std::string x = s;
    std::memcpy(x.data() + value_at, &v, 4);
    return x;
  };
  Ctx b(path, {LLM_KV_Q8_0, 16, 0, LLM_KV_F16});
  int32_t got = 0;
  auto expect = [&](const std::string& x, llm_status want, const char* says) {
    EXPECT_EQ(Import(b.p, x, &got), want) << says << ": " << llm_last_error();
    EXPECT_NE(std::string(llm_last_error()).find(says), std::string::npos) << llm_last_error();
    EXPECT_LE(got, 0) << says;  // -1: untouched (header refused); 0: no block imported
  };
  expect(with_value(99), LLM_ERR_KV_CORRUPT, "unknown V element type 99");
  expect(with_value(-7), LLM_ERR_KV_CORRUPT, "unknown V element type -7");
  expect(with_value(0), LLM_ERR_KV_CORRUPT, "VELM");
  expect(with_value(kKvWireQ4_0Unrotated), LLM_ERR_KV_MISMATCH, "unrotated");
  expect(with_value(kKvWireQ4_0), LLM_ERR_KV_CORRUPT, "head_dim 8");
  expect(with_value(LLM_KV_F32), LLM_ERR_KV_CORRUPT, "its geometry needs");  // F32 V tiles: longer blocks
  {
    std::string x = s;  // an 8-byte payload
    const uint64_t len = 8;
    std::memcpy(x.data() + velm + 8, &len, 8);
    x.insert(value_at + 4, 4, '\0');
    expect(x, LLM_ERR_KV_CORRUPT, "VELM");
  }
  {
    std::string x = s;
    const uint32_t flags = 3;
    std::memcpy(x.data() + velm + 4, &flags, 4);
    expect(x, LLM_ERR_KV_MISMATCH, "flags 3");
  }
  expect(s.substr(0, velm) + s.substr(velm, section) + s.substr(velm), LLM_ERR_KV_CORRUPT, "'VELM'");  // twice
  {
    // after GEOM: read where a block may come
    const std::string no_velm = s.substr(0, velm) + s.substr(velm + section);
    const size_t blck = no_velm.find("BLCK");
    expect(no_velm.substr(0, blck) + s.substr(velm, section) + no_velm.substr(blck), LLM_ERR_KV_CORRUPT, "'VELM'");
    // left out: V read as K's Q8_0, whose tiles are another size
    expect(no_velm, LLM_ERR_KV_CORRUPT, "its geometry needs");
  }
  ExpectServes(b.p, s, 32);
}

TEST(KvState, RefusesNewerVersionAndUnknownRequiredSection) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_Q8_0, 40, 8, &n);
  Ctx b(test::ModelPathF32(), {LLM_KV_Q8_0});
  std::string v2 = s;
  v2[8] = 2;  // the version field
  int32_t got = 0;
  EXPECT_EQ(Import(b.p, v2, &got), LLM_ERR_KV_MISMATCH);
  EXPECT_NE(std::string(llm_last_error()).find("newer"), std::string::npos) << llm_last_error();

  // A section this reader does not know, right after the header's sections:
  // skipped when optional (how later versions add sections)...
  kvstate::StreamHeader h;
  const size_t blocks_at = [&] {
    // the first BLCK section follows MODL and GEOM: find it by its tag
    const size_t at = s.find("BLCK");
    EXPECT_NE(at, std::string::npos);
    return at;
  }();
  (void)h;
  auto with_section = [&](uint32_t flags) {
    std::string x = s.substr(0, blocks_at);
    const char head[] = {'X', 'T', 'R', 'A'};
    x.append(head, 4);
    x.append(reinterpret_cast<const char*>(&flags), 4);
    const uint64_t len = 5;
    x.append(reinterpret_cast<const char*>(&len), 8);
    x.append("hello", 5);
    return x + s.substr(blocks_at);
  };
  EXPECT_EQ(Import(b.p, with_section(0), &got), LLM_OK) << llm_last_error();
  EXPECT_EQ(got, 32);
  // ... refused when marked required.
  EXPECT_EQ(Import(b.p, with_section(kvstate::kSectionRequired), &got), LLM_ERR_KV_MISMATCH);
  EXPECT_NE(std::string(llm_last_error()).find("'XTRA'"), std::string::npos) << llm_last_error();
  ExpectServes(b.p, s, 32);
}

// Every prefix of a stream is refused as truncated; the blocks complete
// before the cut (each verified on its own) may stay imported.
TEST(KvState, RefusesTruncationAtEveryCut) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_Q8_0, 40, 8, &n);
  ASSERT_EQ(n, 32);
  Ctx b(test::ModelPathF32(), {LLM_KV_Q8_0});
  const size_t blocks_at = s.find("BLCK");  // where the header's sections end
  for (size_t cut = 0; cut < s.size(); ++cut) {
    const std::string t = s.substr(0, cut);
    int32_t got = -1;
    const llm_status st = Import(b.p, t, &got);
    ASSERT_EQ(st, LLM_ERR_KV_CORRUPT) << "cut at " << cut << " of " << s.size() << ": " << llm_last_error();
    ASSERT_NE(std::string(llm_last_error()).find("truncated"), std::string::npos) << llm_last_error();
    ASSERT_LE(got, 32);
    if (cut >= blocks_at) {
      ASSERT_GE(got, 0) << "cut at " << cut << ": the header was accepted, so the count is reported";
    } else {
      ASSERT_EQ(got, -1) << "cut at " << cut << ": nothing accepted, the count is left alone";
    }
  }
  ExpectServes(b.p, s, 32);
}

// Every byte of a stream flipped (x ^ 0xFF) is refused: by the checksum in
// a block, by a mismatch or a malformed section in the header.
TEST(KvState, RefusesEveryFlippedByte) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_Q8_0, 40, 8, &n);
  ASSERT_EQ(n, 32);
  const size_t blocks_at = s.find("BLCK");
  Ctx b(test::ModelPathF32(), {LLM_KV_Q8_0, 16, 0});
  for (size_t i = 0; i < s.size(); ++i) {
    std::string t = s;
    t[i] = static_cast<char>(t[i] ^ 0xFF);
    int32_t got = -1;
    const llm_status st = Import(b.p, t, &got);
    ASSERT_NE(st, LLM_OK) << "byte " << i << " flipped was accepted";
    // inside a block's payload (blocks are sections of one length, then END)
    uint64_t block_len = 0;
    std::memcpy(&block_len, s.data() + blocks_at + 8, 8);
    if (i >= blocks_at && i < s.size() - 24 && (i - blocks_at) % (16 + block_len) >= 16) {
      ASSERT_EQ(st, LLM_ERR_KV_CORRUPT) << "byte " << i << ": " << llm_last_error();
      ASSERT_GE(got, 0) << "byte " << i << ": the verified blocks before it are reported";
      ASSERT_LE(got, 32);
    }
  }
  ExpectServes(b.p, s, 32);
}

TEST(KvState, PoolFullImportsTheLongestPrefixThatFits) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_F16, 60, 20, &n);
  ASSERT_EQ(n, 64);
  Ctx small(test::ModelPathF32(), {LLM_KV_F16, 16, 3});
  int32_t got = 0;
  ASSERT_EQ(Import(small.p, s, &got), LLM_OK) << llm_last_error();
  EXPECT_EQ(got, 48);
  const ApiGreedyRun r = ApiGreedy(small.p, Prompt(40), 4);
  EXPECT_EQ(r.status, LLM_OK);
  EXPECT_EQ(r.metrics.cached_prompt_tokens, 32);
}

// An import while a request runs in a pool it needs all of: the import may
// take only free blocks, the request evicts them as it grows, and its
// greedy output is the same as in a context without the import.
TEST(KvState, ImportBesideARunningRequest) {
  int32_t n = 0;
  const std::string s = StoriesStream(LLM_KV_F16, 60, 20, &n);
  ASSERT_EQ(n, 64);
  std::vector<llm_token> prompt = Prompt(180);  // 12 of the 14 blocks once admitted
  for (llm_token& t : prompt) t = t == 1 ? 1 : (t * 3) % 250 + 3;  // unlike the stream's tokens
  ApiGreedyRun want;
  {
    Ctx ref(test::ModelPathF32(), {LLM_KV_F16, 16, 14});
    want = ApiGreedy(ref.p, prompt, 40);
    ASSERT_EQ(want.status, LLM_OK);
  }
  Ctx c(test::ModelPathF32(), {LLM_KV_F16, 16, 14});  // 224 slots for 220 tokens
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = prompt.data();
  r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
  r.max_tokens = 40;
  r.ignore_eos = 1;
  r.sampling = &sp;
  llm_request_id id = 0;
  ASSERT_EQ(llm_submit(c.p, &r, &id), LLM_OK);
  // Once its first token is out, the request holds 12 blocks: 32 tokens fit.
  std::vector<llm_token> tokens;
  llm_status final_status = LLM_ERR_INTERNAL;
  bool done = false, imported = false, done_before_import = false;
  int32_t got = -1;
  for (int polls = 0; !done && polls < 6000; ++polls) {
    llm_event ev[8];
    for (llm_event& e : ev) {
      std::memset(&e, 0, sizeof e);
      e.struct_size = sizeof e;
    }
    uint32_t n_ev = 0;
    ASSERT_EQ(llm_poll(c.p, ev, 8, &n_ev, 10), LLM_OK);
    for (uint32_t i = 0; i < n_ev; ++i) {
      if (ev[i].type == LLM_EVENT_TOKEN) tokens.push_back(ev[i].token);
      if (ev[i].type == LLM_EVENT_FINAL) final_status = ev[i].status, done = true;
    }
    if (!imported && !tokens.empty()) {
      EXPECT_EQ(Import(c.p, s, &got), LLM_OK) << llm_last_error();
      imported = true;
      // Every event of the steps before the import is queued by now: no
      // final among them means the request was running during the import.
      llm_event after[64];
      for (llm_event& e : after) {
        std::memset(&e, 0, sizeof e);
        e.struct_size = sizeof e;
      }
      uint32_t n_after = 0;
      ASSERT_EQ(llm_poll(c.p, after, 64, &n_after, 0), LLM_OK);
      done_before_import = done;
      for (uint32_t i = 0; i < n_after; ++i) {
        if (after[i].type == LLM_EVENT_TOKEN) tokens.push_back(after[i].token);
        if (after[i].type == LLM_EVENT_FINAL) final_status = after[i].status, done = done_before_import = true;
      }
    }
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(imported);
  RecordProperty("imported_tokens", got);
  if (!done_before_import) {
    // It held at least 12 of the 14 blocks (more if it ran on before the
    // import: how far depends on the machine's load), so at most 2 were
    // free: 32 tokens at most, whole blocks.
    EXPECT_LE(got, 32) << "an import never takes the blocks of a running request";
    EXPECT_EQ(got % 16, 0);
  } else {
    EXPECT_LE(got, 64);  // it may have finished first, releasing its blocks
  }
  EXPECT_EQ(final_status, LLM_OK);
  EXPECT_EQ(tokens, want.tokens);
}

TEST(KvState, SaltPartitionsTheCache) {
  Ctx a(test::ModelPathF32(), {LLM_KV_F16});
  const std::vector<llm_token> conv = Converse(a.p, 40, 8);
  int32_t n = 0;
  EXPECT_EQ(Export(a.p, conv, &n, /*salt=*/7).size() > 0, true);
  EXPECT_EQ(n, 0) << "the conversation was cached under salt 0, not 7";
  const std::string s = Export(a.p, conv, &n);
  ASSERT_EQ(n, 32);
  Ctx b(test::ModelPathF32(), {LLM_KV_F16});
  int32_t got = 0;
  ASSERT_EQ(Import(b.p, s, &got, /*salt=*/7), LLM_OK);
  EXPECT_EQ(got, 32);
  Export(b.p, conv, &n, 0);
  EXPECT_EQ(n, 0);
  Export(b.p, conv, &n, 7);
  EXPECT_EQ(n, 32);
}

TEST(KvState, FileHelpers) {
  Ctx a(test::ModelPathF32(), {LLM_KV_F16});
  const std::vector<llm_token> conv = Converse(a.p, 40, 8);
  const std::string path = ::testing::TempDir() + "/llmrt_kv_" + std::to_string(::getpid()) + ".llmkv";
  int32_t n = 0;
  ASSERT_EQ(llm_kv_export_file(a.p, conv.data(), static_cast<int32_t>(conv.size()), 0, path.c_str(), &n), LLM_OK)
      << llm_last_error();
  EXPECT_EQ(n, 32);
  Ctx b(test::ModelPathF32(), {LLM_KV_F16});
  int32_t got = 0;
  ASSERT_EQ(llm_kv_import_file(b.p, 0, path.c_str(), &got), LLM_OK) << llm_last_error();
  EXPECT_EQ(got, 32);
  EXPECT_EQ(llm_kv_import_file(b.p, 0, (path + ".missing").c_str(), &got), LLM_ERR_IO);
  EXPECT_EQ(llm_kv_export_file(b.p, conv.data(), 3, 0, "/nonexistent-dir/x.llmkv", &got), LLM_ERR_IO);
  std::filesystem::remove(path);
}

struct Reentry {
  llm_ctx* ctx;
  llm_status inner = LLM_OK;
};
int32_t ReenteringWrite(void* user, const void*, size_t) {
  auto* r = static_cast<Reentry*>(user);
  llm_token t = 1;
  int32_t n = 0;
  std::string sink;
  r->inner = llm_kv_export(r->ctx, &t, 1, 0, WriteToString, &sink, &n);
  return 0;
}
int32_t FailingWrite(void*, const void*, size_t) { return 1; }

TEST(KvState, CallbackMisuseAndErrors) {
  Ctx a(test::ModelPathF32(), {LLM_KV_F16});
  const std::vector<llm_token> conv = Converse(a.p, 40, 8);
  Reentry r{a.p};
  int32_t n = 0;
  EXPECT_EQ(llm_kv_export(a.p, conv.data(), static_cast<int32_t>(conv.size()), 0, ReenteringWrite, &r, &n), LLM_OK);
  EXPECT_EQ(r.inner, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_kv_export(a.p, conv.data(), static_cast<int32_t>(conv.size()), 0, FailingWrite, nullptr, &n),
            LLM_ERR_IO);
  EXPECT_EQ(llm_kv_export(a.p, nullptr, 4, 0, WriteToString, nullptr, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_kv_export(a.p, conv.data(), -1, 0, WriteToString, nullptr, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_kv_import(a.p, 0, nullptr, nullptr, &n), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_kv_import(nullptr, 0, ReadFromString, nullptr, &n), LLM_ERR_NULL_ARGUMENT);
  const std::string empty;
  EXPECT_EQ(Import(a.p, empty, &n), LLM_ERR_KV_CORRUPT);
  EXPECT_EQ(Import(a.p, std::string("GGUF and more bytes than a header"), &n), LLM_ERR_KV_CORRUPT);
  EXPECT_NE(std::string(llm_last_error()).find("magic"), std::string::npos);
}

}  // namespace
}  // namespace llm

namespace llm {
namespace {

// `stream` with its blocks converted to element types (elem, elem_v) by the
// stream's own rule (kvstate::ConvertKvBlock), the checksums rewritten;
// `corrupt`: block 0 starts with a negative FP8 scale.
std::string ConvertStream(const std::string& f32, int32_t elem, int32_t elem_v, bool corrupt) {
  size_t at = 0;
  kvstate::StreamReader r([&](void* buf, size_t k) -> StatusOr<size_t> {
    const size_t m = std::min(k, f32.size() - at);
    std::memcpy(buf, f32.data() + at, m);
    at += m;
    return m;
  });
  std::string out;
  kvstate::StreamWriter w([&](const void* d, size_t k) -> Status {
    out.append(static_cast<const char*>(d), k);
    return Status::Ok();
  });
  kvstate::StreamHeader h;
  EXPECT_TRUE(r.ReadHeader(&h).ok());
  kvstate::KvGeometry g = h.geometry;
  const KvWireLayout from = g.wire();
  g.elem = elem;
  g.elem_v = elem_v;
  const KvWireLayout to = g.wire();
  EXPECT_TRUE(w.WriteHeader(h.model, g).ok());
  kvstate::BlockRecord b;
  std::vector<uint8_t> kv(static_cast<size_t>(to.block_bytes()));
  while (true) {
    StatusOr<bool> more = r.NextBlock(&b);
    if (!more.ok() || !*more) break;
    kvstate::ConvertKvBlock(from, b.kv, to, kv);
    if (corrupt) {
      const float neg = -1.0f;
      std::memcpy(kv.data(), &neg, 4);
      corrupt = false;
    }
    EXPECT_TRUE(w.WriteBlock(b.parent, b.hash, b.tokens, kv).ok());
  }
  EXPECT_TRUE(w.Finish().ok());
  return out;
}

// A CUDA context's FP8 E4M3 stream (elem 7; made here from a CPU F32
// stream by the stream's own rule, as the CPU has no FP8 pool) imports into
// a CPU context of another type converted: every value the F16 pool holds
// is F16(scale * e4m3), the prefix is reused and the context continues; a
// block with a negative scale is refused by name and nothing from it on is
// imported.
TEST(KvState, CpuImportsAnFp8StreamConverted) {
  const std::string tiny = SynthPath("tiny");  // head_dim 64: whole 32-value blocks
  Ctx a(tiny, {LLM_KV_F32});
  const std::vector<llm_token> conv = Converse(a.p, 40, 8);
  int32_t n = 0;
  const std::string f32 = Export(a.p, conv, &n);
  ASSERT_EQ(n, 32);
  const std::string fp8 = ConvertStream(f32, kKvWireFp8, 0, false);
  Ctx b(tiny, {LLM_KV_F16});
  int32_t got = 0;
  ASSERT_EQ(Import(b.p, fp8, &got), LLM_OK) << llm_last_error();
  ASSERT_EQ(got, 32);
  const std::string f16 = Export(b.p, conv, &n);
  ASSERT_EQ(n, 32);
  // the F16 pool's values against the FP8 stream's, decoded
  auto blocks = [](const std::string& st, kvstate::StreamHeader* h) {
    size_t at = 0;
    kvstate::StreamReader r([&](void* buf, size_t k) -> StatusOr<size_t> {
      const size_t m = std::min(k, st.size() - at);
      std::memcpy(buf, st.data() + at, m);
      at += m;
      return m;
    });
    EXPECT_TRUE(r.ReadHeader(h).ok());
    std::vector<kvstate::BlockRecord> out;
    kvstate::BlockRecord rec;
    while (true) {
      StatusOr<bool> more = r.NextBlock(&rec);
      EXPECT_TRUE(more.ok());
      if (!more.ok() || !*more) break;
      out.push_back(rec);
    }
    return out;
  };
  kvstate::StreamHeader h8, h16;
  const auto b8 = blocks(fp8, &h8), b16 = blocks(f16, &h16);
  ASSERT_EQ(h8.geometry.elem, kKvWireFp8);
  ASSERT_EQ(h16.geometry.elem, LLM_KV_F16);
  ASSERT_EQ(b8.size(), b16.size());
  const KvWireLayout w8 = h8.geometry.wire(), w16 = h16.geometry.wire();
  std::vector<float> x(static_cast<size_t>(w8.head_dim)), y(x.size());
  int64_t differ = 0, values = 0;
  for (size_t i = 0; i < b8.size(); ++i)
    for (int64_t l = 0; l < w8.n_layer; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t hh = 0; hh < w8.n_head_kv; ++hh)
          for (int64_t p = 0; p < w8.block_size; ++p) {
            kvstate::DecodeKvRow(w8, kv, b8[i].kv.data() + w8.TileOffset(l, kv, hh), p, x.data());
            kvstate::DecodeKvRow(w16, kv, b16[i].kv.data() + w16.TileOffset(l, kv, hh), p, y.data());
            for (size_t d = 0; d < x.size(); ++d, ++values) differ += F16ToF32(F32ToF16(x[d])) != y[d];
          }
  EXPECT_GT(values, 0);
  EXPECT_EQ(differ, 0);
  const ApiGreedyRun cont = ApiGreedy(b.p, conv, 8);
  ASSERT_EQ(cont.status, LLM_OK);
  EXPECT_EQ(cont.metrics.cached_prompt_tokens, 32);
  // a corrupt scale: refused, the context serves on
  Ctx c(tiny, {LLM_KV_F16});
  EXPECT_EQ(Import(c.p, ConvertStream(f32, kKvWireFp8, LLM_KV_F16, true), &got), LLM_ERR_KV_CORRUPT);
  EXPECT_NE(std::string(llm_last_error()).find("FP8 E4M3 K block holds a negative scale"), std::string::npos)
      << llm_last_error();
  EXPECT_LE(got, 0);
  EXPECT_EQ(ApiGreedy(c.p, conv, 2).status, LLM_OK);
  std::filesystem::remove(tiny);
}

// Regenerates the fuzz target's seed corpus (tests/fuzz/corpus/kv_reader):
//   build/bin/test_kv_state --gtest_also_run_disabled_tests --gtest_filter='*WriteFuzzSeeds'
TEST(KvState, DISABLED_WriteFuzzSeeds) {
  const std::string dir = std::string(LLM_SOURCE_DIR) + "/tests/fuzz/corpus/kv_reader";
  std::filesystem::create_directories(dir);
  auto save = [&](const std::string& name, const std::string& bytes) {
    std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  int32_t n = 0;
  save("stories-f16-1block", StoriesStream(LLM_KV_F16, 20, 4, &n));
  save("stories-q8-2blocks", StoriesStream(LLM_KV_Q8_0, 40, 4, &n));
  save("stories-f32-empty", StoriesStream(LLM_KV_F32, 8, 2, &n));
  const std::string g3 = SynthPath("tiny-gemma3");
  {
    Ctx c(g3, {LLM_KV_Q8_0});
    save("gemma3-q8-1block", Export(c.p, Converse(c.p, 20, 4), &n));
  }
  std::filesystem::remove(g3);
  const std::string tiny = SynthPath("tiny");  // head_dim 64: Q4_0 of rotated rows (elem 6)
  {
    Ctx c(tiny, {LLM_KV_Q4_0});
    save("tiny-q4-1block", Export(c.p, Converse(c.p, 20, 4), &n));
  }
  {
    Ctx c(tiny, {LLM_KV_Q4_0, 16, 0, LLM_KV_Q8_0});  // K and V apart: a VELM section
    save("tiny-q4k-q8v-1block", Export(c.p, Converse(c.p, 20, 4), &n));
  }
  {
    Ctx c(test::ModelPathF32(), {LLM_KV_Q8_0, 16, 0, LLM_KV_F16});
    save("stories-q8k-f16v-1block", Export(c.p, Converse(c.p, 20, 4), &n));
  }
  {
    // FP8 E4M3 (elem 7) is a CUDA pool's: its seeds are a CPU F32 stream's
    // blocks converted by the stream's own rule (one-type, K FP8 + V F16
    // with a VELM section, and one whose block 0 has a negative scale under
    // a right checksum)
    Ctx c(tiny, {LLM_KV_F32});
    const std::string f32 = Export(c.p, Converse(c.p, 40, 4), &n);
    save("tiny-fp8-2blocks", ConvertStream(f32, kKvWireFp8, 0, false));
    save("tiny-fp8k-f16v-2blocks", ConvertStream(f32, kKvWireFp8, LLM_KV_F16, false));
    save("tiny-fp8-negative-scale", ConvertStream(f32, kKvWireFp8, 0, true));
  }
  std::filesystem::remove(tiny);
}

}  // namespace
}  // namespace llm
