// A ViT vision tower on the CPU, one image per pass: SigLIP (Gemma 3,
// Idefics3) and CLIP (LLaVA), which differ only in the optional parts
// (model/vision_weights.h):
//
//   patches (N, 3·P·P) = the S x S image cut in P x P squares, row-major
//                        over the grid, each flattened (channel, y, x)
//   x = patches·Wpᵀ (+ bp)                              x: (N, E)
//   CLIP: x = [class; x]                                the class token first: (N + 1, E)
//   x += pos                                            one learned row per position
//   CLIP: x = layernorm(x; pre_ln)
//   per layer, for the first n_layer_run layers (LLaVA's feature layer):
//     h = layernorm(x; ln1)
//     q, k, v = h·Wᵀ + b                                each row of x
//     x += softmax(q·kᵀ / sqrt(head_dim))·v ·Woᵀ + bo    every row sees every row
//     x += act(layernorm(x; ln2)·Wupᵀ + bup)·Wdownᵀ + bdown   act: GELU or quick GELU
//   x = layernorm(x; post_ln)                           when the file has one
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

  // Rows of the output: N = (S/P)², plus the class token's (first) for CLIP.
  int64_t n_rows() const;

  // pixels (3, S, S) planar -> out (n_rows(), E): the class token's row (if
  // any), then the patches in grid order.
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
