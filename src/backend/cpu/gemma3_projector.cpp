#include "backend/cpu/gemma3_projector.h"

#include <string>

#include "backend/cpu/kernels.h"

namespace llm::cpu {

StatusOr<Gemma3Projector> Gemma3Projector::Create(const VisionConfig& c, const VisionWeights& w, const Kernels&) {
  const int64_t E = c.n_embd, D = c.n_embd_out;
  if (w.input_proj.empty() || w.input_proj.rows != E || w.input_proj.cols != D || D <= 0)
    return InvalidArgument("Gemma 3 projector: input_projection is not (" + std::to_string(E) + ", D)");
  if (w.soft_emb_norm.empty() || w.soft_emb_norm.type != TensorType::F32 || w.soft_emb_norm.cols != E)
    return InvalidArgument("Gemma 3 projector: soft_emb_norm is missing or not F32");
  if (c.n_merge < 1 || c.patches_per_side() % c.n_merge != 0)
    return InvalidArgument("Gemma 3 projector: the patch grid does not divide into the pooling kernel");
  Gemma3Projector p(c, w);
  p.proj_t_.resize(static_cast<size_t>(D * E));
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t e = 0; e < E; ++e) {
    DequantizeRow(w.input_proj, e, row.data());
    for (int64_t d = 0; d < D; ++d) p.proj_t_[d * E + e] = row[d];
  }
  p.proj_view_.type = TensorType::F32;
  p.proj_view_.rows = D;
  p.proj_view_.cols = E;
  p.proj_view_.row_bytes = static_cast<size_t>(E) * sizeof(float);
  return p;
}

void Gemma3Projector::Run(VisionLinear& linear, const float* x, float* out) {
  const int64_t E = c_->n_embd, G = c_->patches_per_side(), k = c_->n_merge, O = G / k, T = O * O;
  pooled_.assign(static_cast<size_t>(T * E), 0.0f);
  const float inv = 1.0f / static_cast<float>(k * k);
  for (int64_t oy = 0; oy < O; ++oy)
    for (int64_t ox = 0; ox < O; ++ox) {
      float* dst = pooled_.data() + (oy * O + ox) * E;
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const float* src = x + ((oy * k + ky) * G + ox * k + kx) * E;
          for (int64_t i = 0; i < E; ++i) dst[i] += src[i];
        }
      for (int64_t i = 0; i < E; ++i) dst[i] *= inv;
    }
  RmsNormRows(pooled_.data(), T, E, static_cast<const float*>(w_->soft_emb_norm.data), c_->eps);
  proj_view_.data = proj_t_.data();  // the object may have moved since Create
  linear(proj_view_, WeightView{}, pooled_.data(), T, out);
}

}  // namespace llm::cpu
