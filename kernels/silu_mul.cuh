// The gated FFN's activation: out = silu(gate) * up (SwiGLU), or
// gelu_tanh(gate) * up (GeGLU: Gemma) with gelu = true; gpt-oss's clamped
// SwiGLU over biased gate and up (LaunchSwigluOai).
#pragma once

#include "common.cuh"

namespace llm::cuda {

// gate_up: (n_tok, 2 * n_ff) F32, gate in columns [0, n_ff), up in [n_ff, 2 n_ff)
// (one GEMM over the fused [W_gate; W_up] weight); out: (n_tok, n_ff) bf16.
cudaError_t LaunchSiluMul(const float* gate_up, int32_t n_tok, int32_t n_ff, bf16* out, cudaStream_t stream,
                          bool gelu = false);

// gpt-oss's experts (model/config.h, kSwigluOai), over the MoE's permuted
// rows: g' = min(g + bg, limit), u' = clamp(u + bu, -limit, limit),
// out = g' * sigmoid(alpha * g') * (u' + 1). Row r's biases are expert
// pick_expert[order[r]]'s rows of bias_gate / bias_up ((n_expert, n_ff)
// F32); all three NULL: no biases. gate_up and out as LaunchSiluMul's.
cudaError_t LaunchSwigluOai(const float* gate_up, int32_t n_rows, int32_t n_ff, const float* bias_gate,
                            const float* bias_up, const int32_t* order, const int32_t* pick_expert, float alpha,
                            float limit, bf16* out, cudaStream_t stream);

}  // namespace llm::cuda
