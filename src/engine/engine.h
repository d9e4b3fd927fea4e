// Engine: owns the model, the backend and the KV pool, and runs one thread
// that loops schedule -> forward -> sample -> postprocess.
//
// Threads: Submit/Cancel/Poll/Wakeup/GetStats may be called from any thread.
// Everything the scheduler and the sequences hold is touched by the engine
// thread only; callers hand work over through `mu_`-guarded inboxes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "engine/event_queue.h"
#include "engine/sequence.h"
#include "kv/kv_cache_manager.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "util/status.h"

namespace llm {

struct EngineConfig {
  int32_t n_ctx = 0;             // max tokens per sequence
  int32_t block_size = 16;
  int32_t n_blocks = 0;
  int32_t max_seqs = 16;
  int32_t max_batch_tokens = 512;
  int32_t max_queued = 1024;
  int32_t spec_mode = LLM_SPEC_OFF;  // what LLM_SPEC_AUTO requests get (resolved)
  int32_t spec_k = 4;                // drafts per round when a request says 0
  int32_t preempt_mode = LLM_PREEMPT_RECOMPUTE;
  // LLM_PREEMPT_SWAP: host memory for swapped-out KV blocks (Create turns
  // it into whole blocks of the backend's format); 0 = the pool's size, at
  // most kDefaultSwapBytes. Must be 0 with RECOMPUTE.
  uint64_t swap_space_bytes = 0;
  static constexpr uint64_t kDefaultSwapBytes = uint64_t{1} << 30;
};

// Speculative decoding set-up of an engine (spec/): the draft proposer, if a
// draft model or self-drafting is configured.
struct SpecSetup {
  std::unique_ptr<DraftModelProposer> draft;  // null: only n-gram drafting
};

// A validated, tokenized request.
struct RequestSpec {
  std::vector<int32_t> prompt;        // (n_prompt) token ids
  SamplingParams sampling;
  int32_t max_tokens = 256;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int32_t n = 1;
  int32_t priority = 0;
  bool prompt_logprobs = false;
  TokenRules rules;                   // logit bias, stop token ids, min_tokens (sample/token_rules.h)
  int32_t top_logprobs = 0;           // alternatives per token event, [0, 20]
  uint64_t cache_salt = 0;
  int32_t spec_mode = LLM_SPEC_OFF;   // resolved: OFF, NGRAM or DRAFT (never AUTO)
  int32_t spec_k = 4;                 // drafts per round, >= 1
  llm_event_callback callback = nullptr;
  void* user_data = nullptr;
};

using Clock = std::chrono::steady_clock;

struct RequestState;  // engine.cpp

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<Model> model,
                                                  std::unique_ptr<Backend> backend,
                                                  const EngineConfig& config, SpecSetup spec = {});
  ~Engine();  // cancels everything, joins the engine thread

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  StatusOr<uint64_t> Submit(RequestSpec spec);
  Status Cancel(uint64_t id);
  Status Poll(llm_event* events, uint32_t capacity, uint32_t stride, uint32_t* n_out, int32_t timeout_ms) {
    return events_.Poll(events, capacity, stride, n_out, timeout_ms);
  }
  void Wakeup() { events_.Wakeup(); }
  void GetStats(llm_stats* out) const;  // fills every field of a full-size struct

  const Model& model() const { return *model_; }
  const EngineConfig& config() const { return config_; }
  bool has_draft() const { return draft_ != nullptr; }
  int32_t backend_kind() const { return backend_->kind(); }

 private:
  Engine(std::unique_ptr<Model> model, std::unique_ptr<Backend> backend, const EngineConfig& config,
         SpecSetup spec, int32_t n_swap_slots);
  // Runs the plan's swap-outs; if the backend fails them, the sequences
  // they belonged to recompute instead (their K/V never reached the host).
  void RunSwapOuts(const SchedulerOutput& plan);
  void Run();                           // the engine thread
  void Admit(std::unique_ptr<RequestState> req);
  void CancelRequest(uint64_t id);
  void Step();
  void SampleNext(Sequence* seq, const float* logits);
  // Appends one generated token, streams it and ends the sequence on a stop
  // condition. Returns true when the sequence finished (it may be destroyed).
  bool AppendToken(Sequence* seq, int32_t token, float logprob);
  int32_t WantedDrafts(const Sequence& seq) const;
  void ProposeDrafts(const SchedulerOutput& plan);
  // rows: (1 + drafts, n_vocab) the target's logits after the pending token
  // and after each draft.
  void VerifyDrafts(Sequence* seq, const float* rows);
  void ForkChildren(Sequence* parent, const float* logits);
  void MeasureKvUtilization();
  void PublishGauges();  // running/waiting/KV figures for GetStats, after a step or a cancel
  void Finish(Sequence* seq, int32_t reason, llm_status status, const std::string& message);
  void EmitToken(Sequence* seq, int32_t token, float logprob, std::string_view text);

  std::unique_ptr<Model> model_;
  std::unique_ptr<Backend> backend_;
  EngineConfig config_;
  std::unique_ptr<DraftModelProposer> draft_;  // null: no draft model
  NgramProposer ngram_;
  EventQueue events_;

  // ---- shared with callers, guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::unique_ptr<RequestState>> inbox_;
  std::vector<uint64_t> cancel_inbox_;
  std::unordered_set<uint64_t> live_;   // submitted and not yet finished
  uint64_t next_id_ = 1;
  int32_t n_queued_ = 0;                // live requests not yet admitted to run

  // ---- engine thread only
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  uint64_t arrival_ = 0;
  std::vector<EventRecord> pending_events_;  // flushed to events_ once per step
  // Reusable step buffers.
  std::vector<int32_t> batch_tokens_;        // (n_tokens)
  std::vector<BatchSeq> batch_seqs_;         // (n_seqs)
  std::vector<int32_t> logit_rows_;          // (n_logits)
  std::vector<float> logits_;                // (n_logits, n_vocab)
  std::vector<float> scratch_;               // (n_vocab)
  std::vector<Sequence*> spec_ngram_;        // this step's n-gram speculating sequences
  std::vector<Sequence*> spec_draft_;        // ... and draft-model ones
  std::vector<float> probs_, resid_;         // (n_vocab) verifier scratch
  std::vector<int32_t> verified_;            // (<= k+1) tokens a verification emits
  std::vector<float> verified_lp_;           // (<= k+1) their logprobs
  std::vector<std::vector<TopLogprob>> verified_top_;  // (<= k+1) their top_logprobs, if asked
  std::vector<uint32_t> block_stamp_;        // (n_blocks) last step that counted a block
  std::vector<int32_t> block_fill_;          // (n_blocks) tokens held, this step
  uint32_t step_no_ = 0;
  double slots_allocated_ = 0, slots_filled_ = 0;  // summed over steps

  // ---- statistics (atomics: read by GetStats on any thread)
  Clock::time_point start_time_;
  std::atomic<uint64_t> st_submitted_{0}, st_finished_{0}, st_prompt_tokens_{0}, st_generated_{0},
      st_steps_{0}, st_busy_ns_{0};
  std::atomic<int32_t> st_running_{0}, st_waiting_{0}, st_blocks_used_{0}, st_blocks_cached_{0};
  std::atomic<uint64_t> st_prefix_queried_{0}, st_prefix_hit_{0}, st_preemptions_{0};
  std::atomic<uint64_t> st_draft_proposed_{0}, st_draft_accepted_{0}, st_spec_rounds_{0};
  std::atomic<uint64_t> st_swap_outs_{0}, st_swap_ins_{0}, st_swap_blocks_out_{0}, st_swap_blocks_in_{0};
  std::atomic<int32_t> st_swap_used_{0};
  std::atomic<double> st_kv_utilization_{0.0};

  std::thread thread_;
};

}  // namespace llm
