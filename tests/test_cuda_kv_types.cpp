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
//    continues as a context of its own backend that computed the prompt.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/kv_wire.h"
#include "kvstate/kv_format.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/cuda_test_helpers.h"
#include "support/real_models.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

constexpr float kNearTie = 0.1f;  // test_cuda_capi.cpp's

struct Ctx {
  llm_ctx* p = nullptr;
  Ctx(const std::string& path, int32_t backend, int32_t kv_type, int32_t n_blocks = 0) {
    llm_ctx_params prm;
    llm_ctx_params_init(&prm);
    prm.model_path = path.c_str();
    prm.backend = backend;
    prm.n_threads = 2;
    prm.n_ctx = 256;
    prm.kv_type = kv_type;
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
  return t == LLM_KV_F16 ? "F16" : t == LLM_KV_Q8_0 ? "Q8_0" : t == LLM_KV_Q4_0 ? "Q4_0" : "AUTO";
}

// The KV stream's element of a kv_type (Q4_0's rotated rows are wire elem 6).
int32_t WireElem(int32_t t) { return t == LLM_KV_Q4_0 ? kKvWireQ4_0 : t; }

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

void GreedyAgainstCpu(const std::string& path, int32_t kv_type, int n_prompt) {
  SCOPED_TRACE(std::string(TypeName(kv_type)) + " " + path);
  Ctx cpu(path, LLM_BACKEND_CPU, kv_type), gpu(path, LLM_BACKEND_CUDA, kv_type);
  ASSERT_NE(cpu.p, nullptr);
  ASSERT_NE(gpu.p, nullptr);
  const std::vector<llm_token> prompt = Prompt(n_prompt);
  const ApiGreedyRun want = ApiGreedy(cpu.p, prompt, 24);
  const ApiGreedyRun got = ApiGreedy(gpu.p, prompt, 24);
  ASSERT_EQ(want.status, LLM_OK);
  ASSERT_EQ(got.status, LLM_OK);
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

// Q4_0 on a real model (SmolLM2 135M Q4_1: head_dim 64, 9 heads over 3, 30
// layers), CUDA against the CPU, both with a Q4_0 cache: the device rotates
// q, k and v as the CPU does and turns each head's output back; without that
// last step the continuation breaks at once (mutant kv-q4-no-rotation-back).
// On the emulator it is opt-in (LLM_CUDA_SLOW_TESTS=1): 30 layers of Q4_0
// attention there took 235 s wall on the shared 2-core VM, past CI's budget;
// `tiny` above covers the same path in seconds.
TEST_F(CudaKvTypes, SmolLM2Q4_0GreedyMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
#if LLM_CUDA_EMULATED
  if (std::getenv("LLM_CUDA_SLOW_TESTS") == nullptr || std::string(std::getenv("LLM_CUDA_SLOW_TESTS")) != "1")
    GTEST_SKIP() << "SmolLM2 on the emulator: set LLM_CUDA_SLOW_TESTS=1";
#endif
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
// value); the pool is kv_blocks_total blocks plus the graphs' scratch
// block, each n_layer x (K, V) x n_head_kv x block_size rows.
TEST_F(CudaKvTypes, BytesPerTokenFollowTheType) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t t : {LLM_KV_AUTO, LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0}) {
    SCOPED_TRACE(TypeName(t));
    Ctx c(*tiny_, LLM_BACKEND_CUDA, t, 32);
    ASSERT_NE(c.p, nullptr);
    llm_model_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(llm_model_get_info(c.p, &info), LLM_OK);
    llm_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(llm_get_stats(c.p, &s), LLM_OK);
    ASSERT_EQ(s.kv_blocks_total, 32);
    const uint64_t hd = static_cast<uint64_t>(info.n_embd / info.n_head);
    const uint64_t row = t == LLM_KV_Q8_0 ? hd + 4 : t == LLM_KV_Q4_0 ? hd / 32 * 18 : 2 * hd;
    const uint64_t per_token = static_cast<uint64_t>(info.n_layer) * 2 * info.n_head_kv * row;
    EXPECT_EQ(s.kv_pool_bytes, (32u + 1u) * 16u * per_token);
    EXPECT_EQ(s.kv_bytes, s.kv_pool_bytes);
  }
  // F32 stays the CPU's: refused with a message, not computed.
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.kv_type = LLM_KV_F32;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("F32"), std::string::npos) << llm_last_error();
  // K and V of different types (kv_type_v) are the CPU's: the CUDA pool
  // holds one type, so a difference is refused naming both; kv_type_v of
  // K's own type is the one-type pool.
  for (int32_t v : {LLM_KV_F16, LLM_KV_Q4_0}) {
    p.kv_type = LLM_KV_Q8_0;
    p.kv_type_v = v;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find("kv_type q8_0 with kv_type_v"), std::string::npos) << llm_last_error();
  }
  p.kv_type_v = LLM_KV_Q8_0;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
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

int32_t StreamElem(const std::string& s) {
  size_t at = 0;
  kvstate::StreamReader r([&](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t k = std::min(n, s.size() - at);
    std::memcpy(buf, s.data() + at, k);
    at += k;
    return k;
  });
  kvstate::StreamHeader h;
  EXPECT_TRUE(r.ReadHeader(&h).ok());
  return h.geometry.elem;
}

// `from` computes a conversation and exports it; `to` (the other backend,
// same kv_type) imports it, re-exports the same bytes and continues as a
// context of its own backend that computed the prompt.
void MoveBetweenBackends(int32_t kv_type, int32_t from_backend, const std::string& path) {
  const int32_t to_backend = from_backend == LLM_BACKEND_CUDA ? LLM_BACKEND_CPU : LLM_BACKEND_CUDA;
  SCOPED_TRACE(std::string(TypeName(kv_type)) + (from_backend == LLM_BACKEND_CUDA ? " CUDA -> CPU" : " CPU -> CUDA"));
  Ctx from(path, from_backend, kv_type);
  ASSERT_NE(from.p, nullptr);
  std::vector<llm_token> conv = Prompt(40);
  const ApiGreedyRun first = ApiGreedy(from.p, conv, 24);
  ASSERT_EQ(first.status, LLM_OK);
  conv.insert(conv.end(), first.tokens.begin(), first.tokens.end());
  int32_t n = 0;
  const std::string stream = Export(from.p, conv, &n);
  ASSERT_EQ(n, 48);
  EXPECT_EQ(StreamElem(stream), WireElem(kv_type));

  Ctx to(path, to_backend, kv_type);
  ASSERT_NE(to.p, nullptr);
  MemReader r{&stream};
  int32_t n_in = -1;
  ASSERT_EQ(llm_kv_import(to.p, 0, ReadFromString, &r, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  int32_t n_again = 0;
  EXPECT_TRUE(Export(to.p, conv, &n_again) == stream) << "the importer's re-export differs from the stream";

  Ctx computed(path, to_backend, kv_type);
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

// A model whose head_dim holds no whole Q4_0 block (stories260K: 8) is
// refused with the reason, as on the CPU.
TEST_F(CudaKvTypes, Q4_0RefusedWhereBlocksDoNotFit) {
  SKIP_WITHOUT_DEVICE();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.kv_type = LLM_KV_Q4_0;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("head_dim"), std::string::npos) << llm_last_error();
}

}  // namespace
}  // namespace llm::test
