// Embedding gather: out[t] = float(table[tokens[t]]) * scale (Gemma: sqrt(n_embd)).
#pragma once

#include "common.cuh"

namespace llm::cuda {

// table: (n_vocab, n_embd) bf16; tokens: (n_tok); out: (n_tok, n_embd) F32.
// A token id outside [0, n_vocab) (the host validates; this is a guard)
// gives a row of NaN rather than an out-of-range read.
cudaError_t LaunchEmbedding(const bf16* table, int32_t n_vocab, int32_t n_embd, const int32_t* tokens,
                            int32_t n_tok, float* out, cudaStream_t stream, float scale = 1.0f);

}  // namespace llm::cuda
