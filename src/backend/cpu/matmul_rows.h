// The MatMulArgs of one row range of a dense product, as the callers that
// split y = x·Wᵀ over weight rows (a thread pool's ranges) fill them:
// x (n_tok, w.cols), its quantized blocks xq (n_tok, w.cols / 32; nullptr
// for an unquantized W) and y (n_tok, w.rows), each row right after the
// last. The encoder's and the vision tower's linears and a decoder's
// embedding projections (encoder.cpp, vision_linear.cpp, decoder_embed.cpp)
// and the decoder step's matmuls (forward.cpp's MatMulJobs).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"

namespace llm::cpu {

inline MatMulArgs DenseRowRange(const WeightView& w, const float* x, const BlockQ8Act* xq, int64_t n_tok, float* y,
                                int64_t row_begin, int64_t row_end, bool accumulate = false) {
  MatMulArgs a;
  a.w = &w;
  a.x = x;
  a.ld_x = w.cols;
  a.xq = xq;
  a.ld_xq = w.cols / 32;
  a.n_tok = n_tok;
  a.y = y;
  a.ld_y = w.rows;
  a.row_begin = row_begin;
  a.row_end = row_end;
  a.accumulate = accumulate;
  return a;
}

}  // namespace llm::cpu
