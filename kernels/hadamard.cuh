// The inverse rotation of a Q4_0 KV pool's values (backend/kv_rotation.h):
// the pool holds H v, so attention's output per head is H (Σ w v) and is
// turned back by H again (H·H = I) before the output projection.
#pragma once

#include "common.cuh"

namespace llm::cuda {

// x: (n_values) bf16, n_values % n == 0; each chunk of n values <- H_n chunk,
// computed in F32 with the CPU's butterflies and scale (1/sqrt(n)) and
// rounded to bf16 once. n: a power of two, 2 .. 256 (1 or 0: nothing to do).
cudaError_t LaunchHadamardBf16(bf16* x, int64_t n_values, int32_t n, cudaStream_t stream);

}  // namespace llm::cuda
