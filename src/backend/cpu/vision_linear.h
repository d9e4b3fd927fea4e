// The dense pieces a vision tower and its projector share on the CPU, over
// whole images' token rows (hundreds to thousands of rows per call):
// y = x·Wᵀ (+ b) through the embedding GEMM (encoder_matmul.h), LayerNorm
// and RMSNorm with ggml's arithmetic (sums in double, then one float scale).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace llm::cpu {

class VisionLinear {
 public:
  VisionLinear(const Kernels& k, ThreadPool& pool) : k_(k), pool_(pool) {}

  // y (n, w.rows) = x (n, w.cols) · wᵀ, plus b (w.rows, F32) when not empty;
  // accumulate: y += instead (the residual add).
  void operator()(const WeightView& w, const WeightView& b, const float* x, int64_t n, float* y,
                  bool accumulate = false);

 private:
  const Kernels& k_;
  ThreadPool& pool_;
  std::vector<BlockQ8Act> xq_;
};

// out (n, d) = layernorm(x) * w + b row by row (out may be x).
void LayerNormRows(const float* x, int64_t n, int64_t d, const float* w, const float* b, float eps, float* out);

// x = x·σ(1.702x) = x / (1 + e^(-1.702x)), elementwise (CLIP's quick GELU).
void GeluQuick(float* x, int64_t n);

// x (n, d) = x / sqrt(mean(x²) + eps) * w, row by row.
void RmsNormRows(float* x, int64_t n, int64_t d, const float* w, float eps);

}  // namespace llm::cpu
