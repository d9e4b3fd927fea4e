// A model split by layers over several backends (llama.cpp's -ngl and its
// default layer split): consecutive runs of layers on CUDA devices (one
// CUDA backend per device, layer_placement.h), the layers no device took
// on the CPU backend, each layer's KV cache where the layer runs.
//
//   tokens ─► [CUDA dev a: embedding, layers 0 .. A-1] ─► hidden (n_tok, n_embd) F32, host
//                                                               │
//             [CUDA dev b: layers A .. B-1] ◄──────────────────┘ ─► hidden
//                                                                      │
//   logits ◄─ [CPU: layers B .. n_layer-1, final norm, classifier] ◄──┘
//             (or the last device's, when the devices hold every layer)
//
// The residual stream travels through host memory between stages: one
// (n_tok, n_embd) F32 copy down and up per stage per step, small beside the
// layers' work, and the same path whatever the devices' peer access.
//
// Every pool has the same n_blocks and block ids (the engine's one block
// table addresses them all): a block's KV is the sum of its parts, one per
// stage. Copies, swaps and the swap space go to every stage. Family
// features (embedding scale, sliding-window layers, soft-caps, per-layer
// norms) follow the model's layer index: each backend indexes its weights
// and KV by the global layer number.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/layer_placement.h"

namespace llm {

// placement: the device runs (at least one layer, gpu_layers() <=
// n_layer); a CPU backend runs the rest. `kv` is in/out as for
// CreateCudaBackend: with options.fit_kv_blocks every device pool fits its
// device and all get the smallest of those counts; the host pool gets the
// same. options.device is ignored (each share names its device). The CPU
// half takes kv->kv_type and n_threads as CreateCpuBackend does. kind() is
// LLM_BACKEND_CUDA.
StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      const LayerPlacement& placement, int n_threads);

// Partial offload on options.device: layers [0, n_gpu_layers) there, the
// rest on the CPU; n_gpu_layers in (0, config.n_layer).
StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      int32_t n_gpu_layers, int n_threads);

}  // namespace llm
