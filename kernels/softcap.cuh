// Logit soft-capping in place: v = cap * tanh(v / cap) (Gemma 2's final
// logits; the attention kernels cap their scores themselves).
#pragma once

#include "common.cuh"

namespace llm::cuda {

// x: (n) F32; cap > 0.
cudaError_t LaunchSoftcap(float* x, int64_t n, float cap, cudaStream_t stream);

}  // namespace llm::cuda
