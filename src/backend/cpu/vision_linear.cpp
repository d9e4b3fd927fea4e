#include "backend/cpu/vision_linear.h"

#include <cmath>

#include "backend/cpu/encoder_matmul.h"
#include "backend/cpu/matmul_rows.h"

namespace llm::cpu {
namespace {

constexpr int64_t kParallelMacs = 16 * 1024;  // as encoder.cpp: smaller products stay on the caller

}  // namespace

void VisionLinear::operator()(const WeightView& w, const WeightView& b, const float* x, int64_t n, float* y,
                              bool accumulate) {
  const BlockQ8Act* xq = nullptr;
  if (IsBlockQuantized(w.type)) {
    const int64_t nb = w.cols / 32;
    xq_.resize(static_cast<size_t>(n * nb));
    for (int64_t t = 0; t < n; ++t) k_.quantize_act(x + t * w.cols, w.cols, xq_.data() + t * nb);
    xq = xq_.data();
  }
  const float* bias = static_cast<const float*>(b.data);
  auto rows = [&](int64_t lo, int64_t hi, int) {
    EncoderMatMul(k_, DenseRowRange(w, x, xq, n, y, lo, hi, accumulate));
    if (bias != nullptr)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = lo; r < hi; ++r) y[t * w.rows + r] += bias[r];
  };
  if (pool_.n_threads() > 1 && n * w.rows * w.cols >= kParallelMacs) {
    pool_.ParallelFor(w.rows, rows);
  } else {
    rows(0, w.rows, 0);
  }
}

void LayerNormRows(const float* x, int64_t n, int64_t d, const float* w, const float* b, float eps, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* r = x + t * d;
    float* o = out + t * d;
    double sum = 0.0;
    for (int64_t i = 0; i < d; ++i) sum += r[i];
    const float mean = static_cast<float>(sum / static_cast<double>(d));
    double sum2 = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      const float c = r[i] - mean;
      o[i] = c;
      sum2 += static_cast<double>(c) * c;
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(d)) + eps);
    for (int64_t i = 0; i < d; ++i) o[i] = o[i] * scale * w[i] + b[i];
  }
}

void GeluQuick(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * (1.0f / (1.0f + std::exp(-1.702f * x[i])));
}

void RmsNormRows(float* x, int64_t n, int64_t d, const float* w, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    float* r = x + t * d;
    double sum2 = 0.0;
    for (int64_t i = 0; i < d; ++i) sum2 += static_cast<double>(r[i]) * r[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(d)) + eps);
    for (int64_t i = 0; i < d; ++i) r[i] = r[i] * scale * w[i];
  }
}

}  // namespace llm::cpu
