// LLaVA's projector (projector type "mlp") on the CPU: the CLIP tower's
// patch rows to the soft tokens the text model reads, one token per patch.
//
//   x (N, E)                                 the tower's patch rows (the class token's left out)
//   h (N, H) = gelu(x · mm0ᵀ + b0)            tanh GELU
//   tokens (N, D) = h · mm2ᵀ + b2
#pragma once

#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/vision_linear.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "util/status.h"

namespace llm::cpu {

class LlavaProjector {
 public:
  static StatusOr<LlavaProjector> Create(const VisionConfig& c, const VisionWeights& w, const Kernels& k);

  // x (N, E) -> out (N, D).
  void Run(VisionLinear& linear, const float* x, float* out);

 private:
  LlavaProjector(const VisionConfig& c, const VisionWeights& w, const Kernels& k) : c_(&c), w_(&w), k_(&k) {}

  const VisionConfig* c_;
  const VisionWeights* w_;
  const Kernels* k_;
  std::vector<float> h_, ones_;  // (N, H)
};

}  // namespace llm::cpu
