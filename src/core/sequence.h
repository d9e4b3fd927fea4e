// Sequence: one stream of tokens the engine generates, as plain data. A
// request with n > 1 parallel samples has n sequences.
//
// This record sits below the layers that use it: the scheduler (sched/), the
// KV cache manager (kv/), the proposers (spec/) and the engine (engine/) all
// include it downward, and it holds nothing but their shared fields. What
// only the engine needs to sample and stream (sampler, text stream, timings,
// its request) lives in the engine's own record, which extends this one
// (EngineSeq in engine/request_state.h), so scheduler and KV tests need no model.
//
//   tokens:   [ p0 p1 ... p(n_prompt-1) | g0 g1 ... g(k-1) ]
//   KV cache:  tokens[0 .. n_computed) are in the cache
//   pending:   tokens[n_computed .. size) still to run (a prompt chunk, or the
//              last sampled token while decoding)
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

enum class SeqState { kWaiting, kRunning, kFinished };

// An image's soft tokens in a sequence: positions [first, first + n). They
// attend to each other both ways, so a prefill chunk never ends inside one
// (the scheduler's rule), and the prefix cache keys the blocks they touch by
// the image's content hash (kv_cache_manager.cpp).
struct ImageSpan {
  int32_t first = 0;
  int32_t n = 0;
  uint64_t hash = 0;  // of the image's preprocessed pixels
  // M-RoPE models (Qwen2-VL) only: the span is a grid of nx x (n / nx)
  // merged cells and takes n_pos = max(nx, ny) RoPE positions, not n
  // (core/mrope_positions.h); 0 and 0 for other models.
  int32_t nx = 0;
  int32_t n_pos = 0;
};

struct Sequence {
  uint64_t request_id = 0;
  int32_t seq_index = 0;        // which of the request's n samples
  int32_t priority = 0;         // higher runs first
  uint64_t arrival = 0;         // submission order, for FCFS among equals

  std::vector<int32_t> tokens;  // (n_prompt + generated)
  int32_t n_prompt = 0;
  int32_t n_computed = 0;       // tokens whose K/V are in the cache
  std::vector<int32_t> block_table;  // physical KV blocks, in logical order
  std::vector<uint64_t> block_hashes; // prefix-cache hashes of the full blocks so far
  uint64_t cache_salt = 0;           // sequences share cached blocks only with equal salts
  int32_t n_cached_prompt = -1;      // prompt tokens served from the cache at first admission
  bool use_cached_prefix = true;     // may start from cached blocks
  bool keep_kv = false;              // its freed blocks go to the protected end of the eviction order
  std::vector<ImageSpan> image_spans;  // in position order; their tokens[] hold negative placeholders
  SeqState state = SeqState::kWaiting;
  int32_t n_preemptions = 0;         // by recompute or by swapping

  // ---- preemption by swapping (kv_cache_manager.h). A swapped-out sequence
  // waits holding no pool block: the K/V of its n_computed tokens are in host
  // swap slots, or in full blocks it takes back from the prefix cache.
  bool swapped = false;
  std::vector<int32_t> swap_slots;   // (BlocksFor(n_computed)) host slot per logical block, -1: none

  // ---- speculative decoding (spec/). The engine sets spec_k before a step
  // (drafts it would like to verify); the scheduler reserves that many
  // lookahead slots when it can (ScheduledChunk::n_lookahead).
  int32_t spec_mode = 0;        // the request's LLM_SPEC_* (resolved: OFF, NGRAM or DRAFT)
  int32_t spec_k = 0;
  std::vector<int32_t> drafts;  // (<= spec_k) this step's drafts
  int32_t draft_computed = 0;   // tokens whose K/V are in the draft model's cache

  int32_t n_pending() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
  int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
};

// Scheduling order: higher priority first, then earlier arrival.
inline bool RunsBefore(const Sequence* a, const Sequence* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->arrival != b->arrival) return a->arrival < b->arrival;
  return a->seq_index < b->seq_index;
}

}  // namespace llm
