#include "backend/cpu/idefics3_projector.h"

#include <cstring>
#include <string>

namespace llm::cpu {

StatusOr<Idefics3Projector> Idefics3Projector::Create(const VisionConfig& c, const VisionWeights& w,
                                                      const Kernels&) {
  const int64_t K = static_cast<int64_t>(c.n_embd) * c.n_merge * c.n_merge;
  if (c.n_merge < 2 || c.patches_per_side() % c.n_merge != 0)
    return InvalidArgument("Idefics3 projector: the patch grid does not divide into the shuffle factor");
  if (w.mm_fc.empty() || w.mm_fc.rows != c.n_embd_out || w.mm_fc.cols != K || c.n_embd_out <= 0)
    return InvalidArgument("Idefics3 projector: mm.model.fc is not (D, " + std::to_string(K) + ")");
  return Idefics3Projector(c, w);
}

void Idefics3Projector::Run(VisionLinear& linear, const float* x, float* out) {
  const int64_t E = c_->n_embd, G = c_->patches_per_side(), k = c_->n_merge, O = G / k, K = E * k * k;
  shuffled_.resize(static_cast<size_t>(O * O * K));
  for (int64_t by = 0; by < O; ++by)
    for (int64_t bx = 0; bx < O; ++bx) {
      float* dst = shuffled_.data() + (by * O + bx) * K;
      for (int64_t dy = 0; dy < k; ++dy)
        for (int64_t dx = 0; dx < k; ++dx)
          std::memcpy(dst + (dy * k + dx) * E, x + ((by * k + dy) * G + bx * k + dx) * E,
                      static_cast<size_t>(E) * sizeof(float));
    }
  linear(w_->mm_fc, WeightView{}, shuffled_.data(), O * O, out);
}

}  // namespace llm::cpu
