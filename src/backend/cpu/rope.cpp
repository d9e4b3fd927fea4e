#include "backend/cpu/rope.h"

#include <cmath>

namespace llm::cpu {

StatusOr<Rope> Rope::Create(const ModelConfig& c, bool local) {
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    return InvalidArgument("rope_dim must be even and in (0, head_dim]");
  const float theta = local ? c.rope_theta_swa : c.rope_theta;
  if (!(theta > 0.0f)) return InvalidArgument("rope_theta must be positive");
  const RopeScaling s = local ? RopeScaling{} : c.rope_scaling;
  if (s.type == RopeScalingType::kYarn) return Unsupported("YaRN rope scaling is not supported by the CPU backend");
  if (s.type != RopeScalingType::kNone && !(s.factor > 0.0f)) return InvalidArgument("rope scaling factor must be positive");

  Rope r;
  r.neox_ = c.rope_style == RopeStyle::kNeox;
  const int n = c.rope_dim / 2;
  r.inv_freq_.resize(n);
  for (int i = 0; i < n; ++i) {
    double f = std::pow(static_cast<double>(theta), -2.0 * i / c.rope_dim);
    if (s.type == RopeScalingType::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      // Long wavelengths are slowed down by `factor`, short ones kept, and the
      // band between the two wavelength limits interpolated smoothly.
      if (s.original_ctx <= 0 || !(s.high_freq_factor > s.low_freq_factor))
        return InvalidArgument("llama3 rope scaling needs original_ctx and high_freq_factor > low_freq_factor");
      const double pi = 3.14159265358979323846;
      const double wavelen = 2.0 * pi / f;
      const double low_wavelen = s.original_ctx / static_cast<double>(s.low_freq_factor);
      const double high_wavelen = s.original_ctx / static_cast<double>(s.high_freq_factor);
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (s.original_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    r.inv_freq_[i] = f;
  }
  return r;
}

void Rope::Angles(int64_t pos, float* cos_sin) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    cos_sin[2 * i] = static_cast<float>(std::cos(a));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(a));
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
