#include "backend/pooling.h"

#include <cmath>
#include <cstring>

namespace llm {

int64_t PooledSize(const ModelConfig& c, Pooling pooling, int64_t n_tokens) {
  switch (pooling) {
    case Pooling::kNone: return n_tokens * c.n_embd;
    case Pooling::kMean:
    case Pooling::kCls:
    case Pooling::kLast: return c.n_embd;
    case Pooling::kRank: return c.n_cls_out;
  }
  return 0;
}

void PoolRows(const float* hidden, int64_t n, int64_t dim, Pooling pooling, float* out) {
  switch (pooling) {
    case Pooling::kNone:
      std::memcpy(out, hidden, static_cast<size_t>(n * dim) * sizeof(float));
      return;
    case Pooling::kMean: {
      const float inv = 1.0f / static_cast<float>(n);
      for (int64_t i = 0; i < dim; ++i) out[i] = 0.0f;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < dim; ++i) out[i] += hidden[t * dim + i] * inv;
      return;
    }
    case Pooling::kCls:
      std::memcpy(out, hidden, static_cast<size_t>(dim) * sizeof(float));
      return;
    case Pooling::kLast:
    case Pooling::kRank:
      std::memcpy(out, hidden + (n - 1) * dim, static_cast<size_t>(dim) * sizeof(float));
      return;
  }
}

void FinishRows(const float* in, int64_t rows, int64_t dim, int64_t keep, bool l2, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = in + r * dim;
    float* dst = out + r * keep;
    if (dst != src) std::memmove(dst, src, static_cast<size_t>(keep) * sizeof(float));
    if (!l2) continue;
    double sum = 0.0;
    for (int64_t i = 0; i < keep; ++i) sum += static_cast<double>(dst[i]) * dst[i];
    const double norm = std::sqrt(sum);
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / norm) : 0.0f;
    for (int64_t i = 0; i < keep; ++i) dst[i] *= scale;
  }
}

}  // namespace llm
