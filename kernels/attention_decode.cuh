// Paged decode attention: split-K flash-decoding, GQA-aware.
//
// One query token at a time ("items": decode tokens, verify tokens, or any
// token of a model whose head_dim the prefill kernel does not take). A CTA
// takes one (item, kv head, split): the n_rep query heads that share the KV
// head are done together, so each K/V row is read once per query group.
//
//   keys of item t: positions [lo, pos[t]] of its sequence, lo = 0, or
//                   pos[t] - window + 1 on a sliding-window layer
//   split s:        keys lo + [s * keys_per_split, (s + 1) * keys_per_split)
//
// With n_splits > 1 each split leaves its unnormalised output, running max
// and sum in the workspace and a second kernel combines them.
#pragma once

#include <cstddef>

#include "common.cuh"

namespace llm::cuda {

struct DecodeAttnParams {
  const bf16* q = nullptr;            // (n_tok, n_head, head_dim) rotated queries
  bf16* out = nullptr;                // (n_tok, n_head, head_dim); rows of `items` written
  const int32_t* items = nullptr;     // (n_items) batch row of each query token handled here
  int32_t n_items = 0;
  const int32_t* tok_seq = nullptr;   // (n_tok) batch sequence of each token
  const int32_t* tok_pos = nullptr;   // (n_tok) position of each token
  const SeqDesc* seqs = nullptr;
  const int32_t* block_tables = nullptr;
  PagedKv kv;                         // this layer's K/V, each side in its type (this step's tokens already stored)
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;               // even, <= 256
  float scale = 0.0f;                 // usually 1 / sqrt(head_dim)
  int32_t window = 0;                 // > 0: a query at position p sees keys p - window + 1 .. p only
  float softcap = 0.0f;               // > 0: scaled scores s -> softcap * tanh(s / softcap) (Gemma 2)
  // (n_head) F32 attention-sink logits (gpt-oss) or nullptr: head h's
  // softmax has e^(sinks[h] - m) added to its denominator, no value behind
  // it, m the max over the scores and the sink (not soft-capped).
  const float* sinks = nullptr;
  int32_t n_splits = 1;               // from PlanDecodeAttention
  int32_t keys_per_split = 0;         // multiple of DecodeKeyTile(head_dim); ignored when dynamic_split
  // 1: each item divides its own keys (tok_pos[t] + 1) over the n_splits in
  // whole key tiles, read on the device: the launch depends on no key count
  // known on the host, so a CUDA graph captured once stays valid as
  // sequences grow. Items shorter than n_splits tiles leave splits empty.
  int32_t dynamic_split = 0;
};

// Keys per shared-memory tile.
int32_t DecodeKeyTile(int32_t head_dim);

// Splits for a launch: enough CTAs for ~2 waves on n_sm multiprocessors,
// no split shorter than one key tile, n_items * n_splits <= max_slots.
// With dynamic_split, plan with max_keys = the longest context the launch
// may ever see and ignore *keys_per_split.
void PlanDecodeAttention(int32_t n_items, int32_t n_head_kv, int32_t head_dim, int32_t max_keys, int32_t n_sm,
                         int32_t max_slots, int32_t* n_splits, int32_t* keys_per_split);

// Workspace for n_items * n_splits <= max_slots (0 bytes is fine when every
// launch has n_splits == 1).
size_t DecodeAttnWorkspaceBytes(int32_t max_slots, int32_t n_head, int32_t head_dim);

// cudaErrorInvalidValue for shapes outside the limits (head_dim odd or > 256,
// n_rep * head_dim > 4096, n_head % n_head_kv != 0) or a workspace too small.
cudaError_t LaunchDecodeAttention(const DecodeAttnParams& p, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream);

}  // namespace llm::cuda
