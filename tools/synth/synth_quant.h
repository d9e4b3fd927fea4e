// Block-quantized encodings for synthesized models (llm-synth --type q4_k_m|lowbit|iqmix, and gpt-oss's MXFP4 experts):
// random weights written straight into Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, IQ4_NL,
// IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS or IQ3_S blocks, and the per-tensor type choice of llama.cpp's Q4_K_M mix (so a
// benchmark can measure an 8B-shape Q4_K_M file without downloading one) or
// of a low-bit mix (so tests run every type a downloaded file may hold).
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
// rules): output Q6_K; attn_v and ffn_down (the experts' and the shared
// expert's too) Q6_K in the first and last eighth of the layers and every
// third layer between, else Q4_K; a MoE router (ffn_gate_inp) F32;
// everything else Q4_K. Rows of `cols` that are not a whole number of 256-weight blocks fall
// back to Q8_0 (32), else F16.
TensorType Q4KMType(const std::string& name, int layer, int n_layer, int64_t cols);

// The low-bit mix (llm-synth --type lowbit), after the "dynamic" quants that
// mix non-linear and low-bit K-quant tensors: output Q6_K, attn_v IQ4_NL,
// attn_q and attn_k Q3_K (so the fused [Wq; Wk; Wv] mixes types), ffn_gate
// and ffn_up Q2_K, every other matrix IQ4_XS; rows that are not whole 256-weight blocks fall
// back to IQ4_NL (32), as llama.cpp's quantizer does, else F16. Encoded with
// per-block scales from the block's largest weight and the nearest grid
// value (a plain quantizer, not llama.cpp's search).
TensorType LowBitType(const std::string& name, int64_t cols);

// The lattice mix (llm-synth --type iqmix), after llama.cpp's IQ2/IQ3 files:
// output Q6_K, attn_v IQ2_XS (so the fused [Wq; Wk; Wv] mixes IQ3_XXS with
// IQ2_XS), attn_output IQ3_S, ffn_down IQ2_S, ffn_gate and ffn_up IQ2_XXS,
// every other matrix IQ3_XXS; rows that are not whole 256-weight blocks IQ4_NL (32), else F16.
// Encoded by a plain quantizer (scales from the largest weights, the nearest
// lattice point per group; not llama.cpp's search with an importance matrix).
TensorType IQMixType(const std::string& name, int64_t cols);

}  // namespace llm::synth
