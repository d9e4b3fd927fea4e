// Scheduler: decides, once per engine step, which sequences run and how many
// of their pending tokens each processes, under one token budget.
//
// There are no prefill and decode phases: running sequences get their next
// token(s) first (a decode token, or the next chunk of a long prompt), then
// waiting sequences are admitted, in priority/arrival order, with chunked
// prefill, until the token budget or the sequence limit is reached. When the
// KV pool runs out, the lowest-priority, latest-arrived running sequence is
// preempted and goes back to the waiting queue (ordered by priority, then
// arrival, so it is ahead of everything that arrived after it in its class):
//   recompute (default)  its blocks are freed and it recomputes from scratch
//                        later (its prompt usually comes straight back from
//                        the prefix cache);
//   swap                 (the KV manager has swap slots) its K/V go to host
//                        memory and come back when it is readmitted, and it
//                        goes on decoding where it stopped; when the swap
//                        space is full, recompute instead.
//
// Speculation: a decoding sequence with seq->spec_k > 0 also gets spec_k
// lookahead slots (within the budget) for its drafts; if the pool lacks them
// it runs without speculating this step rather than preempting anyone.
#pragma once

#include <cstdint>
#include <vector>

#include "core/defaults.h"
#include "core/sequence.h"
#include "kv/kv_cache_manager.h"

namespace llm {

struct SchedulerConfig {
  int32_t max_seqs = defaults::kMaxSeqs;                // sequences per step
  int32_t max_batch_tokens = defaults::kMaxBatchTokens;  // tokens per step
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t n_tokens = 0;  // tokens[n_computed .. n_computed + n_tokens) run this step
  int32_t n_lookahead = 0;  // speculative: slots reserved after them for drafts
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // in batch order
  std::vector<Sequence*> preempted;    // lost their blocks this step (back to waiting)
  std::vector<Sequence*> no_room;      // cannot grow even alone in the pool: the caller ends them
  std::vector<KvCopy> copies;          // copy-on-write block copies to run before the step
  // Swap copies, to run before everything else, outs before ins: a block a
  // swap-out frees may be a swap-in's or a copy's destination in this step.
  std::vector<KvSwap> swap_outs;       // pool -> host, of the swapped-out preempted
  std::vector<KvSwap> swap_ins;        // host -> pool, of the swapped_in
  std::vector<Sequence*> swapped_in;   // readmitted from the swap space (no recompute)
  int32_t n_tokens = 0;                // including lookahead slots
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager* kv);

  void Add(Sequence* seq);     // queue a new sequence
  // Add a sequence that already holds its blocks (a fork) straight to the
  // running set.
  void AddRunning(Sequence* seq);
  // Forget a sequence (finished or cancelled), releasing its blocks.
  void Remove(Sequence* seq);

  // Plans one step and reserves the KV blocks it needs. The caller runs the
  // chunks, then advances each seq->n_computed by its chunk's n_tokens.
  SchedulerOutput Schedule();

  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  bool idle() const { return waiting_.empty() && running_.empty(); }

 private:
  void Preempt(Sequence* seq, SchedulerOutput* out);

  SchedulerConfig config_;
  KvCacheManager* kv_;
  std::vector<Sequence*> running_;  // kept in RunsBefore order
  std::vector<Sequence*> waiting_;  // kept in RunsBefore order
};

}  // namespace llm
