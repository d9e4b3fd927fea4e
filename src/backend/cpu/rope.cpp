#include "backend/cpu/rope.h"

#include <cmath>

#include "model/rope_freq.h"

namespace llm::cpu {

StatusOr<Rope> Rope::Create(const ModelConfig& c, std::span<const float> freq_factors, bool local) {
  Rope r;
  LLM_ASSIGN_OR_RETURN(r.inv_freq_, RopeInvFreq(c, freq_factors, local));
  r.neox_ = c.rope_style == RopeStyle::kNeox;
  r.magnitude_ = RopeMagnitude(c, local);
  r.sections_ = c.mrope_sections;
  return r;
}

void Rope::AnglesMrope(const int32_t* pos3, float* cos_sin) const {
  const int32_t s0 = sections_[0], s1 = s0 + sections_[1], s2 = s1 + sections_[2];
  const int32_t sum = s2 + sections_[3];
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const int32_t sector = sum > 0 ? static_cast<int32_t>(i % static_cast<size_t>(sum)) : 0;
    const int32_t p = sector < s0 ? pos3[0] : sector < s1 ? pos3[1] : sector < s2 ? pos3[2] : 0;
    const double a = static_cast<double>(p) * inv_freq_[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(a) * magnitude_);
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(a) * magnitude_);
  }
}

void Rope::Angles(int64_t pos, float* cos_sin) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(a) * magnitude_);
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(a) * magnitude_);
  }
}

void Rope::Apply(const float* cos_sin, float* x, int32_t n_heads, int32_t head_dim) const {
  const int n = n_pairs();
  if (neox_) {
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<int64_t>(h) * head_dim;
      for (int i = 0; i < n; ++i) {
        const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        const float x0 = v[i], x1 = v[i + n];
        v[i] = x0 * c - x1 * s;
        v[i + n] = x0 * s + x1 * c;
      }
    }
    return;
  }
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < n; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * c - x1 * s;
      v[2 * i + 1] = x0 * s + x1 * c;
    }
  }
}

}  // namespace llm::cpu
