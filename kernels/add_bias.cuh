// A bias row added to every row of a matrix in place: y[t] += b (gpt-oss's
// attn_output.bias after the output projection).
#pragma once

#include "common.cuh"

namespace llm::cuda {

// y: (n_rows, n_cols) F32; b: (n_cols) F32.
cudaError_t LaunchAddBias(float* y, const float* b, int32_t n_rows, int32_t n_cols, cudaStream_t stream);

}  // namespace llm::cuda
