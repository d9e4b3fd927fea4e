// Idefics3's (SmolVLM's) projector on the CPU: one tile's patch grid to the
// soft tokens the text model reads, by pixel shuffle and one linear map.
//
//   x (G·G, E), row y·G + x                 the tower's output (vision_tower.h)
//   shuffled (T, E·k²), T = (G/k)²: token (by, bx), row by·(G/k) + bx, is the
//     k x k block's rows concatenated, dy major, then dx:
//     shuffled[by·(G/k) + bx][(dy·k + dx)·E + e] = x[(by·k + dy)·G + bx·k + dx][e]
//   tokens (T, D) = shuffled · fcᵀ          fc (D, E·k²), no bias
#pragma once

#include <vector>

#include "backend/cpu/vision_linear.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "util/status.h"

namespace llm::cpu {

class Idefics3Projector {
 public:
  static StatusOr<Idefics3Projector> Create(const VisionConfig& c, const VisionWeights& w, const Kernels& k);

  // x (G·G, E) -> out (T, D).
  void Run(VisionLinear& linear, const float* x, float* out);

 private:
  Idefics3Projector(const VisionConfig& c, const VisionWeights& w) : c_(&c), w_(&w) {}

  const VisionConfig* c_;
  const VisionWeights* w_;
  std::vector<float> shuffled_;  // (T, E·k²)
};

}  // namespace llm::cpu
