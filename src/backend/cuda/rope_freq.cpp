#include "backend/cuda/rope_freq.h"

#include <cmath>

namespace llm::cuda {

StatusOr<std::vector<double>> RopeInvFreq(const ModelConfig& c) {
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    return InvalidArgument("rope_dim must be even and in (0, head_dim]");
  if (!(c.rope_theta > 0.0f)) return InvalidArgument("rope_theta must be positive");
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kYarn) return Unsupported("YaRN rope scaling is not supported by the CUDA backend");
  if (s.type != RopeScalingType::kNone && !(s.factor > 0.0f)) return InvalidArgument("rope scaling factor must be positive");
  std::vector<double> f(c.rope_dim / 2);
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    double v = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.rope_dim);
    if (s.type == RopeScalingType::kLinear) {
      v /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      if (s.original_ctx <= 0 || !(s.high_freq_factor > s.low_freq_factor))
        return InvalidArgument("llama3 rope scaling needs original_ctx and high_freq_factor > low_freq_factor");
      const double pi = 3.14159265358979323846;
      const double wavelen = 2.0 * pi / v;
      const double low_wavelen = s.original_ctx / static_cast<double>(s.low_freq_factor);
      const double high_wavelen = s.original_ctx / static_cast<double>(s.high_freq_factor);
      if (wavelen > low_wavelen) {
        v /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        v = (1.0 - smooth) * v / s.factor + smooth * v;
      }
    }
    f[i] = v;
  }
  return f;
}

}  // namespace llm::cuda
