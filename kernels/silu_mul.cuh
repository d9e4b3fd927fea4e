// The gated FFN's activation: out = silu(gate) * up (SwiGLU), or
// gelu_tanh(gate) * up (GeGLU: Gemma) with gelu = true.
#pragma once

#include "common.cuh"

namespace llm::cuda {

// gate_up: (n_tok, 2 * n_ff) F32, gate in columns [0, n_ff), up in [n_ff, 2 n_ff)
// (one GEMM over the fused [W_gate; W_up] weight); out: (n_tok, n_ff) bf16.
cudaError_t LaunchSiluMul(const float* gate_up, int32_t n_tok, int32_t n_ff, bf16* out, cudaStream_t stream,
                          bool gelu = false);

}  // namespace llm::cuda
