// n_gpu_layers = LLM_GPU_LAYERS_AUTO (include/llm.h): before any weight
// reaches a device, the context builder asks here how many layers, on which
// devices, and with how many layers' experts in host memory the model fits
// the devices' free memory. Each device's budget is what the CUDA backend's
// KV sizing would leave it (gpu_memory_fraction of its total, less what is
// in use now, less defaults::kCudaHeadroomBytes); each stage's need is the
// backend's own footprint (backend.h, EstimateCudaFootprint) with the KV
// pool the context asks for; the search is backend/fit_plan.h's.
#pragma once

#include <string>

#include "backend/backend.h"
#include "llm.h"
#include "model/model.h"
#include "util/status.h"

namespace llm {

struct AutoFit {
  // `p` with the choice written in: n_gpu_layers (a count, or -1 for every
  // layer; 0 when nothing fits), n_cpu_moe, and the split as tensor_split
  // layer counts (unless main_gpu names the device).
  llm_ctx_params params{};
  int32_t gpu_layers = 0;
  std::string summary;  // one line for the log: what was chosen and why
};

// `kv`: the context's KV pool (block size, blocks wanted, kv_type);
// `options`: the CUDA backend's options as the context builder sets them.
// INVALID_ARGUMENT for a main_gpu or tensor_split naming a device that does
// not exist; the footprint's errors.
StatusOr<AutoFit> FitLayersToDevices(const llm_ctx_params& p, const Model& model, const KvCacheSpec& kv,
                                     const CudaBackendOptions& options);

}  // namespace llm
