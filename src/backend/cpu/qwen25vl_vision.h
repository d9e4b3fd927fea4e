// Qwen2.5-VL's vision tower and patch merger on the CPU, one picture per
// pass, at the picture's own size (W x H, multiples of 2P; the picture
// from vision/image_preprocess_dynamic.h), as llama.cpp's graph computes it:
//
//   patches (N, 3·P·P), N = (W/P)·(H/P), in 2 x 2 groups: for each merged
//       cell (by, bx) row-major, its patches (2by, 2bx), (2by, 2bx+1),
//       (2by+1, 2bx), (2by+1, 2bx+1); patch (py, px) has RoPE position (py, px)
//   x = patches·W0ᵀ + patches·W1ᵀ                          (N, E), no bias
//   cells regrouped by window: windows of g x g cells, g = 112 / P / 2,
//       row-major over the cell grid (the last row and column of windows
//       cut short), each window's cells row-major and contiguous
//   per layer i:
//     h = rmsnorm(x)·ln1
//     q, k, v = h·Wᵀ + b; q, k rotated by 2D RoPE: of head_dim d's d/2
//       pairs (j, j + d/2), the first d/4 turn by py·θ^j, the next d/4 by
//       px·θ^(j - d/4), θ = 10000^(-4/d)
//     x += softmax(q·kᵀ / sqrt(d))·v ·Woᵀ + bo    within each window, or over
//       all patches when (i + 1) % n_wa_pattern == 0
//     h = rmsnorm(x)·ln2
//     x += (silu(h·Wgᵀ + bg) * (h·Wuᵀ + bu))·Wdᵀ + bd
//   x = rmsnorm(x)·post_ln
//   tokens (T, D) = gelu(x' ·M0ᵀ + b0)·M1ᵀ + b1, x' (T, 4E) each cell's four
//       rows side by side, T = N / 4; rows put back in the cells' row-major order
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cpu/vision_encoder.h"

namespace llm::cpu {

// Test hooks: the one-detail mutants the tests show llama.cpp's reference
// rejects (never set outside tests).
struct Qwen25VLMutation {
  bool full_attention = false;  // every layer attends over all patches
  bool swap_rope_axes = false;  // the first quarter turns by px, the second by py
};

StatusOr<std::unique_ptr<VisionEncoder>> CreateQwen25VLVision(const VisionConfig& config,
                                                              const VisionWeights& weights, int n_threads,
                                                              Qwen25VLMutation mutation = {});

}  // namespace llm::cpu
