// Several CUDA devices (split_backend.h, layer_placement.h): a model's layers
// split over two devices, each holding its layers' weights and KV, against
// the same model on one device; and the emulator's multi-device model
// (LLM_EMU_DEVICES=2): each device its own memory accounting, another
// device's pointer refused in copies and caught in kernels and GEMMs,
// cudaMemcpyPeer between them.
//
// Backend level: synthesised dense (tiny-gemma3: six layers with sliding-
// window and global ones, post-norms, q/k norms) and MoE (tiny-qwen3moe)
// models, prefill chunks, a mixed batch, decode steps, a
// copied block and a swap round trip; the split's logits equal the one-
// device backend's (the stages hand the residual stream on in F32, which is
// what one device keeps, so only summation order could differ: RelL2 < 1e-5).
// Three stages (two devices + the CPU) too. Through the C API: the default
// split, tensor_split 1,2 and main_gpu give the one-device context's greedy
// tokens, and llm_get_device_stats reports each device's layers and memory.
// Experts in host memory (n_cpu_moe) with a split over two devices are
// refused (UNSUPPORTED); on one device they run.
//
// Needs two devices: LLM_EMU_DEVICES=2 while each test runs (the
// emulator); skips where fewer are present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#if LLM_HAVE_CUDA
#include <cuda_runtime.h>

#include "silu_mul.cuh"
#endif

#include "backend/backend.h"
#include "backend/layer_placement.h"
#include "backend/split_backend.h"
#include "model/model.h"
#include "support/api_greedy.h"
#include "support/cuda_test_helpers.h"

namespace llm::test {
namespace {

// Two emulated devices for the test's duration only (the emulator reads
// the switch at each call), so the other tests of a combined binary
// (cuda-tests) keep one.
class TwoDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    set_here_ = std::getenv("LLM_EMU_DEVICES") == nullptr;
    if (set_here_) setenv("LLM_EMU_DEVICES", "2", 1);
    if (CudaDeviceCount() < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  }
  void TearDown() override {
#if LLM_HAVE_CUDA
    cudaSetDevice(0);  // this thread's current device, for the tests after
#endif
    if (set_here_) unsetenv("LLM_EMU_DEVICES");
  }

 private:
  bool set_here_ = false;
};

std::string Synth(const char* shape) {
  const std::string path =
      ::testing::TempDir() + "/llmrt_multidev_" + shape + "_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.seed = 11;
  o.stddev = 0.08f;
  o.norm_std = 0.1f;
  Status st = synth::WriteSynthModel(*synth::FindSynthShape(shape), o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

TEST(LayerPlacement, SplitsInProportion) {
  const std::vector<int32_t> dev = {0, 1};
  auto even = SplitLayers(6, dev, std::vector<float>{1, 1});
  ASSERT_TRUE(even.ok());
  ASSERT_EQ(even->shares.size(), 2u);
  EXPECT_EQ(even->shares[0].n_layers, 3);
  EXPECT_EQ(even->shares[1].n_layers, 3);
  auto skew = SplitLayers(8, dev, std::vector<float>{3, 1});
  ASSERT_TRUE(skew.ok());
  EXPECT_EQ(skew->shares[0].n_layers, 6);
  EXPECT_EQ(skew->shares[1].n_layers, 2);
  auto one = SplitLayers(5, dev, std::vector<float>{0, 2});  // device 0 gets nothing
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->shares.size(), 1u);
  EXPECT_EQ(one->shares[0].device, 1);
  EXPECT_EQ(one->gpu_layers(), 5);
  EXPECT_FALSE(SplitLayers(4, dev, std::vector<float>{0, 0}).ok());
  EXPECT_FALSE(SplitLayers(4, dev, std::vector<float>{1, NAN}).ok());
  EXPECT_FALSE(SplitLayers(4, dev, std::vector<float>{1}).ok());
  EXPECT_FALSE(SplitLayers(0, dev, std::vector<float>{1, 1}).ok());
}

#if LLM_CUDA_EMULATED
TEST_F(TwoDevices, EmulatorKeepsDevicesApart) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  size_t free0 = 0, total0 = 0, free1 = 0, total1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total0), cudaSuccess);
  float* a = nullptr;
  const size_t bytes = size_t{64} << 20;
  ASSERT_EQ(cudaMalloc(&a, bytes), cudaSuccess);
  size_t after0 = 0, t = 0;
  ASSERT_EQ(cudaMemGetInfo(&after0, &t), cudaSuccess);
  EXPECT_EQ(free0 - after0, bytes);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total1), cudaSuccess);
  EXPECT_EQ(free1, total1);  // device 0's allocation is not device 1's
  float* b = nullptr;
  ASSERT_EQ(cudaMalloc(&b, bytes), cudaSuccess);
  // Device 0's buffer while device 1 is current: a copy is refused, a
  // kernel fails at the next synchronisation.
  std::vector<float> host(16, 1.0f);
  EXPECT_EQ(cudaMemcpy(a, host.data(), 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaMemcpy(b, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  // (The emulator runs the launch at once, so the launcher's own
  // cudaGetLastError may already say so; a GPU says it at the sync.)
  const cudaError_t launched = cuda::LaunchSiluMul(a, 1, 8, reinterpret_cast<cuda::bf16*>(b), nullptr, false);
  EXPECT_TRUE(launched == cudaSuccess || launched == cudaErrorIllegalAddress) << cudaGetErrorName(launched);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  cudaGetLastError();
  // A stream of device 0 takes no launch from device 1.
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t s0 = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cuda::LaunchSiluMul(b, 1, 8, reinterpret_cast<cuda::bf16*>(b + 1024), s0, false),
            cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  // Peer copies name both devices.
  EXPECT_EQ(cudaMemcpyPeer(a, 0, b, 1, 64), cudaSuccess);
  EXPECT_EQ(cudaMemcpyPeer(a, 1, b, 1, 64), cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<float> back(16, 0.0f);
  ASSERT_EQ(cudaMemcpy(back.data(), a, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  EXPECT_EQ(cudaStreamDestroy(s0), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);  // any device may free
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  cudaGetLastError();
}
#endif

constexpr int32_t kBlocks = 24;

StatusOr<std::unique_ptr<Backend>> MakeBackend(const ModelConfig& c, const ModelWeights& w,
                                               const LayerPlacement& p) {
  KvCacheSpec kv{16, kBlocks};
  kv.kv_type = LLM_KV_AUTO;
  CudaBackendOptions o;
  o.max_seq_len = 256;
  o.fit_kv_blocks = true;
  o.cuda_graphs = false;  // the one-device reference runs eagerly too: the same attention plan
  auto b = CreateSplitBackend(c, w, &kv, o, p, 2);
  if (b.ok()) {
    EXPECT_EQ(kv.n_blocks, kBlocks);
  }
  return b;
}

void Compare(Backend* want_be, Backend* got_be, int32_t V, const Batch& batch, const std::string& what) {
  SCOPED_TRACE(what);
  const size_t n = batch.logit_rows.size() * static_cast<size_t>(V);
  std::vector<float> want(n), got(n, NAN);
  Status a = want_be->Forward(batch, want.data());
  ASSERT_TRUE(a.ok()) << a.message();
  Status b = got_be->Forward(batch, got.data());
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_LT(RelL2(got, want), 1e-5);
}

void RunScenario(Backend* one, Backend* split, int32_t V) {
  auto tok = [V](int i) { return static_cast<llm_token>((i * 37 + 11) % V); };
  std::vector<int32_t> ta = {3, 17, 4, 21}, tb = {10, 11};
  {  // A: a 40-token prefill (past the Gemma shapes' 32-token window)
    std::vector<llm_token> t;
    for (int i = 0; i < 40; ++i) t.push_back(tok(i));
    BatchSeq s{0, 40, 0, ta};
    std::vector<int32_t> rows = {9, 39};
    Compare(one, split, V, Batch{t, std::span<const BatchSeq>(&s, 1), rows}, "prefill");
  }
  {  // A's next chunk + B's prefill, rows out of order
    std::vector<llm_token> t;
    for (int i = 40; i < 50; ++i) t.push_back(tok(i));
    for (int i = 0; i < 17; ++i) t.push_back(tok(i + 500));
    std::vector<BatchSeq> seqs = {{0, 10, 40, ta}, {10, 17, 0, tb}};
    std::vector<int32_t> rows = {26, 9, 3};
    Compare(one, split, V, Batch{t, seqs, rows}, "chunk + prefill");
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<llm_token> t = {tok(step + 1), tok(step + 100)};
    std::vector<BatchSeq> seqs = {{0, 1, 50 + step, ta}, {1, 1, 17 + step, tb}};  // A ends at 52, B at 19
    std::vector<int32_t> rows = {0, 1};
    Compare(one, split, V, Batch{t, seqs, rows}, "decode step " + std::to_string(step));
  }
  {  // B's second block copied to 20, which C's table uses
    ASSERT_TRUE(one->CopyKvBlock(tb[1], 20).ok());
    ASSERT_TRUE(split->CopyKvBlock(tb[1], 20).ok());
    std::vector<int32_t> tc = {tb[0], 20};
    std::vector<llm_token> t = {tok(300)};
    BatchSeq s{0, 1, 19, tc};
    std::vector<int32_t> rows = {0};
    Compare(one, split, V, Batch{t, std::span<const BatchSeq>(&s, 1), rows}, "after CopyKvBlock");
  }
  {  // A's blocks out to the host, overwritten, back into other blocks
    for (Backend* be : {one, split}) ASSERT_TRUE(be->ReserveSwapSpace(4).ok());
    std::vector<KvSwap> outs;
    for (int i = 0; i < 4; ++i) outs.push_back({ta[i], i});
    for (Backend* be : {one, split}) ASSERT_TRUE(be->SwapOutKvBlocks(outs).ok());
    std::vector<llm_token> junk;
    for (int i = 0; i < 50; ++i) junk.push_back(tok(i * 3 + 7));
    BatchSeq e{0, 50, 0, ta};
    std::vector<int32_t> last = {49};
    Compare(one, split, V, Batch{junk, std::span<const BatchSeq>(&e, 1), last}, "overwrite");
    std::vector<int32_t> moved = {5, 6, 7, 8};
    std::vector<KvSwap> ins;
    for (int i = 0; i < 4; ++i) ins.push_back({moved[i], i});
    for (Backend* be : {one, split}) ASSERT_TRUE(be->SwapInKvBlocks(ins).ok());
    std::vector<llm_token> t = {tok(77)};
    BatchSeq s{0, 1, 52, moved};
    std::vector<int32_t> rows = {0};
    Compare(one, split, V, Batch{t, std::span<const BatchSeq>(&s, 1), rows}, "after swap-in");
  }
}

void CheckModel(const char* shape, bool with_cpu_stage) {
  SCOPED_TRACE(shape);
  const std::string path = Synth(shape);
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelConfig& c = (*m)->config;
  LayerPlacement whole;
  whole.shares.push_back(DeviceShare{0, c.n_layer});
  auto one = MakeBackend(c, (*m)->weights, whole);
  ASSERT_TRUE(one.ok()) << one.status().message();
  LayerPlacement two;
  const int32_t gpu = with_cpu_stage ? c.n_layer - 1 : c.n_layer;
  two.shares.push_back(DeviceShare{0, (gpu + 1) / 2});
  two.shares.push_back(DeviceShare{1, gpu - (gpu + 1) / 2});
  auto split = MakeBackend(c, (*m)->weights, two);
  ASSERT_TRUE(split.ok()) << split.status().message();
  // Each device holds its own layers' weights and KV.
  const std::vector<DeviceMemory> d = (*split)->device_memory();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].device, 0);
  EXPECT_EQ(d[1].device, 1);
  EXPECT_EQ(d[0].first_layer, 0);
  EXPECT_EQ(d[0].end_layer, d[1].first_layer);
  EXPECT_EQ(d[1].end_layer, gpu);
  for (const DeviceMemory& x : d) {
    EXPECT_GT(x.weights, 0);
    EXPECT_GT(x.kv_pool, 0);
    EXPECT_GT(x.used, 0);
  }
  if (with_cpu_stage) {
    // Against the CPU: the three-stage chain is the two-stage partial
    // offload's, within the CUDA tests' BF16 bound.
    KvCacheSpec kv{16, kBlocks};
    kv.kv_type = LLM_KV_F32;
    auto cpu = CreateCpuBackend(c, (*m)->weights, kv, 2);
    ASSERT_TRUE(cpu.ok());
    std::vector<llm_token> t;
    for (int i = 0; i < 20; ++i) t.push_back(static_cast<llm_token>((i * 13 + 5) % c.n_vocab));
    std::vector<int32_t> tbl = {1, 2};
    BatchSeq s{0, 20, 0, tbl};
    std::vector<int32_t> rows = {19};
    std::vector<float> want(c.n_vocab), got(c.n_vocab, NAN);
    ASSERT_TRUE((*cpu)->Forward(Batch{t, std::span<const BatchSeq>(&s, 1), rows}, want.data()).ok());
    Status st = (*split)->Forward(Batch{t, std::span<const BatchSeq>(&s, 1), rows}, got.data());
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_LT(RelL2(got, want), 2e-2);
    return;
  }
  RunScenario(one->get(), split->get(), c.n_vocab);
}

TEST_F(TwoDevices, DenseSplitEqualsOneDevice) {
  CheckModel("tiny-gemma3", false);
}
TEST_F(TwoDevices, MoeSplitEqualsOneDevice) {
  CheckModel("tiny-qwen3moe", false);
}
TEST_F(TwoDevices, TwoDevicesAndTheCpu) {
  CheckModel("tiny-gemma2", true);  // four layers: two on device 0, one on device 1, one on the CPU
}

// ---------------------------------------------------------------- C API
llm_ctx* Open(const std::string& path, int32_t main_gpu, std::vector<float> split, llm_status* st = nullptr,
              int32_t n_cpu_moe = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.n_ctx = 128;
  p.max_seqs = 2;
  p.n_kv_blocks = 16;
  p.n_cpu_moe = n_cpu_moe;
  p.moe_host_policy = LLM_MOE_HOST_COPY;  // the device's kernels on copied experts: the same sums
  p.main_gpu = main_gpu;
  for (size_t i = 0; i < split.size(); ++i) p.tensor_split[i] = split[i];
  llm_ctx* ctx = nullptr;
  const llm_status s = llm_ctx_create(&p, &ctx);
  if (st != nullptr) *st = s;
  return ctx;
}

std::vector<llm_device_stats> Devices(llm_ctx* ctx) {
  std::vector<llm_device_stats> out;
  llm_device_stats d{};
  d.struct_size = sizeof(d);
  if (llm_get_device_stats(ctx, 0, &d) != LLM_OK) return out;
  for (int32_t i = 0; i < d.n_devices; ++i) {
    llm_device_stats x{};
    x.struct_size = sizeof(x);
    EXPECT_EQ(llm_get_device_stats(ctx, i, &x), LLM_OK);
    out.push_back(x);
  }
  return out;
}

TEST_F(TwoDevices, ContextSplitsAndReportsDevices) {
  const std::string path = Synth("tiny-gemma3");  // six layers
  const std::vector<llm_token> prompt = {5, 9, 33, 2, 17, 88, 41, 7, 12, 3};
  llm_ctx* single = Open(path, 0, {});
  ASSERT_NE(single, nullptr) << llm_last_error();
  const std::vector<llm_device_stats> d1 = Devices(single);
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].end_layer, 6);
  const ApiGreedyRun want = ApiGreedy(single, prompt, 8);
  ASSERT_EQ(want.status, LLM_OK);
  llm_ctx_destroy(single);

  struct Case {
    std::vector<float> split;
    int32_t layers_on_0;
  };
  for (const Case& k : {Case{{}, 3}, Case{{1, 2}, 2}}) {
    llm_ctx* ctx = Open(path, -1, k.split);
    ASSERT_NE(ctx, nullptr) << llm_last_error();
    const std::vector<llm_device_stats> d = Devices(ctx);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].device, 0);
    EXPECT_EQ(d[1].device, 1);
    EXPECT_EQ(d[0].end_layer, k.layers_on_0);
    EXPECT_EQ(d[1].first_layer, k.layers_on_0);
    EXPECT_EQ(d[1].end_layer, 6);
    for (const llm_device_stats& x : d) {
      EXPECT_GT(x.weight_bytes, 0u);
      EXPECT_GT(x.kv_pool_bytes, 0u);
      EXPECT_GE(x.used_bytes, x.weight_bytes + x.kv_pool_bytes);
      EXPECT_GT(x.total_bytes, x.used_bytes);
    }
    const ApiGreedyRun got = ApiGreedy(ctx, prompt, 8);
    ASSERT_EQ(got.status, LLM_OK);
    // The one-device context replays decode steps as CUDA graphs (their
    // attention split may differ from the eager plan in summation order):
    // equal tokens, or a runner-up within 1e-3 nats.
    ExpectEqualUpToNearTie(want, got, 1e-3f);
    llm_device_stats none{};
    none.struct_size = sizeof(none);
    EXPECT_EQ(llm_get_device_stats(ctx, 2, &none), LLM_ERR_NOT_FOUND);
    EXPECT_EQ(none.n_devices, 2);
    llm_ctx_destroy(ctx);
  }
  llm_status st = LLM_OK;
  EXPECT_EQ(Open(path, 2, {}, &st), nullptr);  // no device 2
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Open(path, -1, {1, 1, 1}, &st), nullptr);  // a share for device 2
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Open(path, 0, {1, 1}, &st), nullptr);  // exclusive
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Open(path, -1, {1, -1}, &st), nullptr);
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
}

// Experts in host memory (n_cpu_moe) live in one device's backend, counted
// from layer 0: with the layers split over two devices the context is
// refused (UNSUPPORTED, naming the way out); on one device (main_gpu, or a
// split that gives one device every layer) they run, and the greedy tokens
// are the all-on-device context's.
TEST_F(TwoDevices, HostExpertsNeedOneDevice) {
  const std::string path = Synth("tiny-qwen3moe");
  const std::vector<llm_token> prompt = {5, 9, 33, 2, 17, 88, 41, 7, 12, 3};
  llm_status st = LLM_OK;
  EXPECT_EQ(Open(path, -1, {}, &st, -1), nullptr);
  EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("n_cpu_moe"), std::string::npos) << llm_last_error();
  EXPECT_EQ(Open(path, -1, {1, 1}, &st, 1), nullptr);
  EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);

  llm_ctx* dev = Open(path, 1, {});
  ASSERT_NE(dev, nullptr) << llm_last_error();
  const ApiGreedyRun want = ApiGreedy(dev, prompt, 8);
  ASSERT_EQ(want.status, LLM_OK);
  llm_ctx_destroy(dev);
  for (const std::vector<float>& split : {std::vector<float>{}, std::vector<float>{0, 1}}) {
    llm_ctx* host = Open(path, split.empty() ? 1 : -1, split, &st, -1);
    ASSERT_NE(host, nullptr) << llm_last_error();
    const std::vector<llm_device_stats> d = Devices(host);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].device, 1);
    const ApiGreedyRun got = ApiGreedy(host, prompt, 8);
    ASSERT_EQ(got.status, LLM_OK);
    ExpectEqualUpToNearTie(want, got, 1e-3f);  // the all-on-device context replays CUDA graphs
    llm_stats s{};
    s.struct_size = sizeof(s);
    ASSERT_EQ(llm_get_stats(host, &s), LLM_OK);
    EXPECT_GT(s.moe_host_layers, 0);
    EXPECT_GT(s.moe_copy_steps, 0u);
    llm_ctx_destroy(host);
  }

  // The backend refuses a stage after the first with host experts too.
  auto m = Model::Load(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelConfig& c = (*m)->config;
  LayerPlacement two;
  two.shares.push_back(DeviceShare{0, c.n_layer / 2});
  two.shares.push_back(DeviceShare{1, c.n_layer - c.n_layer / 2});
  KvCacheSpec kv{16, kBlocks};
  CudaBackendOptions o;
  o.max_seq_len = 256;
  o.n_cpu_moe = -1;
  auto b = CreateSplitBackend(c, (*m)->weights, &kv, o, two, 2);
  EXPECT_EQ(b.status().code(), LLM_ERR_UNSUPPORTED) << b.status().message();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llm::test
