// How far a vector is from a reference's, as the tests comparing with
// llama.cpp measure it: each value's difference relative to the reference
// value, |a - b| / max(|b|, 1), and the whole vector's error relative to the
// reference's norm, ||a - b|| / ||b||.
#pragma once

#include <cstddef>

namespace llm::test {

struct RelDiff {
  double worst = 0.0;  // the largest per-value relative difference
  double norm = 0.0;   // ||got - want|| / ||want||
  size_t bad = 0;      // values whose relative difference exceeds the tolerance
};

RelDiff CompareRel(const float* got, const float* want, size_t n, double tol);

}  // namespace llm::test
