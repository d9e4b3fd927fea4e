// KV state that leaves a CUDA context (issue 30), through the C API, on a GPU
// or the emulator (-DLLM_CUDA=EMULATE); skips without either.
//
// The CUDA pool is BF16 and its wire layout is the pool's own
// (cuda_kv_io.cpp), so:
//  - CUDA -> CUDA: the importer continues exactly as the exporter (same
//    KV bytes, same kernels), and its re-export is byte-identical;
//  - CPU -> CUDA and CUDA -> CPU convert (F32/F16 -> BF16 rounds to
//    nearest even; BF16 -> F32/F16 is exact): the values are checked
//    against the source, and the importer's greedy continuation against a
//    context of its own backend that computed the prompt, by the CUDA
//    tests' near-tie rule (support/api_greedy.h);
//  - the host tier (page-locked, copies on a copy stream: cuda_kv_host.h)
//    and the disk tier give an evicted prefix back (cached-token count) and
//    the continuation is the cold run's.
// Partial offload (a model split between CUDA and the CPU) still refuses.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/kv_wire.h"
#include "kvstate/kv_convert.h"
#include "kvstate/kv_format.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/cuda_test_helpers.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

namespace fs = std::filesystem;
constexpr float kNearTie = 0.1f;  // test_cuda_capi.cpp's

struct Opts {
  int32_t backend = LLM_BACKEND_CUDA;
  int32_t kv_type = LLM_KV_AUTO;
  int32_t n_blocks = 0;
  uint64_t host_bytes = 0;
  std::string disk_dir;
  int32_t n_gpu_layers = -1;  // every layer on the GPU (0 would be the CPU backend)
};

// A CUDA context (every layer on the device) with a pool of n_blocks (0:
// the default), a host tier of host_bytes and a disk tier in dir.
Opts Cuda(int32_t n_blocks = 0, uint64_t host_bytes = 0, const std::string& dir = "") {
  Opts o;
  o.n_blocks = n_blocks;
  o.host_bytes = host_bytes;
  o.disk_dir = dir;
  return o;
}
Opts Cpu(int32_t kv_type) {
  Opts o;
  o.backend = LLM_BACKEND_CPU;
  o.kv_type = kv_type;
  return o;
}
Opts Split(uint64_t host_bytes = 0) {  // 2 of the model's layers on the device
  Opts o = Cuda(0, host_bytes);
  o.n_gpu_layers = 2;
  return o;
}

llm_status MakeCtx(const Opts& o, llm_ctx** out) {
  const std::string path = ModelPathF32();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = o.backend;
  p.n_threads = 2;
  p.n_ctx = 256;
  p.kv_type = o.kv_type;
  p.n_kv_blocks = o.n_blocks;
  p.kv_host_bytes = o.host_bytes;
  p.kv_disk_dir = o.disk_dir.empty() ? nullptr : o.disk_dir.c_str();
  p.kv_disk_bytes = o.disk_dir.empty() ? 0 : 256u << 20;
  p.n_gpu_layers = o.n_gpu_layers;
  return llm_ctx_create(&p, out);
}

struct Ctx {
  llm_ctx* p = nullptr;
  explicit Ctx(const Opts& o) { EXPECT_EQ(MakeCtx(o, &p), LLM_OK) << llm_last_error(); }
  ~Ctx() { llm_ctx_destroy(p); }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  llm_stats Stats() const {
    llm_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(llm_get_stats(p, &s), LLM_OK);
    return s;
  }
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

std::string Export(llm_ctx* ctx, const std::vector<llm_token>& tokens, int32_t* n) {
  std::string out;
  *n = -1;
  EXPECT_EQ(llm_kv_export(ctx, tokens.data(), static_cast<int32_t>(tokens.size()), 0, WriteToString, &out, n), LLM_OK)
      << llm_last_error();
  return out;
}

llm_status Import(llm_ctx* ctx, const std::string& stream, int32_t* n) {
  MemReader r{&stream};
  *n = -1;
  return llm_kv_import(ctx, 0, ReadFromString, &r, n);
}

std::vector<llm_token> Prompt(int n, int variant = 0) {
  std::vector<llm_token> p{1};
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11 + 31 * variant) % 250 + 3);
  return p;
}

// The conversation a context holds after a greedy request: prompt + output.
std::vector<llm_token> Converse(llm_ctx* ctx, int n_prompt, int n_gen) {
  std::vector<llm_token> conv = Prompt(n_prompt);
  const ApiGreedyRun run = ApiGreedy(ctx, conv, n_gen);
  EXPECT_EQ(run.status, LLM_OK);
  conv.insert(conv.end(), run.tokens.begin(), run.tokens.end());
  return conv;
}

// Every block of a stream, by the library's reader.
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

// Every value of `got` against `want` (same tokens and geometry but the
// element type): |got - want| <= rel * |want| + abs, or with q8 within half
// a quantization step of its row (max|row| / 254).
void ExpectValues(const std::string& want_stream, const std::string& got_stream, double rel, double abs,
                  bool q8 = false) {
  kvstate::StreamHeader hw, hg;
  const auto bw = Blocks(want_stream, &hw), bg = Blocks(got_stream, &hg);
  ASSERT_EQ(bw.size(), bg.size());
  ASSERT_FALSE(bw.empty());
  const KvWireLayout ww = hw.geometry.wire(), wg = hg.geometry.wire();
  std::vector<float> x(static_cast<size_t>(ww.head_dim)), y(x.size());
  for (size_t i = 0; i < bw.size(); ++i) {
    ASSERT_EQ(bg[i].tokens, bw[i].tokens);
    ASSERT_EQ(bg[i].hash, bw[i].hash);
    for (int64_t l = 0; l < ww.n_layer; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < ww.n_head_kv; ++h)
          for (int64_t p = 0; p < ww.block_size; ++p) {
            kvstate::DecodeKvRow(ww, kv, bw[i].kv.data() + ww.TileOffset(l, kv, h), p, x.data());
            kvstate::DecodeKvRow(wg, kv, bg[i].kv.data() + wg.TileOffset(l, kv, h), p, y.data());
            float amax = 0;
            for (float v : x) amax = std::max(amax, std::fabs(v));
            for (size_t d = 0; d < x.size(); ++d)
              ASSERT_LE(std::fabs(static_cast<double>(y[d]) - x[d]),
                        q8 ? amax / 254.0 * 1.0001 + 1e-12 : rel * std::fabs(x[d]) + abs)
                  << "block " << i << " layer " << l << " kv " << kv << " head " << h << " pos " << p << " dim " << d
                  << ": " << x[d] << " -> " << y[d];
          }
  }
}

int32_t StreamElem(const std::string& s) {
  kvstate::StreamHeader h;
  Blocks(s, &h);
  return h.geometry.elem;
}

TEST(CudaKvState, RoundTripCudaToCuda) {
  SKIP_WITHOUT_DEVICE();
  Ctx a(Cuda());
  ASSERT_NE(a.p, nullptr);
  const std::vector<llm_token> conv = Converse(a.p, 40, 24);
  int32_t n_out = 0;
  const std::string stream = Export(a.p, conv, &n_out);
  ASSERT_EQ(n_out, 48);
  EXPECT_EQ(StreamElem(stream), kKvWireBf16);

  Ctx b(Cuda());
  int32_t n_in = 0;
  ASSERT_EQ(Import(b.p, stream, &n_in), LLM_OK) << llm_last_error();
  EXPECT_EQ(n_in, 48);
  int32_t n_again = 0;
  EXPECT_TRUE(Export(b.p, conv, &n_again) == stream) << "B's re-export differs from A's stream";

  const ApiGreedyRun ra = ApiGreedy(a.p, conv, 16);
  const ApiGreedyRun rb = ApiGreedy(b.p, conv, 16);
  ASSERT_EQ(ra.status, LLM_OK);
  ASSERT_EQ(rb.status, LLM_OK);
  EXPECT_EQ(ra.metrics.cached_prompt_tokens, 48);
  EXPECT_EQ(rb.metrics.cached_prompt_tokens, 48) << "the imported prefix was not reused";
  // The same KV bytes through the same kernels: the same run.
  EXPECT_EQ(rb.tokens, ra.tokens);
  ASSERT_EQ(rb.top.size(), ra.top.size());
  for (size_t i = 0; i < ra.top.size(); ++i)
    EXPECT_NEAR(rb.top[i][0].logprob, ra.top[i][0].logprob, 1e-5) << "position " << i;
  // Control: without the import nothing is cached.
  Ctx c(Cuda());
  EXPECT_EQ(ApiGreedy(c.p, conv, 1).metrics.cached_prompt_tokens, 0);
}

// A CPU context's stream (F32, F16, Q8_0 pools) into a CUDA context: values
// rounded to BF16, continuation as a CUDA context that computed the prompt.
void CpuToCuda(int32_t cpu_kv) {
  SCOPED_TRACE("CPU kv_type " + std::to_string(cpu_kv));
  Ctx cpu(Cpu(cpu_kv));
  const std::vector<llm_token> conv = Converse(cpu.p, 40, 24);
  int32_t n = 0;
  const std::string src = Export(cpu.p, conv, &n);
  ASSERT_EQ(n, 48);

  Ctx gpu(Cuda());
  int32_t n_in = 0;
  ASSERT_EQ(Import(gpu.p, src, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  const std::string back = Export(gpu.p, conv, &n);
  ASSERT_EQ(n, 48);
  EXPECT_EQ(StreamElem(back), kKvWireBf16);
  // BF16 keeps 8 significant bits (7 stored): round to nearest is within
  // half an ulp, 2^-8 of the value at most (just above a power of two).
  ExpectValues(src, back, 1.0 / 256, 1e-30);

  Ctx computed(Cuda());
  const ApiGreedyRun want = ApiGreedy(computed.p, conv, 16);
  const ApiGreedyRun got = ApiGreedy(gpu.p, conv, 16);
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.metrics.cached_prompt_tokens, 48) << "the imported prefix was not reused";
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

TEST(CudaKvState, CpuF32ToCuda) {
  SKIP_WITHOUT_DEVICE();
  CpuToCuda(LLM_KV_F32);
}
TEST(CudaKvState, CpuF16ToCuda) {
  SKIP_WITHOUT_DEVICE();
  CpuToCuda(LLM_KV_F16);
}
TEST(CudaKvState, CpuQ8ToCuda) {
  SKIP_WITHOUT_DEVICE();
  CpuToCuda(LLM_KV_Q8_0);
}

// A CUDA context's stream (BF16) into CPU pools: exact into F32 and F16
// (stories260K's K/V are well inside F16's range), within a quantization
// step into Q8_0; the CPU continues as a CPU context that computed it.
void CudaToCpu(int32_t cpu_kv) {
  SCOPED_TRACE("CPU kv_type " + std::to_string(cpu_kv));
  Ctx gpu(Cuda());
  const std::vector<llm_token> conv = Converse(gpu.p, 40, 24);
  int32_t n = 0;
  const std::string src = Export(gpu.p, conv, &n);
  ASSERT_EQ(n, 48);

  Ctx cpu(Cpu(cpu_kv));
  int32_t n_in = 0;
  ASSERT_EQ(Import(cpu.p, src, &n_in), LLM_OK) << llm_last_error();
  ASSERT_EQ(n_in, 48);
  const std::string back = Export(cpu.p, conv, &n);
  ASSERT_EQ(n, 48);
  if (cpu_kv == LLM_KV_Q8_0) {
    ExpectValues(src, back, 0, 0, /*q8=*/true);
  } else {
    ExpectValues(src, back, 0, 0);
  }

  Ctx computed(Cpu(cpu_kv));
  const ApiGreedyRun want = ApiGreedy(computed.p, conv, 16);
  const ApiGreedyRun got = ApiGreedy(cpu.p, conv, 16);
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.metrics.cached_prompt_tokens, 48) << "the imported prefix was not reused";
  ExpectEqualUpToNearTie(want, got, kNearTie);
}

TEST(CudaKvState, CudaToCpuF32) {
  SKIP_WITHOUT_DEVICE();
  CudaToCpu(LLM_KV_F32);
}
TEST(CudaKvState, CudaToCpuF16) {
  SKIP_WITHOUT_DEVICE();
  CudaToCpu(LLM_KV_F16);
}
TEST(CudaKvState, CudaToCpuQ8) {
  SKIP_WITHOUT_DEVICE();
  CudaToCpu(LLM_KV_Q8_0);
}

// ---------------------------------------------------------------- tiers

// 64-token prompts and 8 generated tokens take 5 of the 8 pool blocks: two
// other such requests evict every cached block of the first.
constexpr int kPrompt = 64, kGen = 8, kCached = 48;

void EvictWithOthers(llm_ctx* ctx) {
  for (int v = 1; v <= 2; ++v) ASSERT_EQ(ApiGreedy(ctx, Prompt(kPrompt, v), kGen).status, LLM_OK);
}

void ExpectSameRun(const ApiGreedyRun& got, const ApiGreedyRun& want) {
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.top.size(), want.top.size());
  for (size_t i = 0; i < want.top.size(); ++i)
    EXPECT_NEAR(got.top[i][0].logprob, want.top[i][0].logprob, 1e-5) << "position " << i;
}

std::string TempDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/llmrt_cuda_tiers_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(d);
  return d;
}

TEST(CudaKvState, WithoutTiersTheEvictedPrefixIsRecomputed) {  // the control
  SKIP_WITHOUT_DEVICE();
  Ctx c(Cuda(8));
  ASSERT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen).status, LLM_OK);
  EvictWithOthers(c.p);
  EXPECT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen).metrics.cached_prompt_tokens, 0);
}

TEST(CudaKvState, PinnedHostTierGivesAnEvictedPrefixBack) {
  SKIP_WITHOUT_DEVICE();
  Ctx c(Cuda(8, 64u << 20));
  ASSERT_NE(c.p, nullptr);
  const ApiGreedyRun cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  ASSERT_EQ(cold.status, LLM_OK);
  EvictWithOthers(c.p);
  const llm_stats before = c.Stats();
  EXPECT_GT(before.kv_tier_bytes_down, 0u);
  EXPECT_GT(before.kv_tier_host_bytes, 0u);
  const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached) << "the evicted prefix did not come back from host memory";
  ExpectSameRun(warm, cold);
  const llm_stats after = c.Stats();
  EXPECT_GE(after.kv_tier_host_hit_tokens - before.kv_tier_host_hit_tokens, static_cast<uint64_t>(kCached));
  EXPECT_EQ(after.kv_tier_disk_hit_tokens, 0u);
}

TEST(CudaKvState, HostTierPushesDownToDiskAndSurvivesANewContext) {
  SKIP_WITHOUT_DEVICE();
  const std::string dir = TempDir("both");
  ApiGreedyRun cold;
  {
    Ctx probe(Cuda(8));
    const uint64_t block = probe.Stats().kv_pool_bytes / 9;  // the CUDA pool holds one scratch block more
    // Two host slots: the rest of an evicted prefix goes down to disk
    // through the page-locked slots (their bytes read back on the host).
    Ctx c(Cuda(8, 2 * block + 1024, dir));
    ASSERT_NE(c.p, nullptr);
    cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    ASSERT_EQ(cold.status, LLM_OK);
    EvictWithOthers(c.p);
    EXPECT_LE(c.Stats().kv_tier_host_bytes, 2 * block + 1024);
    const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached);
    ExpectSameRun(warm, cold);
    const llm_stats s = c.Stats();
    EXPECT_GT(s.kv_tier_disk_hit_tokens, 0u);
    EXPECT_GT(s.kv_tier_host_hit_tokens, 0u);
  }  // destroy: the host tier and the pool go to disk
  Ctx d(Cuda(8, 0, dir));
  const ApiGreedyRun again = ApiGreedy(d.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(again.metrics.cached_prompt_tokens, kCached) << "a new CUDA context did not find the prefix on disk";
  ExpectSameRun(again, cold);
  fs::remove_all(dir);
}

// A model split between CUDA and the CPU (n_gpu_layers) cannot export a
// whole block: it says so, and keeps serving; it refuses tiers likewise.
TEST(CudaKvState, PartialOffloadRefuses) {
  SKIP_WITHOUT_DEVICE();
  Ctx ctx(Split());
  ASSERT_NE(ctx.p, nullptr);
  const std::vector<llm_token> prompt = Prompt(20);
  int32_t n = -1;
  std::string out;
  EXPECT_EQ(llm_kv_export(ctx.p, prompt.data(), 20, 0, WriteToString, &out, &n), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("cannot export"), std::string::npos) << llm_last_error();
  EXPECT_EQ(ApiGreedy(ctx.p, prompt, 4).tokens.size(), 4u);
  llm_ctx* t = nullptr;
  EXPECT_EQ(MakeCtx(Split(64u << 20), &t), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("KV tiers"), std::string::npos) << llm_last_error();
}

}  // namespace
}  // namespace llm::test
