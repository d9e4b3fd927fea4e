// The GEMMs of embedding steps (y = x·Wᵀ, or y += with a.accumulate, over
// whole sequences, tens to hundreds of tokens: the encoder's, and a decoder's
// Encode step in forward.cpp): on a CPU with AVX-512F, F32 / F16 / BF16 weights go through a
// 16-lane tile here; everything else (block-quantized weights, other CPUs,
// LLM_CPU_ISA=generic|avx2) through Kernels::matmul.
//
// Each output is one 16-lane accumulator over k ascending, summed in a fixed
// order, then the K % 16 tail with scalar FMAs: the same arithmetic for
// every tile shape, so a token's row is bitwise independent of how many
// tokens share the call and of the row range a thread takes.
#pragma once

#include "backend/cpu/kernels.h"

namespace llm::cpu {

// Whether EncoderMatMul uses the AVX-512 tile on this CPU (and environment).
bool EncoderMatMulAvx512();

// As kernels.matmul(a), possibly through the AVX-512 tile.
void EncoderMatMul(const Kernels& kernels, const MatMulArgs& a);

// As kernels.matmul(a), possibly through the AMX-BF16 tile GEMM (F16 and
// BF16 weights where AmxBf16Usable(), amx.h: embed_matmul_amx.h, about F32
// accuracy, for every n_tok) or the AVX-512 panel GEMM (F32 weights, or no
// AMX): for a
// decoder's embedding step (forward.cpp), whose calls carry a whole batch
// of sequences (hundreds to thousands of tokens), so that widening and
// transposing 32 rows of W per panel costs little beside the panel's
// n_tok · 32 · K multiply-adds. Its sums are split differently from
// EncoderMatMul's (one lane per output, k in blocks of 64 added in turn to
// y with accumulate, else to 0), so the two agree to rounding only; each is bitwise independent of n_tok, of the
// tile a token falls in and of the thread's row range.
void EmbedStepMatMul(const Kernels& kernels, const MatMulArgs& a);

}  // namespace llm::cpu
