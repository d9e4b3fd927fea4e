// Decode-sized products with block-quantized weights: y = x · Wᵀ for 1..8
// activation rows, streaming each weight block once and dequantizing it in
// registers (quant_blocks.cuh), F32 accumulation.
#pragma once

#include "quant_matrix.cuh"

namespace llm::cuda {

// Activation rows one launch takes; more go through LaunchDequantRows and a
// BF16 GEMM (the backend's MatMul).
constexpr int32_t kQuantGemvMaxRows = 8;

// y (n, w.rows) F32, row stride w.rows = x (n, w.cols) bf16 · Wᵀ, for
// 1 <= n <= kQuantGemvMaxRows. Every part of a fused W in one launch.
cudaError_t LaunchQuantGemv(const QuantMatrix& w, const bf16* x, int32_t n, float* y, cudaStream_t stream);

}  // namespace llm::cuda
