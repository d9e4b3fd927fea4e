// RoPE rotation frequencies of a model, shared by every backend so that they
// cannot drift apart: pair i of a head rotates by pos * inv_freq[i] with
//
//   inv_freq[i] = theta^(-2i/rope_dim) / scale_i / freq_factors[i]
//
// scale_i from the metadata's scaling (linear: factor; llama3: the smooth
// wavelength band), and freq_factors the optional per-pair divisors a file
// carries as rope_freqs.weight (Llama 3.1+ converters bake their scaling into
// it and write no scaling type). llama.cpp divides each pair's angle by
// freq_factors[i] on every layer (ggml_rope_ext's freq_factors), so do we.
#pragma once

#include <span>
#include <vector>

#include "model/config.h"
#include "model/weights.h"
#include "util/status.h"

namespace llm {

// (rope_dim / 2) frequencies. local: a sliding-window layer's rotation (base
// rope_theta_swa, no metadata scaling; Gemma 3). freq_factors: empty, or
// rope_dim/2 positive finite values.
//
// YaRN (ggml's rope_yarn): pair i's angle mixes the interpolated angle
// (divided by factor) and the original one with a ramp over the pair index,
//   ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
//   inv_freq_i = f_i · ((1 - ramp_i) / factor + ramp_i)
// lo / hi: the pairs whose wavelength fits beta_fast / beta_slow times in the
// original context; and both cos and sin are scaled by RopeMagnitude.
StatusOr<std::vector<double>> RopeInvFreq(const ModelConfig& config, std::span<const float> freq_factors,
                                          bool local = false);

// The factor cos and sin are multiplied by: 1 + 0.1 ln(factor) for YaRN
// (llama.cpp's mscale with attn_factor 1), else 1.
double RopeMagnitude(const ModelConfig& config, bool local = false);

// The per-pair divisors a context of n_ctx tokens per sequence runs with, as
// llama.cpp's get_rope_factors picks them: rope_freqs.weight when the file
// has it, else with LongRoPE rope_factors_long when n_ctx exceeds the
// original context (rope.scaling.original_context_length, default
// n_ctx_train) and rope_factors_short otherwise; else none (empty).
// n_ctx 0 stands for n_ctx_train.
const WeightView& RopeFactorsFor(const ModelConfig& config, const ModelWeights& weights, int32_t n_ctx);

// The F32 values of a model's rope_freqs.weight (empty when it has none),
// checked: rope_dim/2 finite positive factors.
StatusOr<std::vector<float>> RopeFreqFactors(const ModelConfig& config, const WeightView& rope_freqs);

}  // namespace llm
