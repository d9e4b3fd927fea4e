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
//
// Dense weights too: llama.cpp's CPU matmul converts the F32 activations to
// the weight type's vec_dot_type before multiplying (ggml_compute_forward_
// mul_mat; llamafile's sgemm takes an F16 A only with an F16 B): F16 for F16
// weights, BF16 for BF16, round to nearest even, then sums the products in
// F32. llmrt's dense kernels read F32 activations and widen the weights, so
// the same products come from the activations rounded to F16 / BF16 values
// and kept as F32 (RoundDenseAct): no kernel changes. On the llama-3.2-1b
// shape in F16 this one rounding brought llmrt's perplexity to llama.cpp's
// within 1.6e-5 (it was 2.4e-4 above), and its move to a Q4_0 V cache from
// +5.81% to +5.27% against llama.cpp's +5.36% / +5.44%
// (bench/results/2026-11-27-kv-ppl-act-f16.md). It costs accuracy against
// F32 activations (2^-11 relative per F16 input, 2^-8 per BF16):
// LLM_CPU_ACT=own switches it off with the Q8 roundings. Like those, it is
// the decoder's (forward.cpp, moe.cpp, lanes.cpp); the BERT-style encoder,
// the vision towers and decoder_embed.cpp's projections keep their own.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "model/tensor_type.h"
#include "model/weights.h"

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
// Q8_K's portable code (QuantizeRowAsQ8_K runs an AVX2 copy where the CPU
// has AVX2: the same bits, tests/test_quant.cpp).
void QuantizeRowAsQ8_KScalar(const float* x, int64_t n, BlockQ8Act* out);

enum class DenseActRounding { kNone, kF16, kBF16 };

// The rounding llama.cpp gives the input of one matmul over ws[0 .. n_ws)
// (weights that read the same activations: Q, K and V; gate and up): kF16
// when every weight is F16, kBF16 when every one is BF16, else kNone (F32 or
// block-quantized weights, or a mix: then there is no one rounding to copy).
DenseActRounding PeerDenseActRounding(const WeightView* const* ws, int n_ws);

// x (n values) rounded to F16 (kF16) or BF16 (kBF16), nearest even, as F32
// values into out (n values). kNone copies x.
void RoundDenseAct(DenseActRounding r, const float* x, int64_t n, float* out);

// The query in llama.cpp's CPU flash attention. Its one-row path (every
// configuration but K and V both F16 or both F32: a quantized K or V, or K
// and V of different types) converts each query row to the K type's
// vec_dot_type before the dot products with the keys: Q8_0 blocks for a
// Q4_0 or a Q8_0 K (PeerActRounding's kQ8_0), so the scores are those of
// the rounded query. llmrt's attention kernels read an F32 query; the same
// scores come from the query replaced by its Q8_0 rounding's values. Like
// the other roundings here it is the decoder's (forward.cpp,
// RopeAndStoreKv) and LLM_CPU_ACT=own switches it off. On the 1B shape it
// moved the Q4_0 / Q4_0 cache's perplexity move from +4.35% to +4.25%
// (llama.cpp +4.08%) and Q8_0 / Q4_0's from +5.44% to +5.35% (+5.30%):
// bench/results/2026-11-28-kv-ppl-q8-query.md. (For an F16 K with a
// quantized V the one-row path rounds q to F16: not copied, see there.)

// How a query read against keys of `k_type` is rounded. q8_0: a Q8_0
// vec_dot_type, head_dim a multiple of 32 (else llama.cpp has no such
// cache) and not own (LLM_CPU_ACT=own keeps it F32). basis: where llmrt
// keeps its keys unrotated (k_rotation 0: its Q8_0 cache) and llama.cpp
// rotates them (every quantized K, head_dim a multiple of 64), the size
// of that rotation (KvRotationK), for RoundQueryAsQ8_0; else 0.
struct QueryRounding {
  bool q8_0 = false;
  int64_t basis = 0;
};
QueryRounding PeerQueryRounding(TensorType k_type, int64_t head_dim, int64_t k_rotation, bool own);

// x (n values, n % 32 == 0) replaced by its Q8_0 rounding, dequantized:
// per 32 values d = max|x| / 127 rounded to F16, x · (127 / max|x|)
// rounded to the nearest integer (ties to even), value d · q (exact in
// F32). The rule of QuantizeRowAsQ8_0, which is llama.cpp's AVX2
// quantize_row_q8_0 (tests/test_act_rounding.cpp).
void RoundAsQ8_0InPlace(float* x, int64_t n);

// q (n values, n % 32 == 0: query heads of a head_dim that is a multiple
// of 32) as llama.cpp's attention reads it, in the basis of its keys:
// basis 0, RoundAsQ8_0InPlace (llmrt's keys are stored as llama.cpp's are,
// rotated or not); else H · Q8_0(H · q), H the Hadamard rotation of size
// `basis` (backend/kv_rotation.h): llama.cpp's keys are rotated and
// llmrt's are not (its Q8_0 cache), so the scores q · k are llama.cpp's
// Q8_0(H q) · (H k), H being orthonormal and symmetric.
void RoundQueryAsQ8_0(float* q, int64_t n, int64_t basis);

// The input a matmul over ws[0 .. n_ws) reads, x being its n values: x
// itself when `own` (LLM_CPU_ACT=own) or PeerDenseActRounding is kNone;
// else x rounded into *scratch (grown to n floats) and scratch's data. Never
// over x: callers reuse their activations (MoE experts gather the router's
// input, the lanes' classifier reads its rows after the call).
const float* RoundDenseInput(const WeightView* const* ws, int n_ws, const float* x, int64_t n, bool own,
                             std::vector<float>* scratch);

}  // namespace llm::cpu
