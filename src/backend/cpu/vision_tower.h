// A SigLIP vision tower (Gemma 3's) on the CPU, one image per pass:
//
//   patches (N, 3·P·P) = the S x S image cut in P x P squares, row-major
//                        over the grid, each flattened (channel, y, x)
//   x = patches·Wpᵀ + bp + pos                          x: (N, E)
//   per layer:
//     h = layernorm(x; ln1)
//     q, k, v = h·Wᵀ + b                                (N, E) each
//     x += softmax(q·kᵀ / sqrt(head_dim))·v ·Woᵀ + bo    every patch sees every patch
//     x += gelu(layernorm(x; ln2)·Wupᵀ + bup)·Wdownᵀ + bdown
//   x = layernorm(x; post_ln)
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/encoder_attention.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/vision_linear.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace llm::cpu {

class VisionTower {
 public:
  VisionTower(const VisionConfig& c, const VisionWeights& w, const Kernels& k, ThreadPool& pool);

  // Whether the weights have the shapes the config names (CheckWeightMatrix).
  Status Check() const;

  // pixels (3, S, S) planar -> out (N, E), N = (S/P)^2 in grid order.
  void Run(const float* pixels, std::vector<float>* out);

 private:
  void Patchify(const float* pixels);  // patches_ (N, 3·P·P)

  const VisionConfig& c_;
  const VisionWeights& w_;
  const Kernels& k_;
  ThreadPool& pool_;
  VisionLinear linear_;
  // ---- activations of one image
  std::vector<float> patches_, h_, q_, kk_, v_, att_, ff_, ones_;
  EncoderAttnScratch attn_;
};

}  // namespace llm::cpu
