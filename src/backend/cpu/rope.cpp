#include "backend/cpu/rope.h"

#include <cmath>

#include "model/rope_freq.h"

namespace llm::cpu {

StatusOr<Rope> Rope::Create(const ModelConfig& c, std::span<const float> freq_factors, bool local) {
  Rope r;
  LLM_ASSIGN_OR_RETURN(r.inv_freq_, RopeInvFreq(c, freq_factors, local));
  r.neox_ = c.rope_style == RopeStyle::kNeox;
  r.magnitude_ = RopeMagnitude(c, local);
  return r;
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
