// Rotary position embedding. Pair i of each head's first rope_dim values is
// rotated by the angle pos * inv_freq[i], inv_freq from model/rope_freq.h
// (theta^(-2i/rope_dim), the metadata's scaling, the file's rope_freqs
// factors), computed once at construction. The pairs are (x[2i], x[2i+1]) in the GGUF `llama`
// convention and (x[i], x[i + rope_dim/2]) in NEOX style (Gemma):
//
//   adjacent: [a0 b0 a1 b1 a2 b2 ...]     neox: [a0 a1 a2 ... | b0 b1 b2 ...]
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace llm::cpu {

class Rope {
 public:
  // freq_factors: the file's rope_freqs (empty: none). local: the rotation of
  // a sliding-window layer (base rope_theta_swa and no metadata scaling,
  // Gemma 3); otherwise base rope_theta with rope_scaling.
  static StatusOr<Rope> Create(const ModelConfig& config, std::span<const float> freq_factors = {},
                               bool local = false);

  int32_t n_pairs() const { return static_cast<int32_t>(inv_freq_.size()); }

  // cos_sin: (n_pairs, 2) scratch for one position, filled here.
  void Angles(int64_t pos, float* cos_sin) const;
  // M-RoPE (ModelConfig::mrope_sections): the angles of a token whose
  // (t, h, w) positions are pos3; pair i takes the position of its section
  // (i mod the sections' sum; the e section's position is 0).
  void AnglesMrope(const int32_t* pos3, float* cos_sin) const;
  // Rotates every head of x (n_heads, head_dim) in place with `cos_sin`.
  void Apply(const float* cos_sin, float* x, int32_t n_heads, int32_t head_dim) const;

 private:
  std::vector<double> inv_freq_;  // (rope_dim / 2)
  double magnitude_ = 1.0;        // cos and sin scaled by it (YaRN)
  bool neox_ = false;
  std::array<int32_t, 4> sections_{};  // all 0 unless M-RoPE
};

}  // namespace llm::cpu
