// Partial offload (llama.cpp's -ngl): a model too large for the GPU runs its
// first n_gpu_layers layers on the CUDA backend and the rest on the CPU
// backend, each layer's KV cache where the layer runs.
//
//   tokens ─► [CUDA: embedding, layers 0 .. N-1] ─► hidden (n_tok, n_embd) F32, host
//                                                        │
//   logits ◄─ [CPU: layers N .. n_layer-1, final norm, classifier] ◄─┘
//
// Both pools have the same n_blocks and block ids (the engine's one block
// table addresses both): a block's KV is its device part (layers < N) plus
// its host part (layers >= N). Copies, swaps and the swap space go to both.
// Family features (embedding scale, sliding-window layers, soft-caps, per-
// layer norms) follow the model's layer index in both halves: each backend
// indexes its weights and KV by the global layer number.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"

namespace llm {

// n_gpu_layers in (0, config.n_layer). `kv` is in/out as for
// CreateCudaBackend: the device pool is sized first (fit_kv_blocks counts
// only the device layers' KV), the host pool gets the same block count.
// The CPU half takes kv->kv_type and n_threads as CreateCpuBackend does.
// kind() is LLM_BACKEND_CUDA.
StatusOr<std::unique_ptr<Backend>> CreateSplitBackend(const ModelConfig& config, const ModelWeights& weights,
                                                      KvCacheSpec* kv, const CudaBackendOptions& options,
                                                      int32_t n_gpu_layers, int n_threads);

}  // namespace llm
