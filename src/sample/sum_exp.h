// Vectorised pieces of softmax over a vocabulary row, chosen once at run time
// like the CPU kernels (backend/cpu/kernels.h): AVX2 + FMA where the CPU has
// them, else portable code. LLM_CPU_ISA=generic forces the portable path.
//
// Σ exp(x_i - max) is returned as the count of values equal to the max (each
// term exactly 1) plus the sum of the rest, so the rest keeps its digits
// however much smaller than 1 it is: log p of a near-certain token is
// -log1p(rest) with the relative accuracy of `rest`, not of 1 + rest.
//
// Accuracy (what TokenLogprob reports to users): the AVX2 path computes each
// exp in float to about 1 ulp and sums the terms in double, so `rest` has a
// relative error below 2e-7, and so has log p = (l - max) - log(n_max + rest)
// (log(s) >= (s - 1) / s bounds its absolute error by the value). The
// portable path uses std::exp in double.
#pragma once

#include <cstdint>

namespace llm {

struct MaxSumExp {
  float max;     // max over the non-NaN values; -inf when there is none
  double n_max;  // how many x_i equal max; 0 unless max is finite
  double rest;   // Σ exp(x_i - max) over the other non-NaN x_i; 0 unless max is finite

  double sum() const { return n_max + rest; }
};

// One row x (n): its max and Σ exp(x_i - max), NaN skipped.
MaxSumExp RowMaxSumExp(const float* x, int64_t n);

// The portable implementation, for tests.
MaxSumExp RowMaxSumExpPortable(const float* x, int64_t n);

}  // namespace llm
