// The Walsh-Hadamard rotation of a Q4_0 KV cache's rows.
//
// Keys and values have a few channels far larger than the rest (after RoPE,
// K's low-frequency pairs especially). A Q4_0 block's one scale is set by its
// largest value, so those channels leave the block's other 31 values with a
// handful of the 16 levels. Rotating every head's row by an orthonormal
// Hadamard matrix H first spreads each outlier over the whole chunk (a Q4_0
// K alone moves SmolLM2's perplexity +3.7% rotated, +16.9% not:
// bench/results/2026-11-27-kv-types.md). Attention does
// not change: H is orthonormal and symmetric (H·H = I), so
//
//   (H q) · (H k) = q · k          the query is rotated as the key is, and
//   Σ_j w_j (H v_j) = H (Σ_j w_j v_j)   the head's output is rotated back by H.
//
// llama.cpp's cache does the same for its quantized types (the same matrix:
// Sylvester's construction scaled by 1/sqrt(n), rows of n = 64..256), so the
// sizes follow its rule, and its perplexity with a Q4_0 cache is what ours is
// compared with (bench/results/):
//   K: n = the largest power of two dividing head_dim (at least 64);
//   V: n = 64;
//   none when head_dim is not a multiple of 64.
// A Q4_0 cache (CPU and CUDA pools, KV stream, tier files) always holds
// rotated rows (the CUDA kernels take the sizes from here: rope_kv.cuh);
// kvstate's conversion to or from another type applies H (kv_convert.cpp).
#pragma once

#include <cmath>
#include <cstdint>

namespace llm {

// Rotation size for K rows of head_dim hd (0: not rotated).
inline int64_t KvRotationK(int64_t hd) {
  if (hd <= 0 || hd % 64 != 0) return 0;
  int64_t n = 64;
  while (hd % (2 * n) == 0) n *= 2;
  return n;
}

// Rotation size for V rows of head_dim hd (0: not rotated).
inline int64_t KvRotationV(int64_t hd) { return hd > 0 && hd % 64 == 0 ? 64 : 0; }

// x[0 .. len) <- H_n x, chunk by chunk of n (a power of two dividing len;
// n = 0 leaves x as it is). H_n[i][j] = (-1)^popcount(i & j) / sqrt(n): the
// fast transform's butterflies, then the scale.
inline void HadamardRotate(float* x, int64_t len, int64_t n) {
  if (n <= 1) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t c = 0; c < len; c += n) {
    float* v = x + c;
    for (int64_t h = 1; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const float a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    for (int64_t j = 0; j < n; ++j) v[j] *= scale;
  }
}

}  // namespace llm
