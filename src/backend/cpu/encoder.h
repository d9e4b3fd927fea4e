// The CPU backend for encoder models (BERT): Backend::Encode runs each
// sequence whole — attention over every token of it, no KV cache — and
// pools its hidden states. The decoder families' paged forward
// (forward.cpp) is not involved; Forward refuses.
//
// One sequence at a time, its matmuls split over the threads by weight rows
// and its attention by heads, so a sequence's vector is bitwise the same
// alone, in any batch and with any thread count (kernels.h's contract).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace llm::cpu {

// config.is_encoder must be set; `weights` must outlive the backend.
StatusOr<std::unique_ptr<Backend>> CreateCpuEncoder(const ModelConfig& config, const ModelWeights& weights,
                                                    int n_threads);

}  // namespace llm::cpu
