// Block-quantized encodings for synthesized models (llm-synth --type q4_k_m):
// random weights written straight into Q4_K, Q6_K or Q8_0 blocks, and the
// per-tensor type choice of llama.cpp's Q4_K_M mix, so a benchmark can
// measure an 8B-shape Q4_K_M file without downloading one.
//
// Q4_K and Q6_K use one fixed scale for the whole tensor (every sub-block's
// 6-bit scale and minimum the same, sized from the weights' standard
// deviation): the values are N(0, stddev) rounded to a grid the format
// represents exactly, a valid file with the byte layout and size of a real
// one, not a faithful quantizer (benchmarks and loaders need no more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/tensor_type.h"

namespace llm::synth {

// Bytes of n weights of type t (n a whole number of t's blocks).
size_t EncodedBytes(TensorType t, int64_t n);

// n values of src (n a whole number of blocks) into type t's blocks at dst;
// stddev sizes the fixed Q4_K / Q6_K grid.
void EncodeQuant(TensorType t, const float* src, int64_t n, float stddev, char* dst);

// The type llama.cpp's Q4_K_M gives a llama tensor (its llama_tensor_get_type
// rules): output Q6_K; attn_v and ffn_down Q6_K in the first and last eighth
// of the layers and every third layer between, else Q4_K; everything else
// Q4_K. Rows of `cols` that are not a whole number of 256-weight blocks fall
// back to Q8_0 (32), else F16.
TensorType Q4KMType(const std::string& name, int layer, int n_layer, int64_t cols);

}  // namespace llm::synth
