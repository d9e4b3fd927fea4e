// How a block-quantized matmul's activations are rounded to BlockQ8Act
// (kernels.h). llmrt's own rounding (Kernels::quantize_act) gives every
// 32-value block its own F32 scale. llama.cpp rounds the activations of each
// weight type to that type's "vec_dot" block format instead:
//
//   Q8_0 (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4): 32-value blocks, F16 scale
//   Q8_1 (Q4_1, Q5_1): the same, with the block sum as F16
//   Q8_K (the K-quants, IQ1..IQ3, IQ4_XS, TQ1_0, TQ2_0): 256-value blocks,
//        one F32 scale, the value of largest magnitude at -127
//
// Coarser rounding gives slightly different products; on the low-bit files
// of issue 32 it moved perplexity up to 0.9% away from llama.cpp's
// (bench/results). Rounding as llama.cpp does is exact in the same kernels:
// a 256-value block is eight BlockQ8Act blocks that share one scale, so the
// integer dot products are unchanged and no kernel has a second version.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"
#include "model/tensor_type.h"

namespace llm::cpu {

enum class ActRounding { kOwn, kQ8_0, kQ8_1, kQ8_K };

// The rounding llama.cpp gives activations multiplied with `type`
// (kOwn for types that are not block-quantized).
ActRounding PeerActRounding(TensorType type);

// x (n, a multiple of 32; for kQ8_K of 256) as llama.cpp's Q8_0 / Q8_1 /
// Q8_K blocks, written as BlockQ8Act (d, s = d * Σq, q).
void QuantizeRowAsQ8_0(const float* x, int64_t n, BlockQ8Act* out);
void QuantizeRowAsQ8_1(const float* x, int64_t n, BlockQ8Act* out);
void QuantizeRowAsQ8_K(const float* x, int64_t n, BlockQ8Act* out);

}  // namespace llm::cpu
