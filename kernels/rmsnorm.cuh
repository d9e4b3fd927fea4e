// RMSNorm fused with the residual add; RMSNorm in place (post-norms).
#pragma once

#include "common.cuh"

namespace llm::cuda {

// For output row i < n_rows, with r = rows ? rows[i] : i:
//
//   v      = x[r] + (delta ? delta[r] : 0)           (n_embd) F32
//   x[r]   = v                  when delta && !rows  (the residual stream moves on)
//   out[i] = bf16(v / sqrt(mean(v²) + eps) * weight)
//
// x, delta: (≥ max r + 1, n_embd) F32; weight: (n_embd) F32; out: (n_rows, n_embd) bf16.
// With `rows` (pick the rows whose logits are wanted) x is left unchanged.
cudaError_t LaunchAddRmsNorm(float* x, const float* delta, const float* weight, const int32_t* rows,
                             int32_t n_rows, int32_t n_embd, float eps, bf16* out, cudaStream_t stream);

// Gemma's post-norms (post_attention_norm, post_ffw_norm): a sub-block's
// output normed in place before the next LaunchAddRmsNorm adds it,
//   y[i] = y[i] / sqrt(mean(y[i]²) + eps) * weight       y: (n_rows, n_embd) F32
cudaError_t LaunchRmsNormInPlace(float* y, const float* weight, int32_t n_rows, int32_t n_embd, float eps,
                                 cudaStream_t stream);

}  // namespace llm::cuda
