// Block-quantized matmuls (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, MXFP4,
// TQ1_0, TQ2_0).
//
// The activations of a matmul are quantized once to BlockQ8Act (kernels.h);
// then each output is a sum over 32-weight blocks of
//
//   (d_w · d_x) · Σ q_w q_x   [+ m_w · s_x for the formats with a minimum]
//
// with the inner Σ in exact integer arithmetic. The per-block float terms are
// added in a fixed order that depends only on the row length, so an output
// does not depend on the thread, row range or batch it is computed in.
//
// quant_generic.cpp holds the portable versions (plain C++, also the
// reference the AVX2 ones are tested against; its row/token loops are in
// quant_matmul_impl.h), quant_avx2.cpp the AVX2 ones (tiled: several rows
// and tokens per unpacked block).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"

namespace llm::cpu {

// Dot product of one weight row (n_blocks32 * 32 weights of its type) with
// one quantized activation row.
using QuantDotFn = float (*)(const uint8_t* w, const BlockQ8Act* x, int64_t n_blocks32);

namespace generic {
void QuantizeActImpl(const float* x, int64_t n, BlockQ8Act* out);
void QuantMatMulImpl(const MatMulArgs& a);
QuantDotFn QuantDot(TensorType type);  // nullptr: not block-quantized
}  // namespace generic

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace avx2 {
void QuantizeActImpl(const float* x, int64_t n, BlockQ8Act* out);
void QuantMatMulImpl(const MatMulArgs& a);
QuantDotFn QuantDot(TensorType type);
// The packed-rows half of QuantMatMulImpl (quant_avx2_packed.cpp): a.w is
// packed (a.w->packed != nullptr).
void PackedQuantMatMul(const MatMulArgs& a);
// The lattice types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S),
// decoded 8 rows at a time (quant_lattice_avx2.cpp): false for another type.
// Bitwise the portable QuantDot's order.
bool LatticeMatMul(const MatMulArgs& a);
QuantDotFn LatticeDot(TensorType type);  // nullptr: not a lattice type
}  // namespace avx2
namespace vnni {
// The same with AVX-512 VNNI (quant_vnni_packed.cpp): bitwise the same
// outputs; call only where PackedVnniUsable().
void PackedQuantMatMul(const MatMulArgs& a);
}  // namespace vnni
// Whether this CPU runs vnni::PackedQuantMatMul (AVX512F, AVX512VL,
// AVX512_VNNI) and LLM_CPU_ISA leaves it on (kernels_avx2.cpp).
bool PackedVnniUsable();
#endif

}  // namespace llm::cpu
