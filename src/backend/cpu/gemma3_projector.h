// Gemma 3's multimodal projector on the CPU: the tower's patch grid to the
// soft tokens the text model reads.
//
//   x (G·G, E), row py·G + px                 the tower's output (vision_tower.h)
//   pooled (T, E) = mean of each k x k block of the grid, k = n_merge,
//                   T = (G/k)², row oy·(G/k) + ox
//   pooled = rmsnorm(pooled) * soft_emb_norm
//   tokens (T, D) = pooled · input_proj       input_proj (E, D), D the text model's width
#pragma once

#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/vision_linear.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "util/status.h"

namespace llm::cpu {

class Gemma3Projector {
 public:
  // Keeps input_proj transposed to (D, E) F32 for the GEMM.
  static StatusOr<Gemma3Projector> Create(const VisionConfig& c, const VisionWeights& w, const Kernels& k);

  // x (G·G, E) -> out (T, D).
  void Run(VisionLinear& linear, const float* x, float* out);

 private:
  Gemma3Projector(const VisionConfig& c, const VisionWeights& w) : c_(&c), w_(&w) {}

  const VisionConfig* c_;
  const VisionWeights* w_;
  std::vector<float> proj_t_;   // (D, E)
  WeightView proj_view_;        // over proj_t_
  std::vector<float> pooled_;   // (T, E)
};

}  // namespace llm::cpu
