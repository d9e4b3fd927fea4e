// n_gpu_layers = LLM_GPU_LAYERS_AUTO (engine/auto_fit.h, backend/fit_plan.h,
// cuda/cuda_footprint.cpp): layers fitted to the devices' free memory.
//
// The search alone (PlanFit) over made-up costs: the most layers, the split
// by budget or tensor_split, a device filled in turn where the budgets'
// split loses a layer, the fewest host-expert layers, nothing fitting.
//
// On the emulator, whose device memory LLM_EMU_DEVICE_MIB sets and whose
// accounting is exact: the footprint the plan counts equals what a backend
// made with the same options allocates (dense, a partial stage, a later
// stage, host experts); then through the C API on synthesised models with
// the device sized so that a few of their layers fit: auto loads and runs
// the largest layer count that loads (one more is OUT_OF_MEMORY), its greedy
// tokens are the CPU backend's up to a near-tie; an MoE model whose dense
// part fits but not its experts keeps every layer on the device and the
// experts of the fewest layers in host memory (one fewer is OUT_OF_MEMORY);
// two emulated devices share the layers; a device too small for one layer
// runs the model on the CPU (backend AUTO) or refuses (backend CUDA).
// Skips without a device; the device-sized tests run on the emulator only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#if LLM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "backend/backend.h"
#include "backend/fit_plan.h"
#include "model/model.h"
#include "support/api_greedy.h"
#include "support/cuda_test_helpers.h"

namespace llm::test {
namespace {

// ---------------------------------------------------------------- the search

// A stage's bytes: `fixed` + `embd` on the first stage + `head` when it ends
// the model, + per layer `layer` (`dense` of it when its experts are in host
// memory, plus `cache` once any are).
struct ToyCost {
  int32_t n_layer = 8;
  int64_t fixed = 100, embd = 10, head = 20, layer = 50, dense = 20, cache = 30;
  FitStageCost fn() const {
    return [*this](int32_t first, int32_t end, int32_t m) -> StatusOr<int64_t> {
      int64_t b = fixed + (first == 0 ? embd : 0) + (end == n_layer ? head : 0);
      const int32_t host = m < 0 ? end - first : std::min(m, end - first);
      b += (end - first - host) * layer + host * dense + (host > 0 ? cache : 0);
      return b;
    };
  }
};

FitProblem OneDevice(int64_t budget, int32_t n_layer = 8) {
  FitProblem pb;
  pb.n_layer = n_layer;
  pb.devices.push_back(FitDevice{0, budget});
  return pb;
}

TEST(FitPlan, MostLayersOnOneDevice) {
  const ToyCost t;
  // 100 + 10 + 50 k (+ 20 with every layer): k = 4 at 310..359.
  for (int64_t budget : {310, 359}) {
    auto plan = PlanFit(OneDevice(budget), t.fn());
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->placement.gpu_layers(), 4) << budget;
    EXPECT_EQ(plan->need[0], 310);
    EXPECT_EQ(plan->n_cpu_moe, 0);
  }
  auto all = PlanFit(OneDevice(530), t.fn());  // 110 + 400 + 20
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->placement.gpu_layers(), 8);
  auto seven = PlanFit(OneDevice(529), t.fn());
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(seven->placement.gpu_layers(), 7);
  auto none = PlanFit(OneDevice(159), t.fn());  // one layer is 160
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->placement.shares.empty());
  auto negative = PlanFit(OneDevice(-5), t.fn());
  ASSERT_TRUE(negative.ok());
  EXPECT_TRUE(negative->placement.shares.empty());
}

TEST(FitPlan, HostExpertsBeforeDroppingLayers) {
  const ToyCost t;
  FitProblem pb = OneDevice(500);  // all 8 with experts: 530; dense only: 110 + 160 + 20 + 30 = 320
  pb.host_experts_allowed = true;
  auto plan = PlanFit(pb, t.fn());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->placement.gpu_layers(), 8);
  // m host layers: 530 - 30 m + 30 <= 500 -> m = 2.
  EXPECT_EQ(plan->n_cpu_moe, 2);
  EXPECT_EQ(plan->need[0], 500);
  // Not allowed (the caller set n_cpu_moe, or a dense model): whole layers go.
  pb.host_experts_allowed = false;
  auto layers = PlanFit(pb, t.fn());
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(layers->placement.gpu_layers(), 7);
  EXPECT_EQ(layers->n_cpu_moe, 0);
  // A caller's fixed n_cpu_moe is every plan's.
  pb.fixed_n_cpu_moe = -1;
  auto fixed = PlanFit(pb, t.fn());
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->placement.gpu_layers(), 8);
  EXPECT_EQ(fixed->n_cpu_moe, -1);
  // Tighter: 8 layers with m smallest such that 560 - 30 m <= 360: m = 7.
  FitProblem tight = OneDevice(360);
  tight.host_experts_allowed = true;
  auto seven = PlanFit(tight, t.fn());
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(seven->placement.gpu_layers(), 8);
  EXPECT_EQ(seven->n_cpu_moe, 7);
  // Even the dense part of all 8 does not fit (320 > 300): 7 layers (5 with
  // their experts would be 360) with the experts of all 7 on the host (280).
  FitProblem small = OneDevice(300);
  small.host_experts_allowed = true;
  auto fewer = PlanFit(small, t.fn());
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->placement.gpu_layers(), 7);
  EXPECT_EQ(fewer->n_cpu_moe, 7);
  // Two devices, the second too small for a layer: no split holds all 8,
  // the first alone does with the experts of two layers on the host.
  FitProblem two;
  two.n_layer = 8;
  two.devices = {FitDevice{0, 500}, FitDevice{1, 100}};
  two.host_experts_allowed = true;
  auto alone = PlanFit(two, t.fn());
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ(alone->placement.shares.size(), 1u);
  EXPECT_EQ(alone->placement.shares[0].device, 0);
  EXPECT_EQ(alone->placement.gpu_layers(), 8);
  EXPECT_EQ(alone->n_cpu_moe, 2);
  // A caller's n_cpu_moe keeps the layers on one device (host experts live
  // in one stage): the one that holds the most.
  two.host_experts_allowed = false;
  two.fixed_n_cpu_moe = -1;
  two.devices = {FitDevice{0, 100}, FitDevice{1, 600}};
  auto one = PlanFit(two, t.fn());
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->placement.shares.size(), 1u);
  EXPECT_EQ(one->placement.shares[0].device, 1);
  EXPECT_EQ(one->placement.gpu_layers(), 8);
}

TEST(FitPlan, SplitsOverDevices) {
  const ToyCost t;
  FitProblem pb;
  pb.n_layer = 8;
  pb.devices = {FitDevice{0, 310}, FitDevice{1, 310}};
  // 8 layers: 4 + 4 needs 320 on device 1 (it ends the model: the head),
  // and filled in turn device 1 holds only 3 of the other 4. 7 layers: 4 + 3.
  auto plan = PlanFit(pb, t.fn());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->placement.gpu_layers(), 7);
  ASSERT_EQ(plan->placement.shares.size(), 2u);
  EXPECT_EQ(plan->placement.shares[0].device, 0);
  EXPECT_EQ(plan->placement.shares[1].device, 1);
  // Larger second device: by budget the split is uneven and fits all.
  pb.devices = {FitDevice{0, 310}, FitDevice{1, 400}};
  auto all = PlanFit(pb, t.fn());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->placement.gpu_layers(), 8);
  EXPECT_LE(all->need[0], 310);
  EXPECT_LE(all->need[1], 400);
  // tensor_split proportions are kept: 1:3 of k over the devices.
  pb.devices = {FitDevice{0, 1000}, FitDevice{1, 1000}};
  pb.proportions = {1, 3};
  auto prop = PlanFit(pb, t.fn());
  ASSERT_TRUE(prop.ok());
  ASSERT_EQ(prop->placement.shares.size(), 2u);
  EXPECT_EQ(prop->placement.shares[0].n_layers, 2);
  EXPECT_EQ(prop->placement.shares[1].n_layers, 6);
  // A device without room is left out of the budgets' split.
  pb.proportions.clear();
  pb.devices = {FitDevice{0, 0}, FitDevice{1, 600}};
  auto second = PlanFit(pb, t.fn());
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->placement.shares.size(), 1u);
  EXPECT_EQ(second->placement.shares[0].device, 1);
  EXPECT_EQ(second->placement.gpu_layers(), 8);
  // Malformed problems.
  pb.proportions = {1};
  EXPECT_EQ(PlanFit(pb, t.fn()).status().code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(PlanFit(FitProblem{}, t.fn()).status().code(), LLM_ERR_INVALID_ARGUMENT);
  // The cost function's error is the plan's.
  const FitStageCost broken = [](int32_t, int32_t, int32_t) -> StatusOr<int64_t> { return InternalError("x"); };
  EXPECT_EQ(PlanFit(OneDevice(100), broken).status().code(), LLM_ERR_INTERNAL);
}

// ------------------------------------------------------------- on the device

// LLM_EMU_DEVICE_MIB / LLM_EMU_DEVICES / LLM_BACKEND for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string SynthShape(const char* shape, int32_t n_layer, const char* tag) {
  const std::string path = ::testing::TempDir() + "/llmrt_autofit_" + tag + "_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthShape s = *synth::FindSynthShape(shape);
  s.n_layer = n_layer;
  synth::SynthOptions o;
  o.seed = 5;
  o.stddev = 0.08f;
  o.norm_std = 0.1f;
  Status st = synth::WriteSynthModel(s, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

#if LLM_CUDA_EMULATED
// The emulator's bytes in use on the current device.
int64_t Used() {
  size_t free_b = 0, total_b = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  return static_cast<int64_t>(total_b - free_b);
}

// The footprint is what the backend allocates: before-KV bytes plus its
// pool, against the emulator's count, for every kind of stage.
TEST(CudaFootprint, EqualsTheBackendsAllocations) {
  SKIP_WITHOUT_DEVICE();
  const std::string dense = SynthShape("tiny", 4, "fp_dense");
  const std::string moe = SynthShape("tiny-qwen3moe-k", 3, "fp_moe");
  for (const std::string& path : {dense, moe}) {
    auto m = Model::Load(path.c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    const ModelConfig& c = (*m)->config;
    struct Case {
      int32_t first, end, n_cpu_moe;
      bool graphs;
    };
    std::vector<Case> cases = {{0, c.n_layer, 0, true}, {0, 2, 0, false}, {1, c.n_layer, 0, false}, {1, 3, 0, false}};
    if (c.n_expert > 0) cases.push_back({0, c.n_layer, 2, false}), cases.push_back({0, 2, -1, false});
    for (const Case& k : cases) {
      KvCacheSpec kv{16, 24};
      CudaBackendOptions o;
      o.first_layer = k.first;
      o.n_layers = k.end;
      o.n_cpu_moe = k.n_cpu_moe;
      o.cuda_graphs = k.graphs;
      o.max_seqs = 4;
      o.max_batch_tokens = 128;
      o.max_seq_len = 256;
      auto f = EstimateCudaFootprint(c, (*m)->weights, kv, o);
      ASSERT_TRUE(f.ok()) << f.status().message();
      const int64_t before = Used();
      int64_t after_kv = 0;
      {
        auto b = CreateCudaBackend(c, (*m)->weights, &kv, o);
        ASSERT_TRUE(b.ok()) << b.status().message();
        const DeviceMemory d = (*b)->device_memory().at(0);
        EXPECT_EQ(d.kv_pool, (kv.n_blocks + 1) * f->kv_block);
        after_kv = Used() - before;
        if (k.graphs) {  // the graph metadata comes after the pool, out of the headroom
          EXPECT_GE(after_kv, f->before_kv + d.kv_pool);
          EXPECT_LT(after_kv, f->before_kv + d.kv_pool + (int64_t{8} << 20));
        } else {
          EXPECT_EQ(after_kv, f->before_kv + d.kv_pool)
              << path << " layers [" << k.first << ", " << k.end << ") n_cpu_moe " << k.n_cpu_moe;
        }
      }
      EXPECT_EQ(Used(), before);
    }
  }
  std::remove(dense.c_str());
  std::remove(moe.c_str());
}
#endif

llm_ctx* Open(const std::string& path, int32_t backend, int32_t n_gpu_layers, llm_status* st = nullptr,
              int32_t n_cpu_moe = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = backend;
  p.n_ctx = 128;
  p.max_seqs = 2;
  p.max_batch_tokens = 64;
  p.n_kv_blocks = 16;
  p.gpu_memory_fraction = 1.0f;
  p.n_gpu_layers = n_gpu_layers;
  p.n_cpu_moe = n_cpu_moe;
  p.moe_host_policy = LLM_MOE_HOST_COPY;
  llm_ctx* ctx = nullptr;
  const llm_status s = llm_ctx_create(&p, &ctx);
  if (st != nullptr) *st = s;
  return ctx;
}

std::vector<llm_device_stats> Devices(llm_ctx* ctx) {
  std::vector<llm_device_stats> out;
  llm_device_stats d{};
  d.struct_size = sizeof(d);
  llm_get_device_stats(ctx, 0, &d);
  for (int32_t i = 0; i < d.n_devices; ++i) {
    llm_device_stats x{};
    x.struct_size = sizeof(x);
    EXPECT_EQ(llm_get_device_stats(ctx, i, &x), LLM_OK);
    out.push_back(x);
  }
  return out;
}

int32_t GpuLayers(llm_ctx* ctx) {
  int32_t n = 0;
  for (const llm_device_stats& d : Devices(ctx)) n += d.end_layer - d.first_layer;
  return n;
}

llm_stats Stats(llm_ctx* ctx) {
  llm_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  EXPECT_EQ(llm_get_stats(ctx, &s), LLM_OK);
  return s;
}

// LLM_EMU_DEVICE_MIB for a device whose budget (gpu_memory_fraction 1: its
// memory less the headroom) holds about `layers` of the model's layers
// beside the rest of a context (Open's), by the footprint: rounded down to a
// MiB, so between `layers` less a MiB's worth and `layers`.
int64_t DeviceMibFor(const std::string& path, double layers) {
  auto m = Model::Load(path.c_str());
  EXPECT_TRUE(m.ok());
  if (!m.ok()) return 0;
  const ModelConfig& c = (*m)->config;
  const KvCacheSpec kv{16, 16, 128};
  CudaBackendOptions o;
  o.max_seqs = 2;
  o.max_batch_tokens = 64;
  auto need = [&](int32_t n) {
    o.n_layers = n;
    const auto f = EstimateCudaFootprint(c, (*m)->weights, kv, o);
    EXPECT_TRUE(f.ok()) << f.status().message();
    return f.ok() ? f->before_kv + (kv.n_blocks + 1) * f->kv_block : int64_t{0};
  };
  const int64_t one = need(1), per = need(2) - one;
  const double bytes = static_cast<double>(defaults::kCudaHeadroomBytes + one) + (layers - 1) * static_cast<double>(per);
  return static_cast<int64_t>(bytes) >> 20;
}

// The tests below size the device through LLM_EMU_DEVICE_MIB: the emulator
// only (a GPU's allocator rounds and cuBLAS allocates on its own, so a
// layer-exact bound, like the footprint's exact count above, is the
// emulator's to check). The search's tests run in every build.
#if LLM_CUDA_EMULATED
#define SKIP_WITHOUT_EMULATOR() SKIP_WITHOUT_DEVICE()
#else
#define SKIP_WITHOUT_EMULATOR() GTEST_SKIP() << "sizes the device through the CUDA emulator (LLM_EMU_DEVICE_MIB)"
#endif

const std::vector<llm_token> kPrompt = {5, 9, 33, 2, 17, 88, 41, 7, 12, 3, 250, 61};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kSteps = 3;  // the CI's sanitizer stages: the same paths, fewer steps
#else
constexpr int kSteps = 6;
#endif
constexpr float kNearTie = 0.1f;  // test_cuda_capi's tolerance

// The largest layer count that loads: auto's, and one more fails.
TEST(CudaAutoFit, PicksTheMostLayersThatLoad) {
  SKIP_WITHOUT_EMULATOR();
  const std::string path = SynthShape("tiny", 8, "dense");
  llm_ctx* cpu = Open(path, LLM_BACKEND_CPU, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(cpu, nullptr) << llm_last_error();
  EXPECT_EQ(Stats(cpu).backend, LLM_BACKEND_CPU);  // the CPU backend ignores it
  const ApiGreedyRun want = ApiGreedy(cpu, kPrompt, kSteps);
  ASSERT_EQ(want.status, LLM_OK);
  llm_ctx_destroy(cpu);

  std::vector<int32_t> seen;
  for (double layers : {2.5, 5.5}) {
    const int64_t mib = DeviceMibFor(path, layers);
    ASSERT_GT(mib, 0);
    ScopedEnv mem("LLM_EMU_DEVICE_MIB", std::to_string(mib));
    llm_ctx* ctx = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO);
    ASSERT_NE(ctx, nullptr) << llm_last_error();
    const int32_t k = GpuLayers(ctx);
    seen.push_back(k);
    EXPECT_EQ(Stats(ctx).backend, LLM_BACKEND_CUDA);
    const std::vector<llm_device_stats> d = Devices(ctx);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].first_layer, 0);
    EXPECT_LE(d[0].used_bytes, d[0].total_bytes - static_cast<uint64_t>(defaults::kCudaHeadroomBytes));
    const ApiGreedyRun got = ApiGreedy(ctx, kPrompt, kSteps);
    ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
    ExpectEqualUpToNearTie(want, got, kNearTie);
    llm_ctx_destroy(ctx);
    ASSERT_GT(k, 0);
    ASSERT_LT(k, 8) << mib << " MiB";
    llm_status st = LLM_OK;
    llm_ctx* same = Open(path, LLM_BACKEND_CUDA, k, &st);  // auto's choice, by hand
    EXPECT_NE(same, nullptr) << llm_last_error();
    llm_ctx_destroy(same);
    llm_ctx* more = Open(path, LLM_BACKEND_CUDA, k + 1, &st);
    EXPECT_EQ(more, nullptr) << k + 1 << " layers loaded in " << mib << " MiB";
    EXPECT_EQ(st, LLM_ERR_OUT_OF_MEMORY) << llm_last_error();
    llm_ctx_destroy(more);
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_LT(seen[0], seen[1]);
  // A device with room for everything: every layer, as -1.
  llm_ctx* all = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(all, nullptr) << llm_last_error();
  EXPECT_EQ(GpuLayers(all), 8);
  llm_ctx_destroy(all);
  std::remove(path.c_str());
}

// A prompt as long as the context never fails for want of device memory:
// the fit reserves the whole KV pool the context asks for (max_seqs x
// n_ctx) and the activations of a max_batch_tokens chunk before it counts
// layers, so on the tightest device that still takes layers, two prompts
// of nearly n_ctx tokens each (chunked prefill), one after the other and
// then at once, run to the end and match the CPU.
TEST(CudaAutoFit, FullContextPromptsRunOnAFittedDevice) {
  SKIP_WITHOUT_EMULATOR();
  const std::string path = SynthShape("tiny", 8, "dense");
  std::vector<llm_token> longp(124);  // n_ctx 128: 124 + 4 generated
  for (size_t i = 0; i < longp.size(); ++i) longp[i] = static_cast<llm_token>((i * 37 + 11) % 240 + 2);
  std::vector<llm_token> other(longp.rbegin(), longp.rend());
  llm_ctx* cpu = Open(path, LLM_BACKEND_CPU, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(cpu, nullptr) << llm_last_error();
  const ApiGreedyRun want = ApiGreedy(cpu, longp, 4);
  const ApiGreedyRun want2 = ApiGreedy(cpu, other, 4);
  ASSERT_EQ(want.status, LLM_OK);
  ASSERT_EQ(want2.status, LLM_OK);
  llm_ctx_destroy(cpu);
  ScopedEnv mem("LLM_EMU_DEVICE_MIB", std::to_string(DeviceMibFor(path, 2.5)));
  llm_ctx* ctx = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(ctx, nullptr) << llm_last_error();
  EXPECT_GT(GpuLayers(ctx), 0);
  EXPECT_LT(GpuLayers(ctx), 8);
  const ApiGreedyRun got = ApiGreedy(ctx, longp, 4);
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want, got, kNearTie);
  const ApiGreedyRun got2 = ApiGreedy(ctx, other, 4);
  ASSERT_EQ(got2.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want2, got2, kNearTie);
  // both at once: the pool holds max_seqs full contexts
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_request_id ids[2] = {0, 0};
  const std::vector<llm_token>* prompts[2] = {&longp, &other};
  for (int i = 0; i < 2; ++i) {
    llm_request r;
    llm_request_init(&r);
    r.prompt_tokens = prompts[i]->data();
    r.n_prompt_tokens = static_cast<int32_t>(prompts[i]->size());
    r.max_tokens = 4;
    r.ignore_eos = 1;
    r.sampling = &sp;
    ASSERT_EQ(llm_submit(ctx, &r, &ids[i]), LLM_OK) << llm_last_error();
  }
  int finals = 0;
  std::vector<llm_token> toks[2];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (finals < 2 && std::chrono::steady_clock::now() < deadline) {
    llm_event ev[16];
    for (llm_event& e : ev) {
      std::memset(&e, 0, sizeof e);
      e.struct_size = sizeof e;
    }
    uint32_t n = 0;
    ASSERT_EQ(llm_poll(ctx, ev, 16, &n, 1000), LLM_OK);
    for (uint32_t i = 0; i < n; ++i) {
      const int which = ev[i].request_id == ids[0] ? 0 : 1;
      if (ev[i].type == LLM_EVENT_TOKEN) toks[which].push_back(ev[i].token);
      if (ev[i].type == LLM_EVENT_FINAL) {
        EXPECT_EQ(ev[i].status, LLM_OK) << "request " << which;
        ++finals;
      }
    }
  }
  EXPECT_EQ(finals, 2);
  EXPECT_EQ(toks[0].size(), 4u);  // every token of both (their values: the near-tie checks above)
  EXPECT_EQ(toks[1].size(), 4u);
  llm_ctx_destroy(ctx);
  std::remove(path.c_str());
}

// Experts in host memory before whole layers leave the device.
TEST(CudaAutoFit, MoeExpertsGoToHostFirst) {
  SKIP_WITHOUT_EMULATOR();
  const std::string path = SynthShape("tiny-qwen3moe-k", 4, "moe");
  llm_ctx* cpu = Open(path, LLM_BACKEND_CPU, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(cpu, nullptr) << llm_last_error();
  const ApiGreedyRun want = ApiGreedy(cpu, kPrompt, kSteps);
  ASSERT_EQ(want.status, LLM_OK);
  llm_ctx_destroy(cpu);
  // Room for 2.6 to 3.4 whole layers (a layer is mostly experts): the dense
  // part of all four fits, their experts do not.
  ScopedEnv mem("LLM_EMU_DEVICE_MIB", std::to_string(DeviceMibFor(path, 3.4)));
  llm_ctx* ctx = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(ctx, nullptr) << llm_last_error();
  EXPECT_EQ(GpuLayers(ctx), 4);
  const ApiGreedyRun got = ApiGreedy(ctx, kPrompt, kSteps);
  ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
  ExpectEqualUpToNearTie(want, got, kNearTie);
  const llm_stats s = Stats(ctx);  // the engine's figures, published by its steps
  EXPECT_GT(s.moe_copy_steps, 0u);
  const int32_t m = s.moe_host_layers;
  llm_ctx_destroy(ctx);
  ASSERT_GT(m, 0);
  EXPECT_LT(m, 4);
  // The fewest: one host layer fewer does not load.
  llm_status st = LLM_OK;
  llm_ctx* fewer = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_ALL, &st, m - 1);
  EXPECT_EQ(fewer, nullptr);
  EXPECT_EQ(st, LLM_ERR_OUT_OF_MEMORY) << llm_last_error();
  llm_ctx_destroy(fewer);
  // A caller's n_cpu_moe is kept: every layer's experts on the host.
  llm_ctx* fixed = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO, &st, -1);
  ASSERT_NE(fixed, nullptr) << llm_last_error();
  EXPECT_EQ(ApiGreedy(fixed, kPrompt, 1).status, LLM_OK);
  EXPECT_EQ(Stats(fixed).moe_host_layers, 4);
  llm_ctx_destroy(fixed);
  std::remove(path.c_str());
}

// Two emulated devices: the layers split between them by free memory.
TEST(CudaAutoFit, SplitsOverTwoDevices) {
  SKIP_WITHOUT_EMULATOR();
  ScopedEnv two("LLM_EMU_DEVICES", "2");
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  const std::string path = SynthShape("tiny", 8, "two");
  llm_ctx* cpu = Open(path, LLM_BACKEND_CPU, LLM_GPU_LAYERS_AUTO);
  ASSERT_NE(cpu, nullptr) << llm_last_error();
  const ApiGreedyRun want = ApiGreedy(cpu, kPrompt, kSteps);
  llm_ctx_destroy(cpu);
  {
    // Each device holds 2.6 to 3.4 layers: neither the model, both 4 to 6 of it.
    ScopedEnv mem("LLM_EMU_DEVICE_MIB", std::to_string(DeviceMibFor(path, 3.4)));
    llm_ctx* ctx = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO);
    ASSERT_NE(ctx, nullptr) << llm_last_error();
    const std::vector<llm_device_stats> d = Devices(ctx);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].device, 0);
    EXPECT_EQ(d[1].device, 1);
    EXPECT_EQ(d[1].first_layer, d[0].end_layer);
    const int32_t k = d[1].end_layer;
    EXPECT_GE(k, 4);
    EXPECT_LT(k, 8);
    EXPECT_GT(d[0].end_layer, 0);
    for (const llm_device_stats& x : d) EXPECT_GT(x.weight_bytes, 0u);
    const ApiGreedyRun got = ApiGreedy(ctx, kPrompt, kSteps);
    ASSERT_EQ(got.status, LLM_OK) << llm_last_error();
    ExpectEqualUpToNearTie(want, got, kNearTie);
    llm_ctx_destroy(ctx);
  }
#if LLM_HAVE_CUDA
  cudaSetDevice(0);
#endif
  std::remove(path.c_str());
}

// Not one layer fits: the CPU runs the model when the backend was left to
// us, an explicit CUDA backend is refused.
TEST(CudaAutoFit, NothingFitsFallsBackToTheCpu) {
  SKIP_WITHOUT_EMULATOR();
  const std::string path = SynthShape("tiny", 4, "none");
  ScopedEnv mem("LLM_EMU_DEVICE_MIB", std::to_string(DeviceMibFor(path, 0.5)));
  llm_status st = LLM_OK;
  llm_ctx* refused = Open(path, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_AUTO, &st);
  EXPECT_EQ(refused, nullptr);
  EXPECT_EQ(st, LLM_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::strstr(llm_last_error(), "not one layer fits"), nullptr) << llm_last_error();
  llm_ctx_destroy(refused);
  {
    ScopedEnv backend("LLM_BACKEND", "cuda");  // what AUTO resolves to (the emulator is never AUTO's own choice)
    llm_ctx* ctx = Open(path, LLM_BACKEND_AUTO, LLM_GPU_LAYERS_AUTO, &st);
    ASSERT_NE(ctx, nullptr) << llm_last_error();
    EXPECT_EQ(Stats(ctx).backend, LLM_BACKEND_CPU);
    EXPECT_TRUE(Devices(ctx).empty());
    const ApiGreedyRun got = ApiGreedy(ctx, kPrompt, 3);
    EXPECT_EQ(got.status, LLM_OK);
    llm_ctx_destroy(ctx);
  }
  // Out of range below AUTO.
  llm_ctx* bad = Open(path, LLM_BACKEND_CPU, LLM_GPU_LAYERS_AUTO - 1, &st);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llm::test
