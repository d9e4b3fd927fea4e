// An encoder's attention (BERT and its kin): every token of one sequence
// attends to every token of it, no mask, no KV cache.
//
// It runs on the decoder's attention kernel (Kernels::attention, AVX2 with
// the portable fallback): each head's keys and values are laid out as one
// F32 "block" of a KV pool, K transposed (head_dim, ld) and V (ld, head_dim)
// with ld = n rounded up to 8, and the kernel is called for a chunk of
// kQueryChunk query tokens of that head at a time (the kernel's query group).
// The kernel's contract makes each query's result bitwise independent of
// how many queries share a call, and chunks are cut from n alone: a
// sequence's output is the same alone, in any batch and with any thread
// count.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "util/thread_pool.h"

namespace llm::cpu {

struct EncoderAttnShape {
  int64_t n = 0;         // tokens of the sequence
  int32_t n_head = 0;    // query heads = key/value heads
  int32_t head_dim = 0;
  int64_t ld = 0;        // floats between consecutive tokens' rows of q, k, v and out (>= n_head * head_dim)
  float scale = 1.0f;    // applied to q·k before the softmax
};

// Grown on demand; reused across layers and sequences.
struct EncoderAttnScratch {
  std::vector<float> kv;      // every head's K tile then V tile
  std::vector<float> scores;  // per thread: kQueryChunk * n
};

// out[t, h] = softmax(q[t, h] · k[·, h]ᵀ · scale) · v[·, h] for every token t
// and head h; rows of q, k, v, out are `ld` apart, head h at h * head_dim.
void EncoderAttention(const Kernels& kernels, ThreadPool& pool, const EncoderAttnShape& s, const float* q,
                      const float* k, const float* v, float* out, EncoderAttnScratch* scratch);

}  // namespace llm::cpu
