// Prefill attention, FlashAttention-2 style: tiles of 64 queries x 64 keys on
// the tensor cores (mma.sync m16n8k16 bf16, F32 accumulation), online softmax
// in registers, causal, over variable-length sequences whose earlier context
// (chunked prefill, prefix-cache hits) is read from the paged pool together
// with the keys this step stored.
//
// Work items are (sequence, first query of a 64-query tile); the CTA of item
// w and query head h covers queries [q0, q0 + 64) of that sequence and keys
// [0, n_past + min(q0 + 64, n_tokens)), each query seeing keys up to its own
// position (on a sliding-window layer only the last `window` of them: key
// tiles wholly before the first query's window are skipped).
#pragma once

#include "common.cuh"

namespace llm::cuda {

inline constexpr int32_t kPrefillTileQ = 64;

struct PrefillWork {
  int32_t seq;  // index into seqs
  int32_t q0;   // first query (token index within the sequence's tokens of this step)
};

struct PrefillAttnParams {
  const bf16* q = nullptr;          // (n_tok, n_head, head_dim) rotated queries
  bf16* out = nullptr;              // (n_tok, n_head, head_dim); rows of the work items written
  const PrefillWork* work = nullptr;  // (n_work)
  int32_t n_work = 0;
  const SeqDesc* seqs = nullptr;
  const int32_t* block_tables = nullptr;
  PagedKv kv;                       // this layer's K/V, each side in its type (this step's tokens already stored)
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;             // 64 or 128
  float scale = 0.0f;
  int32_t window = 0;               // > 0: a query at position p sees keys p - window + 1 .. p only
  float softcap = 0.0f;             // > 0: scaled scores s -> softcap * tanh(s / softcap) (Gemma 2)
  const float* sinks = nullptr;     // (n_head) F32 attention-sink logits or nullptr (DecodeAttnParams::sinks)
};

bool PrefillAttentionSupports(int32_t head_dim);

cudaError_t LaunchPrefillAttention(const PrefillAttnParams& p, cudaStream_t stream);

}  // namespace llm::cuda
