#include "sample/sum_exp.h"

#include <cmath>
#include <limits>

#include "util/env.h"

namespace llm {

// sum_exp_avx2.cpp: nullptr when this build has no AVX2 version.
using RowMaxSumExpFn = MaxSumExp (*)(const float*, int64_t);
RowMaxSumExpFn RowMaxSumExpAvx2IfSupported();

MaxSumExp RowMaxSumExpPortable(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i];  // NaN never compares greater
  MaxSumExp r{m, 0.0, 0.0};
  if (!std::isfinite(m)) return r;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == m) {
      r.n_max += 1.0;
    } else if (!std::isnan(x[i])) {
      r.rest += std::exp(static_cast<double>(x[i]) - m);
    }
  }
  return r;
}

MaxSumExp RowMaxSumExp(const float* x, int64_t n) {
  static const RowMaxSumExpFn fn = [] {
    RowMaxSumExpFn f = ReadEnv().cpu_isa_generic ? nullptr : RowMaxSumExpAvx2IfSupported();
    return f != nullptr ? f : &RowMaxSumExpPortable;
  }();
  return fn(x, n);
}

}  // namespace llm
