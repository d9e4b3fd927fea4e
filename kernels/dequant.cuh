// Block-quantized weights (quant_matrix.cuh) to plain values on the device:
// rows to BF16 (the prefill path's scratch, multiplied by cuBLAS), and the
// token-embedding gather from a quantized table to F32.
#pragma once

#include "quant_matrix.cuh"

namespace llm::cuda {

// out (n_rows, w.cols) bf16 = rows [row0, row0 + n_rows) of w, dequantized
// (the CPU backend's values, rounded to nearest-even BF16).
cudaError_t LaunchDequantRows(const QuantMatrix& w, int32_t row0, int32_t n_rows, bf16* out, cudaStream_t stream);

// out[t] (w.cols) F32 = row tokens[t] of w * scale (exactly the CPU
// backend's DequantizeRow and its embedding scale: Gemma's sqrt(n_embd)),
// t < n_tok. A token outside [0, w.rows) (the host validates; this is a
// guard) gives a row of NaN rather than an out-of-range read.
cudaError_t LaunchQuantEmbedding(const QuantMatrix& w, const int32_t* tokens, int32_t n_tok, float* out,
                                 cudaStream_t stream, float scale = 1.0f);

}  // namespace llm::cuda
