// The CUDA KV cache types (llm_ctx_params.kv_type: AUTO = BF16, F16, Q8_0,
// Q4_0 — GGUF blocks of Hadamard-rotated rows, as the CPU pool holds them),
// through the C API on a GPU or the emulator (-DLLM_CUDA=EMULATE); skips
// without either. The CPU backend with the same kv_type is the oracle:
//  - greedy continuations equal the CPU's up to the CUDA tests' near-tie
//    rule (support/api_greedy.h), on stories260K (head_dim 8: the decode
//    kernel for every token) and the synthesised `tiny` Llama (head_dim 64:
//    the tensor-core prefill kernel for the prompt);
//  - llm_stats.kv_pool_bytes is the type's bytes per token times the pool;
//  - a pool block is the KV wire block of its type (kernels/common.cuh), so
//    a stream moves between CUDA and CPU contexts of the same type without
//    conversion: the importer's re-export is byte-identical, and it
//    continues as a context of its own backend that computed the prompt;
//  - K and V of two types (kv_type_v, issue 32): each side stored and read
//    in its own type, the same checks for mixed pairs (greedy, bytes per
//    token as K's + V's, export/import), and the pairs' refusals.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "backend/kv_wire.h"
#include "kvstate/kv_convert.h"
#include "kvstate/kv_format.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/cuda_test_helpers.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "util/fp16.h"


// A whole-model comparison too slow for the emulator in CI: disabled there
// (run with --gtest_also_run_disabled_tests), always run on a GPU. CI fails
// on any skipped CUDA test, so it is not a GTEST_SKIP.
#if LLM_CUDA_EMULATED
#define LLM_EMU_OPT_IN(name) DISABLED_##name
#else
#define LLM_EMU_OPT_IN(name) name
#endif

namespace llm::test {
namespace {

constexpr float kNearTie = 0.1f;  // test_cuda_capi.cpp's

struct Ctx {
  llm_ctx* p = nullptr;
  Ctx(const std::string& path, int32_t backend, int32_t kv_type, int32_t n_blocks = 0,
      int32_t kv_type_v = LLM_KV_AUTO) {
    llm_ctx_params prm;
    llm_ctx_params_init(&prm);
    prm.model_path = path.c_str();
    prm.backend = backend;
    prm.n_threads = 2;
    prm.n_ctx = 256;
    prm.kv_type = kv_type;
    prm.kv_type_v = kv_type_v;
    prm.n_kv_blocks = n_blocks;
    EXPECT_EQ(llm_ctx_create(&prm, &p), LLM_OK) << llm_last_error();
  }
  ~Ctx() { llm_ctx_destroy(p); }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
};

std::vector<llm_token> Prompt(int n) {
  std::vector<llm_token> p{1};
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11) % 250 + 3);
  return p;
}

const char* TypeName(int32_t t) {
  return t == LLM_KV_F16    ? "F16"
         : t == LLM_KV_Q8_0 ? "Q8_0"
         : t == LLM_KV_Q4_0 ? "Q4_0"
         : t == LLM_KV_FP8_E4M3 ? "FP8_E4M3"
                                : "AUTO";
}

// "K/V" of a pair (V AUTO: K's type alone).
std::string PairName(int32_t k, int32_t v) {
  return v == LLM_KV_AUTO ? TypeName(k) : std::string(TypeName(k)) + "/" + TypeName(v);
}

// The KV stream's element of a kv_type (Q4_0's rotated rows are wire elem 6).
int32_t WireElem(int32_t t) { return t == LLM_KV_Q4_0 ? kKvWireQ4_0 : t == LLM_KV_FP8_E4M3 ? kKvWireFp8 : t; }

// The CPU oracle's type for a CUDA type: the same, but F16 for FP8 E4M3
// (the CPU has no FP8 pool) and for AUTO (CUDA's BF16; the CPU's AUTO is F16).
int32_t CpuOracleType(int32_t t) { return t == LLM_KV_FP8_E4M3 ? LLM_KV_F16 : t; }

// LLM_EMU_CC for the scope on the emulator (a device's own elsewhere).
struct EmuCc {
  explicit EmuCc(const char* cc) {
#if LLM_CUDA_EMULATED
    ::setenv("LLM_EMU_CC", cc, 1);
#else
    (void)cc;
#endif
  }
  ~EmuCc() {
#if LLM_CUDA_EMULATED
    ::unsetenv("LLM_EMU_CC");
#endif
  }
  EmuCc(const EmuCc&) = delete;
  EmuCc& operator=(const EmuCc&) = delete;
};

// The synthesised `tiny` model, removed at the end of the suite.
class CudaKvTypes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (HaveDevice()) tiny_ = new std::string(SynthTiny());
  }
  static void TearDownTestSuite() {
    if (tiny_ != nullptr) ::unlink(tiny_->c_str());
    delete tiny_;
    tiny_ = nullptr;
  }
  static std::string* tiny_;
};
std::string* CudaKvTypes::tiny_ = nullptr;

// CUDA with K kv_type and V kv_type_v against the CPU with each side's
// oracle type (CpuOracleType).
void GreedyAgainstCpu(const std::string& path, int32_t kv_type, int n_prompt, int32_t kv_type_v = LLM_KV_AUTO) {
  SCOPED_TRACE(PairName(kv_type, kv_type_v) + " " + path);
  Ctx cpu(path, LLM_BACKEND_CPU, CpuOracleType(kv_type), 0, CpuOracleType(kv_type_v)),
      gpu(path, LLM_BACKEND_CUDA, kv_type, 0, kv_type_v);
  ASSERT_NE(cpu.p, nullptr);
  ASSERT_NE(gpu.p, nullptr);
  const std::vector<llm_token> prompt = Prompt(n_prompt);
  const ApiGreedyRun want = ApiGreedy(cpu.p, prompt, 24);
  const ApiGreedyRun got = ApiGreedy(gpu.p, prompt, 24);
  ASSERT_EQ(want.status, LLM_OK) << llm_last_error();
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

// Q8_0 on stories260K is left out: its head_dim is 8, so a row's scale
// covers 8 values and the quantization noise is larger than the near-tie
// rule's 0.1 nats. Measured (40-token prompt, greedy): the CPU's own Q8_0
// leaves its F32 run at generated position 6 (the F32 run's token there
// loses 0.40 nats), and the two backends' Q8_0 rows differ by a step wherever
// their K/V (BF16 weights on CUDA) straddle a rounding boundary, so CUDA
// Q8_0 leaves CPU Q8_0 there too (gap 0.14 nats). head_dim 64 (`tiny`)
// stays within the rule.
TEST_F(CudaKvTypes, GreedyMatchesTheCpuOfTheSameType) {
  SKIP_WITHOUT_DEVICE();
  GreedyAgainstCpu(ModelPathF32(), LLM_KV_F16, 40);
  for (int32_t t : {LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0})
    GreedyAgainstCpu(*tiny_, t, 70);  // > 64 prompt tokens: two prefill tiles
}

// K and V of two types: the KV-store kernel writes each side in its type,
// both attention kernels widen K tiles by K's and V tiles by V's, and a
// Q4_0 side alone is rotated (a Q4_0 K rotates q and k, a Q4_0 V rotates v
// and each head's output back). On `tiny` (head_dim 64: Q4_0 and FP8 fit),
// against the CPU's same pair (FP8 and BF16: the CPU at F16, as above);
// FP8 at compute capability 8.9, the first that has it. A side read in the
// other side's type or layout, or rotated when it is not, breaks the
// continuation at once (a wrong tile size reads another head's rows).
TEST_F(CudaKvTypes, MixedPairsGreedyMatchTheCpu) {
  SKIP_WITHOUT_DEVICE();
  GreedyAgainstCpu(*tiny_, LLM_KV_Q8_0, 70, LLM_KV_F16);
  GreedyAgainstCpu(*tiny_, LLM_KV_F16, 70, LLM_KV_Q4_0);
  GreedyAgainstCpu(*tiny_, LLM_KV_Q4_0, 70, LLM_KV_Q8_0);
  const EmuCc ada("8.9");
  GreedyAgainstCpu(*tiny_, LLM_KV_AUTO, 70, LLM_KV_FP8_E4M3);  // K BF16 (CUDA's AUTO), V FP8
}

// Q4_0 on a real model (SmolLM2 135M Q4_1: head_dim 64, 9 heads over 3, 30
// layers), CUDA against the CPU, both with a Q4_0 cache: the device rotates
// q, k and v as the CPU does and turns each head's output back; without that
// last step the continuation breaks at once (mutant kv-q4-no-rotation-back).
// On the emulator it is disabled (opt-in: --gtest_also_run_disabled_tests):
// 30 layers of Q4_0 attention there took 235 s wall on the shared 2-core
// VM, past CI's budget; `tiny` above covers the same path in seconds. On a
// GPU it always runs.
TEST_F(CudaKvTypes, LLM_EMU_OPT_IN(SmolLM2Q4_0GreedyMatchesTheCpu)) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = RealModelPath(kSmolLM2);
  if (!std::filesystem::exists(path)) {
    if (std::getenv("CI")) FAIL() << path << " missing (scripts/fetch-models.sh)";
    GTEST_SKIP() << path << " not fetched";
  }
#if LLM_CUDA_EMULATED && (defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
  const int n_steps = 2;
#elif LLM_CUDA_EMULATED
  const int n_steps = 5;
#else
  const int n_steps = 32;
#endif
  Ctx cpu(path, LLM_BACKEND_CPU, LLM_KV_Q4_0), gpu(path, LLM_BACKEND_CUDA, LLM_KV_Q4_0);
  ASSERT_NE(cpu.p, nullptr);
  ASSERT_NE(gpu.p, nullptr);
  const std::string text = "Once upon a time, in a small village by the sea, there lived an old fisherman who";
  std::vector<llm_token> prompt(64);
  int32_t n_prompt = 0;
  ASSERT_EQ(llm_tokenize(cpu.p, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, prompt.data(), 64, &n_prompt),
            LLM_OK);
  prompt.resize(static_cast<size_t>(n_prompt));
  const ApiGreedyRun want = ApiGreedy(cpu.p, prompt, n_steps);
  const ApiGreedyRun got = ApiGreedy(gpu.p, prompt, n_steps);
  ASSERT_EQ(want.status, LLM_OK);
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

// BF16 and F16 rows take 2 head_dim bytes, Q8_0 rows head_dim + 4 (int8 and
// one F32 scale), Q4_0 rows head_dim / 32 blocks of 18 bytes (4.5 bits a
// value), FP8 E4M3 rows head_dim / 32 blocks of 36 bytes (9 bits a value);
// the pool is kv_blocks_total blocks plus the graphs' scratch block, each
// n_layer x n_head_kv x block_size rows of K in K's type and as many of V
// in V's (kv_type_v: a mixed pair's token is K's row + V's row).
TEST_F(CudaKvTypes, BytesPerTokenFollowTheType) {
  SKIP_WITHOUT_DEVICE();
  const int32_t pairs[][2] = {{LLM_KV_AUTO, LLM_KV_AUTO},      {LLM_KV_F16, LLM_KV_AUTO},
                              {LLM_KV_Q8_0, LLM_KV_AUTO},      {LLM_KV_Q4_0, LLM_KV_AUTO},
                              {LLM_KV_FP8_E4M3, LLM_KV_AUTO},  {LLM_KV_Q8_0, LLM_KV_F16},
                              {LLM_KV_F16, LLM_KV_Q4_0},       {LLM_KV_Q4_0, LLM_KV_Q8_0},
                              {LLM_KV_AUTO, LLM_KV_FP8_E4M3},  {LLM_KV_FP8_E4M3, LLM_KV_Q4_0}};
  for (const auto& [k, v] : pairs) {
    SCOPED_TRACE(PairName(k, v));
    Ctx c(*tiny_, LLM_BACKEND_CUDA, k, 32, v);
    ASSERT_NE(c.p, nullptr);
    llm_model_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(llm_model_get_info(c.p, &info), LLM_OK);
    llm_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(llm_get_stats(c.p, &s), LLM_OK);
    ASSERT_EQ(s.kv_blocks_total, 32);
    const uint64_t hd = static_cast<uint64_t>(info.n_embd / info.n_head);
    auto row = [&](int32_t t) -> uint64_t {
      return t == LLM_KV_Q8_0       ? hd + 4
             : t == LLM_KV_Q4_0     ? hd / 32 * 18
             : t == LLM_KV_FP8_E4M3 ? hd / 32 * 36  // 9 bits a value: a byte and a 32nd of an F32
                                    : 2 * hd;
    };
    const uint64_t per_token =
        static_cast<uint64_t>(info.n_layer) * info.n_head_kv * (row(k) + row(v == LLM_KV_AUTO ? k : v));
    EXPECT_EQ(s.kv_pool_bytes, (32u + 1u) * 16u * per_token);
    EXPECT_EQ(s.kv_bytes, s.kv_pool_bytes);
  }
  // F32 stays the CPU's, on either side: refused with a message naming the
  // side, not computed.
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  llm_ctx* ctx = nullptr;
  for (const auto& [k, v, name] : {std::tuple{LLM_KV_F32, LLM_KV_AUTO, "kv_type F32"},
                                   std::tuple{LLM_KV_Q8_0, LLM_KV_F32, "kv_type_v F32"}}) {
    p.kv_type = k;
    p.kv_type_v = v;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED) << name;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find(name), std::string::npos) << llm_last_error();
  }
}

// ---------------------------------------------------------------- export / import

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

std::string Export(llm_ctx* ctx, const std::vector<llm_token>& tokens, int32_t* n) {
  std::string out;
  *n = -1;
  EXPECT_EQ(llm_kv_export(ctx, tokens.data(), static_cast<int32_t>(tokens.size()), 0, WriteToString, &out, n), LLM_OK)
      << llm_last_error();
  return out;
}

// The stream's K element (kv = 0) or V element (kv = 1).
int32_t StreamElem(const std::string& s, int64_t kv = 0) {
  size_t at = 0;
  kvstate::StreamReader r([&](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t k = std::min(n, s.size() - at);
    std::memcpy(buf, s.data() + at, k);
    at += k;
    return k;
  });
  kvstate::StreamHeader h;
  EXPECT_TRUE(r.ReadHeader(&h).ok());
  return h.geometry.wire().Elem(kv);
}

// `from` computes a conversation and exports it; `to` (the other backend,
// same kv_type and kv_type_v) imports it, re-exports the same bytes and
// continues as a context of its own backend that computed the prompt.
void MoveBetweenBackends(int32_t kv_type, int32_t from_backend, const std::string& path,
                         int32_t kv_type_v = LLM_KV_AUTO) {
  const int32_t to_backend = from_backend == LLM_BACKEND_CUDA ? LLM_BACKEND_CPU : LLM_BACKEND_CUDA;
  SCOPED_TRACE(PairName(kv_type, kv_type_v) + (from_backend == LLM_BACKEND_CUDA ? " CUDA -> CPU" : " CPU -> CUDA"));
  Ctx from(path, from_backend, kv_type, 0, kv_type_v);
  ASSERT_NE(from.p, nullptr);
  std::vector<llm_token> conv = Prompt(40);
  const ApiGreedyRun first = ApiGreedy(from.p, conv, 24);
  ASSERT_EQ(first.status, LLM_OK);
  conv.insert(conv.end(), first.tokens.begin(), first.tokens.end());
  int32_t n = 0;
  const std::string stream = Export(from.p, conv, &n);
  ASSERT_EQ(n, 48);
  EXPECT_EQ(StreamElem(stream), WireElem(kv_type));
  EXPECT_EQ(StreamElem(stream, 1), WireElem(kv_type_v == LLM_KV_AUTO ? kv_type : kv_type_v));

  Ctx to(path, to_backend, kv_type, 0, kv_type_v);
  ASSERT_NE(to.p, nullptr);
  MemReader r{&stream};
  int32_t n_in = -1;
  ASSERT_EQ(llm_kv_import(to.p, 0, ReadFromString, &r, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  int32_t n_again = 0;
  EXPECT_TRUE(Export(to.p, conv, &n_again) == stream) << "the importer's re-export differs from the stream";

  Ctx computed(path, to_backend, kv_type, 0, kv_type_v);
  const ApiGreedyRun want = ApiGreedy(computed.p, conv, 16);
  const ApiGreedyRun got = ApiGreedy(to.p, conv, 16);
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.metrics.cached_prompt_tokens, 48) << "the imported prefix was not reused";
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

TEST_F(CudaKvTypes, ExportImportCarryTheType) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t t : {LLM_KV_F16, LLM_KV_Q8_0})
    for (int32_t from : {LLM_BACKEND_CUDA, LLM_BACKEND_CPU}) MoveBetweenBackends(t, from, ModelPathF32());
  // Q4_0 needs head_dim % 32 == 0 (stories260K's is 8): `tiny`. The blocks
  // are the rotated rows on both sides, so the stream moves as it is.
  for (int32_t from : {LLM_BACKEND_CUDA, LLM_BACKEND_CPU}) MoveBetweenBackends(LLM_KV_Q4_0, from, *tiny_);
}

// A mixed cache's stream (GEOM's K type, VELM's V type) moves between a CPU
// and a CUDA context of the same pair as it is, both ways: the CUDA pool's
// block is the wire block of the pair (K tiles of K's size, then V's).
TEST_F(CudaKvTypes, MixedExportImportCarryBothTypes) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t from : {LLM_BACKEND_CPU, LLM_BACKEND_CUDA}) {
    MoveBetweenBackends(LLM_KV_Q8_0, from, ModelPathF32(), LLM_KV_F16);
    MoveBetweenBackends(LLM_KV_F16, from, *tiny_, LLM_KV_Q4_0);  // Q4_0 needs head_dim % 32 == 0: `tiny`
  }
}

// A model whose head_dim holds no whole Q4_0 block (stories260K: 8) is
// refused with the reason, as on the CPU, on either side (a Q4_0 V under
// an F16 K too, named as V's).
TEST_F(CudaKvTypes, Q4_0RefusedWhereBlocksDoNotFit) {
  SKIP_WITHOUT_DEVICE();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  for (const auto& [k, v, name] : {std::tuple{LLM_KV_Q4_0, LLM_KV_AUTO, "Q4_0 KV cache needs head_dim"},
                                   std::tuple{LLM_KV_F16, LLM_KV_Q4_0, "Q4_0 V KV cache needs head_dim"}}) {
    p.kv_type = k;
    p.kv_type_v = v;
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED) << name;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find(name), std::string::npos) << llm_last_error();
  }
}

// K and V of two types whose tiles would leave V's plane off the alignment
// its loads need (Q8_0 K of 68-byte tiles before F16 V on `tiny`, 2 kv heads,
// at kv_block_size 1: V at 136 bytes) are refused, naming the block sizes
// that fit; the same pair at kv_block_size 8 runs.
TEST_F(CudaKvTypes, MixedPairRefusedWhereItsPlanesWouldBeMisaligned) {
  SKIP_WITHOUT_DEVICE();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = tiny_->c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.kv_type = LLM_KV_Q8_0;
  p.kv_type_v = LLM_KV_F16;
  p.n_ctx = 64;
  p.kv_block_size = 1;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("kv_block_size that is a multiple of 8"), std::string::npos)
      << llm_last_error();
  p.kv_block_size = 8;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
}

// ---------------------------------------------------------------- FP8 E4M3

// The acceptance rule: the CUDA FP8 E4M3 cache's greedy continuation
// equals the CPU's with an F16 cache (the oracle: the CPU has no FP8 pool)
// up to the near-tie rule, on `tiny` (the tensor-core prefill kernel for
// the 70-token prompt, the decode kernel after).
TEST_F(CudaKvTypes, Fp8GreedyMatchesTheCpuAtF16) {
  SKIP_WITHOUT_DEVICE();
  GreedyAgainstCpu(*tiny_, LLM_KV_FP8_E4M3, 70);  // the CPU oracle: F16 (CpuOracleType)
}

// SmolLM2 (a real model's K/V outlier channels) with an FP8 cache against
// the CPU at F16; opt-in on the emulator as the Q4_0 run above is.
TEST_F(CudaKvTypes, LLM_EMU_OPT_IN(SmolLM2Fp8GreedyMatchesTheCpuAtF16)) {
  SKIP_WITHOUT_DEVICE();
#if LLM_CUDA_EMULATED
  const int n_steps = 5;
#else
  const int n_steps = 32;
#endif
  const std::string path = RealModelPath(kSmolLM2);
  if (!std::filesystem::exists(path)) {
    if (std::getenv("CI")) FAIL() << path << " missing (scripts/fetch-models.sh)";
    GTEST_SKIP() << path << " not fetched";
  }
  Ctx cpu(path, LLM_BACKEND_CPU, LLM_KV_F16), gpu(path, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3);
  ASSERT_NE(cpu.p, nullptr);
  ASSERT_NE(gpu.p, nullptr);
  const std::string text = "Once upon a time, in a small village by the sea, there lived an old fisherman who";
  std::vector<llm_token> prompt(64);
  int32_t n_prompt = 0;
  ASSERT_EQ(llm_tokenize(cpu.p, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, prompt.data(), 64, &n_prompt),
            LLM_OK);
  prompt.resize(static_cast<size_t>(n_prompt));
  const ApiGreedyRun want = ApiGreedy(cpu.p, prompt, n_steps);
  const ApiGreedyRun got = ApiGreedy(gpu.p, prompt, n_steps);
  ASSERT_EQ(want.status, LLM_OK);
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

// A pool's blocks go through the prefix cache and copy-on-write whatever
// their types: a second request with the same prompt reuses its full blocks
// and continues with the same tokens; n = 3 greedy samples share the
// prompt's blocks (the last one partial, so each sample's first write
// copies it) and each equals the single run.
void PrefixCacheAndCopyOnWrite(const std::string& path, int32_t kv_type, int32_t kv_type_v = LLM_KV_AUTO) {
  SCOPED_TRACE(PairName(kv_type, kv_type_v));
  Ctx c(path, LLM_BACKEND_CUDA, kv_type, 0, kv_type_v);
  ASSERT_NE(c.p, nullptr);
  std::vector<llm_token> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<llm_token>(1 + (i * 37) % 500));  // 2 full blocks + 5
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
    EXPECT_EQ(llm_submit(c.p, &r, &id), LLM_OK) << llm_last_error();
    return WaitFor(c.p, id, n, 300);
  };
  const auto first = submit(1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].tokens.size(), 10u);
  EXPECT_EQ(first[0].metrics.cached_prompt_tokens, 0);
  const auto again = submit(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(again[0].metrics.cached_prompt_tokens, 32);
  // Tokens equal; log-probabilities to 1e-2: the cached run computes only
  // the prompt's last partial block, a batch of another shape than the
  // first run's, so the GEMMs' sums round in another order (any CUDA pool
  // type; measured 0.0054 at most here)
  auto same = [&](const SeqResult& a) {
    EXPECT_EQ(a.tokens, first[0].tokens);
    ASSERT_EQ(a.logprobs.size(), first[0].logprobs.size());
    for (size_t i = 0; i < a.logprobs.size(); ++i) EXPECT_NEAR(a.logprobs[i], first[0].logprobs[i], 1e-2) << i;
  };
  same(again[0]);
  const auto three = submit(3);
  ASSERT_EQ(three.size(), 3u);
  for (const auto& s : three) same(s);
}

TEST_F(CudaKvTypes, Fp8PrefixCacheAndCopyOnWrite) {
  SKIP_WITHOUT_DEVICE();
  PrefixCacheAndCopyOnWrite(*tiny_, LLM_KV_FP8_E4M3);
}

// A mixed block (K Q4_0 tiles, then V Q8_0 tiles of another size) is copied
// and shared whole, as one block.
TEST_F(CudaKvTypes, MixedPrefixCacheAndCopyOnWrite) {
  SKIP_WITHOUT_DEVICE();
  PrefixCacheAndCopyOnWrite(*tiny_, LLM_KV_Q4_0, LLM_KV_Q8_0);
}

// The KV stream carries FP8 as elem 7: CUDA -> CUDA moves the blocks as
// they are (the re-export is byte-identical); CUDA -> CPU (F16: the CPU has
// no FP8 pool) converts them exactly (scale * e4m3 is an F16 value's
// neighbourhood: rounded once) and the CPU continues as the CPU that
// computed the prompt, up to the near-tie rule; CPU F16 -> CUDA FP8
// quantizes on import (the pool's own rule) and continues as the CUDA FP8
// context that computed the prompt.
std::vector<kvstate::BlockRecord> Blocks(const std::string& s, kvstate::StreamHeader* h) {
  size_t at = 0;
  kvstate::StreamReader r([&](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t k = std::min(n, s.size() - at);
    std::memcpy(buf, s.data() + at, k);
    at += k;
    return k;
  });
  EXPECT_TRUE(r.ReadHeader(h).ok());
  std::vector<kvstate::BlockRecord> out;
  kvstate::BlockRecord b;
  while (true) {
    StatusOr<bool> more = r.NextBlock(&b);
    EXPECT_TRUE(more.ok()) << more.status().message();
    if (!more.ok() || !*more) break;
    out.push_back(b);
  }
  return out;
}

// Imports `stream` into `to` and returns `to`'s export of `conv` (before it
// computes anything more).
std::string ImportAndExport(llm_ctx* to, const std::string& stream, const std::vector<llm_token>& conv) {
  MemReader r{&stream};
  int32_t n_in = -1;
  EXPECT_EQ(llm_kv_import(to, 0, ReadFromString, &r, &n_in), LLM_OK) << llm_last_error();
  EXPECT_EQ(n_in, 48);
  int32_t n = 0;
  return Export(to, conv, &n);
}

// Continues `conv` in `to` (which imported its prefix) and in a context
// `computed` of the importer's kind that computed the prompt itself.
void Continue(llm_ctx* to, llm_ctx* computed, const std::vector<llm_token>& conv) {
  const ApiGreedyRun want = ApiGreedy(computed, conv, 16);
  const ApiGreedyRun got = ApiGreedy(to, conv, 16);
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.metrics.cached_prompt_tokens, 48) << "the imported prefix was not reused";
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

TEST_F(CudaKvTypes, Fp8ExportImportCarryTheType) {
  SKIP_WITHOUT_DEVICE();
  std::vector<llm_token> conv = Prompt(40);
  std::string fp8;
  {
    Ctx from(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3);
    ASSERT_NE(from.p, nullptr);
    const ApiGreedyRun first = ApiGreedy(from.p, conv, 24);
    ASSERT_EQ(first.status, LLM_OK);
    conv.insert(conv.end(), first.tokens.begin(), first.tokens.end());
    int32_t n = 0;
    fp8 = Export(from.p, conv, &n);
    ASSERT_EQ(n, 48);
    EXPECT_EQ(StreamElem(fp8), kKvWireFp8);
  }
  {  // CUDA FP8 -> CUDA FP8: the blocks as they are
    SCOPED_TRACE("CUDA FP8 -> CUDA FP8");
    Ctx to(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3), computed(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3);
    EXPECT_TRUE(ImportAndExport(to.p, fp8, conv) == fp8) << "the importer's re-export differs from the stream";
    Continue(to.p, computed.p, conv);
  }
  {  // CUDA FP8 -> CPU F16: every value is F16(scale * e4m3)
    SCOPED_TRACE("CUDA FP8 -> CPU F16");
    Ctx to(*tiny_, LLM_BACKEND_CPU, LLM_KV_F16), computed(*tiny_, LLM_BACKEND_CPU, LLM_KV_F16);
    const std::string f16 = ImportAndExport(to.p, fp8, conv);
    Continue(to.p, computed.p, conv);
    kvstate::StreamHeader hf, hh;
    const auto bf = Blocks(fp8, &hf), bh = Blocks(f16, &hh);
    ASSERT_EQ(hh.geometry.elem, LLM_KV_F16);
    ASSERT_EQ(bf.size(), bh.size());
    const KvWireLayout wf = hf.geometry.wire(), wh = hh.geometry.wire();
    std::vector<float> a(static_cast<size_t>(wf.head_dim)), b(a.size());
    int64_t differ = 0;
    for (size_t i = 0; i < bf.size(); ++i)
      for (int64_t l = 0; l < wf.n_layer; ++l)
        for (int64_t kv = 0; kv < 2; ++kv)
          for (int64_t h = 0; h < wf.n_head_kv; ++h)
            for (int64_t p = 0; p < wf.block_size; ++p) {
              kvstate::DecodeKvRow(wf, kv, bf[i].kv.data() + wf.TileOffset(l, kv, h), p, a.data());
              kvstate::DecodeKvRow(wh, kv, bh[i].kv.data() + wh.TileOffset(l, kv, h), p, b.data());
              for (size_t d = 0; d < a.size(); ++d) differ += F16ToF32(F32ToF16(a[d])) != b[d];
            }
    EXPECT_EQ(differ, 0) << "values the conversion did not carry as F16(scale * e4m3)";
  }
  {  // CPU F16 -> CUDA FP8: quantized on import by the pool's rule
    SCOPED_TRACE("CPU F16 -> CUDA FP8");
    Ctx cpu(*tiny_, LLM_BACKEND_CPU, LLM_KV_F16);
    // the conversation but its last token as the prompt: 63 positions computed, 3 full blocks
    ASSERT_EQ(ApiGreedy(cpu.p, std::vector<llm_token>(conv.begin(), conv.end() - 1), 1).status, LLM_OK);
    int32_t n = 0;
    const std::string f16 = Export(cpu.p, conv, &n);
    ASSERT_EQ(n, 48);
    Ctx to(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3), computed(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3);
    EXPECT_EQ(StreamElem(ImportAndExport(to.p, f16, conv)), kKvWireFp8);
    Continue(to.p, computed.p, conv);
  }
}

// What an FP8 cache cannot run on is refused with the reason, on either
// side: a device below compute capability 8.9 (the emulator reporting 8.6:
// LLM_EMU_CC), a head_dim that holds no whole 32-value block (stories260K:
// 8). An FP8 side beside another type runs where FP8 alone does.
TEST_F(CudaKvTypes, Fp8Refusals) {
  SKIP_WITHOUT_DEVICE();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = tiny_->c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.kv_type = LLM_KV_FP8_E4M3;
  llm_ctx* ctx = nullptr;
#if LLM_CUDA_EMULATED
  ::setenv("LLM_EMU_CC", "8.6", 1);
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  const std::string msg = llm_last_error();
  EXPECT_NE(msg.find("compute capability 8.9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is 8.6"), std::string::npos) << msg;
  p.kv_type = LLM_KV_Q8_0;  // the other types run there
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
  ctx = nullptr;
  p.kv_type = LLM_KV_F16;  // an FP8 V alone: refused as V's
  p.kv_type_v = LLM_KV_FP8_E4M3;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("kv_type_v fp8_e4m3 needs compute capability 8.9"), std::string::npos)
      << llm_last_error();
  p.kv_type_v = LLM_KV_AUTO;
  ::setenv("LLM_EMU_CC", "8.9", 1);  // Ada: the first with the conversion
  p.kv_type = LLM_KV_FP8_E4M3;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
  ctx = nullptr;
  p.kv_type_v = LLM_KV_F16;  // and beside another type
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
  ctx = nullptr;
  p.kv_type_v = LLM_KV_AUTO;
  ::unsetenv("LLM_EMU_CC");
#endif
  const std::string stories = ModelPathF32();
  p.model_path = stories.c_str();
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("FP8 E4M3 KV cache needs head_dim a multiple of 32"),
            std::string::npos)
      << llm_last_error();
  p.kv_type = LLM_KV_Q8_0;  // an FP8 V alone: refused as V's
  p.kv_type_v = LLM_KV_FP8_E4M3;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("FP8 E4M3 V KV cache needs head_dim a multiple of 32"),
            std::string::npos)
      << llm_last_error();
}

// A stream whose FP8 block holds a scale that is NaN, infinite or negative,
// or the E4M3 NaN code, is refused (KV_CORRUPT, naming the block) by a CUDA
// FP8 importer and by a CPU importer that would convert it, with its
// checksum right (rewritten here): nothing from that block on is imported,
// and the contexts serve on.
TEST_F(CudaKvTypes, Fp8RefusesCorruptScales) {
  SKIP_WITHOUT_DEVICE();
  Ctx from(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3);
  ASSERT_NE(from.p, nullptr);
  std::vector<llm_token> conv = Prompt(40);
  ASSERT_EQ(ApiGreedy(from.p, conv, 8).status, LLM_OK);
  int32_t n = 0;
  const std::string good = Export(from.p, conv, &n);
  ASSERT_EQ(n, 32);
  // rewrites the stream with block 1's byte `at` (of its KV) set by `edit`
  auto rewrite = [&](size_t at, const void* bytes, size_t len) {
    size_t pos = 0;
    kvstate::StreamReader r([&](void* buf, size_t k) -> StatusOr<size_t> {
      const size_t m = std::min(k, good.size() - pos);
      std::memcpy(buf, good.data() + pos, m);
      pos += m;
      return m;
    });
    std::string out;
    kvstate::StreamWriter w([&](const void* d, size_t k) -> Status {
      out.append(static_cast<const char*>(d), k);
      return Status::Ok();
    });
    kvstate::StreamHeader h;
    EXPECT_TRUE(r.ReadHeader(&h).ok());
    EXPECT_EQ(h.geometry.elem, kKvWireFp8);
    EXPECT_TRUE(w.WriteHeader(h.model, h.geometry).ok());
    kvstate::BlockRecord b;
    for (int i = 0;; ++i) {
      StatusOr<bool> more = r.NextBlock(&b);
      EXPECT_TRUE(more.ok());
      if (!more.ok() || !*more) break;
      if (i == 1) std::memcpy(b.kv.data() + at, bytes, len);
      EXPECT_TRUE(w.WriteBlock(b.parent, b.hash, b.tokens, b.kv).ok());
    }
    EXPECT_TRUE(w.Finish().ok());
    return out;
  };
  Ctx cuda_to(*tiny_, LLM_BACKEND_CUDA, LLM_KV_FP8_E4M3), cpu_to(*tiny_, LLM_BACKEND_CPU, LLM_KV_F16);
  ASSERT_NE(cuda_to.p, nullptr);
  ASSERT_NE(cpu_to.p, nullptr);
  const float bad[] = {std::nanf(""), std::numeric_limits<float>::infinity(), -0.25f};
  std::vector<std::string> streams;
  for (float f : bad) streams.push_back(rewrite(36 * 3, &f, 4));  // row 1 block 1 scale (layer 0, K, head 0)
  const uint8_t nan_code = 0x7f;
  streams.push_back(rewrite(36 + 4 + 9, &nan_code, 1));
  for (llm_ctx* to : {cuda_to.p, cpu_to.p})
    for (const std::string& x : streams) {
      MemReader r{&x};
      int32_t n_in = -1;
      EXPECT_EQ(llm_kv_import(to, 0, ReadFromString, &r, &n_in), LLM_ERR_KV_CORRUPT);
      const std::string msg = llm_last_error();
      EXPECT_NE(msg.find("block 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("FP8 E4M3 K block holds"), std::string::npos) << msg;
      EXPECT_LE(n_in, 16) << "a block past the corrupt one was imported";
    }
  for (llm_ctx* to : {cuda_to.p, cpu_to.p}) EXPECT_EQ(ApiGreedy(to, Prompt(20), 4).status, LLM_OK);
}

}  // namespace
}  // namespace llm::test
