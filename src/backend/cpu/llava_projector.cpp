#include "backend/cpu/llava_projector.h"

#include <string>

namespace llm::cpu {
namespace {

bool BiasOk(const WeightView& b, int64_t n) { return !b.empty() && b.type == TensorType::F32 && b.cols == n; }

}  // namespace

StatusOr<LlavaProjector> LlavaProjector::Create(const VisionConfig& c, const VisionWeights& w, const Kernels& k) {
  const int64_t E = c.n_embd, D = c.n_embd_out;
  if (w.mm0.empty() || w.mm0.cols != E || w.mm0.rows < 1 || !BiasOk(w.mm0_b, w.mm0.rows))
    return InvalidArgument("LLaVA projector: mm.0 is not (H, " + std::to_string(E) + ") with an F32 bias");
  if (D <= 0 || w.mm2.empty() || w.mm2.rows != D || w.mm2.cols != w.mm0.rows || !BiasOk(w.mm2_b, D))
    return InvalidArgument("LLaVA projector: mm.2 is not (D, H) with an F32 bias");
  if (c.n_merge != 1) return InvalidArgument("LLaVA projector: one token per patch (n_merge 1)");
  return LlavaProjector(c, w, k);
}

void LlavaProjector::Run(VisionLinear& linear, const float* x, float* out) {
  const int64_t N = c_->n_patches(), H = w_->mm0.rows;
  h_.resize(static_cast<size_t>(N * H));
  if (ones_.size() != h_.size()) ones_.assign(h_.size(), 1.0f);
  linear(w_->mm0, w_->mm0_b, x, N, h_.data());
  k_->gelu_mul(h_.data(), ones_.data(), N * H);
  linear(w_->mm2, w_->mm2_b, h_.data(), N, out);
}

}  // namespace llm::cpu
