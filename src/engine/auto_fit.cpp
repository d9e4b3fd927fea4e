#include "engine/auto_fit.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/fit_plan.h"
#include "core/defaults.h"

namespace llm {
namespace {

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// What a context may allocate on `device` (AllocateKvPool's rule, the
// CUDA backend's): its share of the total, less what is in use, less the
// headroom. May be <= 0.
int64_t DeviceBudget(int device, float fraction) {
  const int64_t total = CudaDeviceTotalBytes(device), free_b = CudaDeviceFreeBytes(device);
  const double share = static_cast<double>(total) * fraction - static_cast<double>(total - free_b) -
                       static_cast<double>(defaults::kCudaHeadroomBytes);
  return static_cast<int64_t>(share);
}

std::string Describe(const FitPlan& plan, int32_t n_layer, int32_t n_blocks) {
  const int32_t k = plan.placement.gpu_layers();
  std::string s = "llmrt: n_gpu_layers auto: " + std::to_string(k) + " of " + std::to_string(n_layer) +
                  " layers on CUDA (";
  int32_t first = 0;
  for (size_t i = 0; i < plan.placement.shares.size(); ++i) {
    const DeviceShare& d = plan.placement.shares[i];
    if (i > 0) s += "; ";
    s += "device " + std::to_string(d.device) + ": layers " + std::to_string(first) + "-" +
         std::to_string(first + d.n_layers - 1) + ", " + Mib(plan.need[i]) + " of its " + Mib(plan.budget[i]);
    first += d.n_layers;
  }
  s += ")";
  if (plan.n_cpu_moe > 0) s += ", experts of layers 0-" + std::to_string(plan.n_cpu_moe - 1) + " in host memory";
  if (plan.n_cpu_moe < 0) s += ", experts of every device layer in host memory";
  if (k < n_layer) s += ", layers " + std::to_string(k) + "-" + std::to_string(n_layer - 1) + " on the CPU";
  s += ", KV pool " + std::to_string(n_blocks) + " blocks";
  return s;
}

}  // namespace

StatusOr<AutoFit> FitLayersToDevices(const llm_ctx_params& p, const Model& model, const KvCacheSpec& kv,
                                     const CudaBackendOptions& options) {
  const ModelConfig& c = model.config;
  const int n_dev = std::min(CudaDeviceCount(), LLM_MAX_DEVICES);
  FitProblem pb;
  pb.n_layer = c.n_layer;
  if (p.main_gpu >= 0) {
    if (p.main_gpu >= n_dev)
      return InvalidArgument("main_gpu " + std::to_string(p.main_gpu) + ": " + std::to_string(n_dev) +
                             " CUDA device(s) are present");
    pb.devices.push_back(FitDevice{p.main_gpu, DeviceBudget(p.main_gpu, options.gpu_memory_fraction)});
  } else {
    bool any_share = false;
    for (int i = 0; i < LLM_MAX_DEVICES; ++i) {
      if (p.tensor_split[i] == 0.0f) continue;
      any_share = true;
      if (i >= n_dev)
        return InvalidArgument("tensor_split gives device " + std::to_string(i) + " a share but " +
                               std::to_string(n_dev) + " CUDA device(s) are present");
    }
    for (int i = 0; i < n_dev; ++i) {
      pb.devices.push_back(FitDevice{i, DeviceBudget(i, options.gpu_memory_fraction)});
      if (any_share) pb.proportions.push_back(p.tensor_split[i]);
    }
  }
  if (pb.devices.empty()) return Unsupported("n_gpu_layers auto: no CUDA device");
  const bool moe = c.n_expert > 0;
  pb.host_experts_allowed = moe && p.n_cpu_moe == 0;
  pb.fixed_n_cpu_moe = moe ? p.n_cpu_moe : 0;
  const int64_t blocks = int64_t{kv.n_blocks} + 1;  // the pool holds one scratch block more
  const FitStageCost cost = [&](int32_t first, int32_t end, int32_t n_cpu_moe) -> StatusOr<int64_t> {
    CudaBackendOptions o = options;
    o.first_layer = first;
    o.n_layers = end;
    o.n_cpu_moe = n_cpu_moe;
    LLM_ASSIGN_OR_RETURN(const CudaFootprint f, EstimateCudaFootprint(c, model.weights, kv, o));
    return f.before_kv + blocks * f.kv_block;
  };
  LLM_ASSIGN_OR_RETURN(const FitPlan plan, PlanFit(pb, cost));

  AutoFit fit;
  fit.params = p;
  fit.gpu_layers = plan.placement.gpu_layers();
  if (fit.gpu_layers == 0) {
    const FitDevice& d = pb.devices.front();
    LLM_ASSIGN_OR_RETURN(const int64_t one, cost(0, std::min<int32_t>(1, c.n_layer), pb.host_experts_allowed ? 1 : pb.fixed_n_cpu_moe));
    fit.params.n_gpu_layers = 0;
    fit.summary = "n_gpu_layers auto: not one layer fits: device " + std::to_string(d.device) + " needs " + Mib(one) +
                  " for the first layer with the workspaces and a KV pool of " + std::to_string(kv.n_blocks) +
                  " blocks, and has " + Mib(std::max<int64_t>(d.budget, 0)) +
                  " (gpu_memory_fraction of its memory, less what is in use and a " +
                  Mib(defaults::kCudaHeadroomBytes) + " margin)";
    return fit;
  }
  fit.params.n_gpu_layers = fit.gpu_layers == c.n_layer ? LLM_GPU_LAYERS_ALL : fit.gpu_layers;
  fit.params.n_cpu_moe = moe ? plan.n_cpu_moe : p.n_cpu_moe;
  if (p.main_gpu < 0) {
    // The plan's split as layer counts: SplitLayers of gpu_layers over these
    // proportions gives exactly them (each run ends at its cumulative count).
    for (float& f : fit.params.tensor_split) f = 0.0f;
    for (const DeviceShare& s : plan.placement.shares)
      fit.params.tensor_split[s.device] = static_cast<float>(s.n_layers);
  }
  fit.summary = Describe(plan, c.n_layer, kv.n_blocks);
  return fit;
}

}  // namespace llm
