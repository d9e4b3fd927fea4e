// Rotary position embedding, GGUF `llama` convention: adjacent pairs
// (x[2i], x[2i+1]) of each head's first rope_dim values are rotated by the
// angle pos * inv_freq[i], inv_freq[i] = theta^(-2i/rope_dim), with linear or
// Llama 3 frequency scaling applied to inv_freq once at construction.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace llm::cpu {

class Rope {
 public:
  // UNSUPPORTED for scaling types this backend does not implement (YaRN).
  static StatusOr<Rope> Create(const ModelConfig& config);

  int32_t n_pairs() const { return static_cast<int32_t>(inv_freq_.size()); }

  // cos_sin: (n_pairs, 2) scratch for one position, filled here.
  void Angles(int64_t pos, float* cos_sin) const;
  // Rotates every head of x (n_heads, head_dim) in place with `cos_sin`.
  void Apply(const float* cos_sin, float* x, int32_t n_heads, int32_t head_dim) const;

 private:
  std::vector<double> inv_freq_;  // (rope_dim / 2)
};

}  // namespace llm::cpu
