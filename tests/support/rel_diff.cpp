#include "support/rel_diff.h"

#include <algorithm>
#include <cmath>

namespace llm::test {

RelDiff CompareRel(const float* got, const float* want, size_t n, double tol) {
  RelDiff d;
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double rel = e / std::max(std::fabs(static_cast<double>(want[i])), 1.0);
    d.worst = std::max(d.worst, rel);
    d.bad += rel > tol;
    err2 += e * e;
    ref2 += static_cast<double>(want[i]) * want[i];
  }
  d.norm = std::sqrt(err2 / ref2);
  return d;
}

}  // namespace llm::test
