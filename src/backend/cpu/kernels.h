// CPU compute kernels behind one table, chosen once at run time.
//
// The kernels are written once (kernels_impl.h) against a tiny 8-lane vector
// type and compiled twice: kernels_generic.cpp for any CPU, kernels_avx2.cpp
// with AVX2/FMA/F16C enabled for that file only. BestKernels() picks the AVX2
// table when the running CPU has those features, so the default build runs on
// any x86-64 and is fast on a modern one.
//
// Determinism contract, which the backend relies on for results that do not
// depend on the thread count or on what else is in the batch:
//   * every output element of a kernel is computed by the same sequence of
//     floating-point operations whatever tile, row range or thread it falls in;
//   * reductions run in a fixed order that depends only on their length.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/kv_layout.h"
#include "model/weights.h"

namespace llm::cpu {

// Activations quantized for the block-quantized matmuls: 32 values
// x[i] ≈ d * qs[i], d = max|x| / 127, qs rounded to nearest (ties to even).
// s = d * Σ qs serves the formats with a minimum (value = d_w * q + m: the
// m-part of a block's dot product is m * s). Every Kernels table quantizes to
// bitwise the same blocks, so the integer parts of the dot products agree
// exactly across ISAs.
struct BlockQ8Act {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8Act) == 40);

// Y = X · Wᵀ over weight rows [row_begin, row_end):
//   y[t * ld_y + r] (+)= sum_k x[t * ld_x + k] * W[r][k]
// for t in [0, n_tok). x: (n_tok, w.cols), y: (n_tok, >= row_end).
//
// A block-quantized W (IsBlockQuantized) reads xq instead of x: the same
// rows quantized once per matmul by Kernels::quantize_act (llama.cpp's
// approach), so the inner loops are integer dot products per block and no
// weight is ever dequantized to F32.
struct MatMulArgs {
  const WeightView* w = nullptr;
  const float* x = nullptr;
  int64_t ld_x = 0;
  const BlockQ8Act* xq = nullptr;  // (n_tok, w.cols / 32), block-quantized W only
  int64_t ld_xq = 0;               // blocks from one token's row to the next
  int64_t n_tok = 0;
  float* y = nullptr;
  int64_t ld_y = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  bool accumulate = false;  // y += X·Wᵀ (fused residual add) instead of y =
};

// The query heads of one KV head (GQA group) against its keys 0 .. n_keys-1
// in one layer of the paged pool (layout and element types in kv_layout.h).
// Key j lives in block block_table[j / block_size], slot j % block_size.
struct AttnArgs {
  const uint8_t* pool = nullptr; // the whole KV pool
  KvElem elem_k = KvElem::kF32;  // element type of the K tiles
  KvElem elem_v = KvElem::kF32;  // ... and of the V tiles (may differ)
  int64_t block_stride = 0;      // bytes per block (all layers, K and V)
  int64_t k_tile_bytes = 0;      // bytes of one (layer, K, head) tile
  int64_t v_tile_bytes = 0;      // ... and of one V tile
  int64_t k_scales_offset = 0;   // Q8_0 / Q4_0: bytes from a K tile's start to its scales
  int64_t v_scales_offset = 0;   // ... and from a V tile's
  int64_t k_offset = 0;          // bytes from a block's start to this (layer, head)'s K tile
  int64_t v_offset = 0;          // ... and to its V tile
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  int64_t n_keys = 0;            // positions first_key .. n_keys-1 are attended (causal)
  float scale = 1.0f;            // 1 / sqrt(head_dim), or the model's own
  // First attended position: 0, or n_keys - window for a sliding-window
  // layer. Keys before it stay in the pool, only masked out.
  int64_t first_key = 0;
  float softcap = 0.0f;          // > 0: scores s = softcap * tanh(s / softcap) before the softmax (Gemma 2)
  // Attention sinks (gpt-oss): n_q logits, one per query head of the group,
  // each an extra term of its head's softmax denominator; nullptr: none.
  const float* sinks = nullptr;
};

struct Kernels {
  const char* name;
  void (*matmul)(const MatMulArgs& a);
  // out = x / sqrt(mean(x²) + eps) * w, one row of n.
  void (*rmsnorm)(const float* x, const float* w, int64_t n, float eps, float* out);
  // g = silu(g) * u, elementwise over n.
  void (*silu_mul)(float* g, const float* u, int64_t n);
  // For each of n_q query heads sharing the KV head:
  // out[g] (head_dim) = softmax(q[g]·Kᵀ·scale) · V over the attended keys.
  // q, out: (n_q, head_dim); scores: scratch of n_q * n_keys floats. Each
  // head's result is bitwise independent of n_q.
  void (*attention)(const AttnArgs& a, int n_q, const float* q, float* scores, float* out);
  // x (n, n % 32 == 0) -> n / 32 activation blocks.
  void (*quantize_act)(const float* x, int64_t n, BlockQ8Act* out);
  // g = gelu(g) * u, elementwise over n; gelu's tanh approximation
  // 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))) (Gemma's GeGLU).
  void (*gelu_mul)(float* g, const float* u, int64_t n);
};

const Kernels& GenericKernels();
// nullptr when this build has no AVX2 kernels (non-x86 target).
const Kernels* Avx2KernelsIfBuilt();
// AVX2 when built and supported by this CPU, else generic. The environment
// variable LLM_CPU_ISA=generic forces the portable kernels (for testing).
const Kernels& BestKernels();

// ------------------------------------------------------------ conversions

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // ±0
  } else {        // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float BF16ToF32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Row `row` of `w` as F32 (n = w.cols values): embedding lookups.
void DequantizeRow(const WeightView& w, int64_t row, float* out);

// n values (a whole number of blocks) of type `type` starting at `src`, as
// F32: the reference dequantization, checked against gguf-py's in test_quant.
void DequantizeBlocks(TensorType type, const void* src, int64_t n, float* out);

}  // namespace llm::cpu
