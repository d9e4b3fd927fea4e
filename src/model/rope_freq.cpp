#include "model/rope_freq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "model/weights.h"

namespace llm {

StatusOr<std::vector<double>> RopeInvFreq(const ModelConfig& c, std::span<const float> factors, bool local) {
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    return InvalidArgument("rope_dim must be even and in (0, head_dim]");
  const float theta = local ? c.rope_theta_swa : c.rope_theta;
  if (!(theta > 0.0f)) return InvalidArgument("rope_theta must be positive");
  const RopeScaling s = local ? RopeScaling{} : c.rope_scaling;
  if (s.type == RopeScalingType::kYarn && s.original_ctx <= 0)
    return InvalidArgument("YaRN rope scaling needs the original context length");
  if (s.type != RopeScalingType::kNone && !(s.factor > 0.0f)) return InvalidArgument("rope scaling factor must be positive");
  const int n = c.rope_dim / 2;
  if (!factors.empty() && static_cast<int>(factors.size()) != n)
    return InvalidArgument("rope_freqs has " + std::to_string(factors.size()) + " factors, expected " +
                           std::to_string(n) + " (rope_dim / 2)");
  for (float f : factors)
    if (!(f > 0.0f) || !std::isfinite(f)) return InvalidArgument("rope_freqs holds a factor that is not finite and positive");

  // YaRN's ramp ends, in pairs (ggml_rope_yarn_corr_dims): the pair whose
  // wavelength fits `beta` times into the original context.
  double lo = 0.0, hi = 0.0;
  if (s.type == RopeScalingType::kYarn) {
    const double pi = 3.14159265358979323846;
    auto corr = [&](double beta) {
      return c.rope_dim * std::log(s.original_ctx / (beta * 2.0 * pi)) / (2.0 * std::log(static_cast<double>(theta)));
    };
    lo = std::max(0.0, std::floor(corr(s.beta_fast)));
    hi = std::min(static_cast<double>(c.rope_dim - 1), std::ceil(corr(s.beta_slow)));
  }
  std::vector<double> inv(n);
  for (int i = 0; i < n; ++i) {
    double f = std::pow(static_cast<double>(theta), -2.0 * i / c.rope_dim);
    if (s.type == RopeScalingType::kYarn) {
      const double ramp = 1.0 - std::min(1.0, std::max(0.0, (i - lo) / std::max(0.001, hi - lo)));
      f *= (1.0 - ramp) / s.factor + ramp;
    } else if (s.type == RopeScalingType::kLinear) {
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
    if (!factors.empty()) f /= factors[i];  // commutes with every scaling above but llama3's band test
    inv[i] = f;
  }
  return inv;
}

double RopeMagnitude(const ModelConfig& c, bool local) {
  // rope_attn_factor scales every layer's rotation in llama.cpp (cparams'
  // yarn_attn_factor is multiplied by it and passed to each ggml_rope_ext).
  const double attn = c.rope_attn_factor;
  const RopeScaling& s = c.rope_scaling;
  if (local || s.type != RopeScalingType::kYarn || !(s.factor > 0.0f)) return attn;
  return attn * (1.0 + 0.1 * std::log(static_cast<double>(s.factor)));
}

const WeightView& RopeFactorsFor(const ModelConfig& c, const ModelWeights& w, int32_t n_ctx) {
  if (!w.rope_freqs.empty() || !c.has_longrope) return w.rope_freqs;
  const int32_t ctx = n_ctx > 0 ? n_ctx : c.n_ctx_train;
  const int32_t original = c.rope_scaling.original_ctx > 0 ? c.rope_scaling.original_ctx : c.n_ctx_train;
  return ctx > original ? w.rope_factors_long : w.rope_factors_short;
}

StatusOr<std::vector<float>> RopeFreqFactors(const ModelConfig& c, const WeightView& w) {
  if (w.empty()) return std::vector<float>{};
  if (w.type != TensorType::F32 || w.rows != 1 || w.cols != c.rope_dim / 2)
    return InvalidArgument("rope_freqs / rope_factors weights must be F32 with rope_dim / 2 values");
  std::vector<float> f(static_cast<size_t>(w.cols));
  std::memcpy(f.data(), w.data, f.size() * sizeof(float));
  return f;
}

}  // namespace llm
