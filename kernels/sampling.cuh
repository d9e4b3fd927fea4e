// Device sampling. Today the engine samples on the host from the logits the
// backend copies back; these kernels are for device-side sampling (greedy
// first) so a decode step can return token ids instead of n_vocab floats.
#pragma once

#include "common.cuh"

namespace llm::cuda {

// out[r] = argmax_j logits[r][j], the smallest j among equal maxima; NaN
// entries never win. logits: (n_rows, n_vocab) F32; out: (n_rows).
cudaError_t LaunchArgmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream);

}  // namespace llm::cuda
