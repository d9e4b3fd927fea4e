// The embedding step's GEMM on AMX-BF16 tiles (y = x·Wᵀ, or y += with
// accumulate; encoder_matmul.h's EmbedStepMatMul calls it where
// AmxBf16Usable()), for F16 and BF16 weights, to about F32 accuracy:
//
//   W (F16) = w_hi + w_lo exactly: w_hi = BF16(w) (8 significant bits),
//             w_lo = w - w_hi (<= 3 bits, exact in BF16); BF16 W: w_lo = 0.
//   x (F32) ≈ x_hi + x_lo: x_hi = BF16(x), x_lo = BF16(x - x_hi)
//             (16 significant bits; the dropped part is ~2^-17 of x).
//   y = Σ_k x_hi·w_lo + x_hi·w_hi + x_lo·w_hi     (x_lo·w_lo, ~2^-16 of a
//       product, dropped; the x_hi·w_lo term skipped for BF16 weights)
//
// Every product is exact in F32 and summed into an F32 tile accumulator.
// Each output is one accumulator element: 0, then for each block of 32 k
// in ascending order (K padded with zeros to a multiple of 32) the
// TDPBF16PS of the three products in the order above; then y = that
// (or y + that with accumulate). Nothing in that sequence depends on the
// number of tokens, the 16-token tile a token falls in, padding tokens or
// rows, or the row range a thread takes: a token's row is bitwise the same
// in any batch. (The AVX-512 panel GEMM sums differently; the two agree to
// rounding.)
//
// This header and its .cpp use no C++ library templates: the .cpp alone is
// compiled with -mamx-tile -mamx-bf16 -mavx512bf16 (CMakeLists.txt), so
// nothing it emits may be shared with code for older CPUs.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace llm::cpu {

struct AmxGemmArgs {
  const uint16_t* w = nullptr;  // rows of w_cols F16 or BF16 values, w_row_bytes apart
  size_t w_row_bytes = 0;
  bool w_bf16 = false;
  int64_t k = 0;  // columns of W and x
  const float* x = nullptr;
  int64_t ld_x = 0;
  int64_t n_tok = 0;
  float* y = nullptr;
  int64_t ld_y = 0;
  int64_t row_begin = 0;  // W rows (y columns) row_begin .. row_end-1
  int64_t row_end = 0;
  bool accumulate = false;
};

// Whether this build compiled the AMX kernel (x86-64 with GCC or clang).
bool AmxGemmCompiled();

// Bytes of scratch AmxGemm needs for a (the buffer 64-byte aligned).
size_t AmxGemmScratchBytes(const AmxGemmArgs& a);

// The GEMM; only on a thread of a process where AmxBf16Usable() (amx.h).
// It configures the tiles on entry and releases them on return.
void AmxGemm(const AmxGemmArgs& a, void* scratch);

}  // namespace llm::cpu
