// Rotary position embedding fused with writing this step's K/V into the
// paged pool.
//
// Pair convention (the CPU backend's, src/backend/cpu/rope.h): pair i of a
// head, i < n_pairs = rope_dim / 2, turns by pos * inv_freq[i];
//   interleaved (GGUF `llama`: Q/K weights are permuted at conversion):
//     (x[2i], x[2i+1])
//   neox ("rotate half", GGUF archs with LLAMA_ROPE_TYPE_NEOX):
//     (x[i], x[i + n_pairs])
// and the head's dims from rope_dim on pass through unchanged.
#pragma once

#include "common.cuh"

namespace llm::cuda {

// cos_sin[t][i] = {cos, sin}(pos[t] * inv_freq[i]) * magnitude, computed in
// double as the CPU backend does. pos: (n_tok); inv_freq: (n_pairs) F64
// (scaling applied); magnitude: YaRN's attention factor (1 otherwise);
// cos_sin: (n_tok, n_pairs, 2) F32.
cudaError_t LaunchRopeAngles(const int32_t* pos, int32_t n_tok, const double* inv_freq, int32_t n_pairs,
                             float* cos_sin, cudaStream_t stream, double magnitude = 1.0);

struct RopeKvParams {
  const float* qkv = nullptr;       // (n_tok, (n_head + 2 n_head_kv) * head_dim) F32: q | k | v of each token
  const float* cos_sin = nullptr;   // (n_tok, n_pairs, 2)
  const int32_t* tok_seq = nullptr; // (n_tok) batch sequence of each token
  const int32_t* tok_pos = nullptr; // (n_tok) position of each token
  const SeqDesc* seqs = nullptr;    // (n_seqs)
  const int32_t* block_tables = nullptr;
  bf16* q_out = nullptr;            // (n_tok, n_head, head_dim) rotated queries
  PagedKv kv;                       // this layer's pool view: RoPE'd K and V are stored there, each in its type
  int32_t n_tok = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;             // even
  int32_t n_pairs = 0;              // rope_dim / 2, 1 .. head_dim / 2
  int32_t neox = 0;                 // 0: interleaved pairs, 1: rotate-half pairs
  // Family extras, applied in the CPU backend's order (bias, norm, RoPE):
  const float* bias = nullptr;      // (q_dim + 2 kv_dim) F32 or null: added to q | k | v (Qwen2)
  const float* q_norm = nullptr;    // (head_dim) F32 or null: RMSNorm of each query head (Gemma 3, Qwen3)
  const float* k_norm = nullptr;    // (head_dim) F32; null exactly when q_norm is
  float eps = 0.0f;                 // the q/k norms' epsilon
  // Hadamard sizes (backend/kv_rotation.h) of a Q4_0 side's rows, 0 for a
  // side of another type: with a Q4_0 K, q and k are rotated by H_rot_k
  // after RoPE; with a Q4_0 V, v by H_rot_v, before q is written and K/V
  // are stored.
  int32_t rot_k = 0;
  int32_t rot_v = 0;
};

cudaError_t LaunchRopeStoreKv(const RopeKvParams& p, cudaStream_t stream);

}  // namespace llm::cuda
