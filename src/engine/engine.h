// Engine: owns the model, the backend and the KV pool, and runs one thread
// that loops schedule -> build the batch -> forward -> verify/sample ->
// postprocess (Step, in engine.cpp).
//
// Threads: Submit/Cancel/Poll/Wakeup/GetStats may be called from any thread.
// Everything the scheduler and the sequences hold is touched by the engine
// thread only; callers hand work over through `mu_`-guarded inboxes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vision_encoder.h"
#include "core/defaults.h"
#include "engine/batch_builder.h"
#include "engine/event_queue.h"
#include "engine/request_state.h"
#include "kv/kv_cache_manager.h"
#include "kvstate/kv_tiers.h"
#include "kvstate/kv_transfer.h"
#include "model/model.h"
#include "model/vision_weights.h"
#include "sched/scheduler.h"
#include "spec/proposer.h"
#include "spec/speculator.h"
#include "util/status.h"

namespace llm {

// Resolved: every field holds a real value (engine/context_builder.cpp turns
// llm_ctx_params into this; the defaults are core/defaults.h's).
struct EngineConfig {
  int32_t n_ctx = 0;             // max tokens per sequence
  int32_t block_size = defaults::kKvBlockSize;
  int32_t n_blocks = 0;
  int32_t max_seqs = defaults::kMaxSeqs;
  int32_t max_batch_tokens = defaults::kMaxBatchTokens;
  int32_t max_queued = defaults::kMaxQueued;
  int32_t spec_mode = LLM_SPEC_OFF;  // what LLM_SPEC_AUTO requests get (resolved)
  int32_t spec_k = defaults::kSpecK;  // drafts per round when a request says 0
  // Host swap space for preemption by swapping, in KV blocks of the
  // backend's format; 0: preemption recomputes.
  int32_t n_swap_slots = 0;
  // Host-memory and disk tiers under the prefix cache (kvstate/kv_tiers.h);
  // empty: none.
  kvstate::TierOptions tiers;
};

// Speculative decoding set-up of an engine (spec/): the draft proposer, if a
// draft model or self-drafting is configured.
struct SpecSetup {
  std::unique_ptr<Proposer> draft;  // null: only n-gram drafting
  VerifyPolicy verify = VerifyPolicy::kExact;  // tests only: see spec/verifier.h
};

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
  // The checks Submit makes on an LLM_TASK_EMBED spec against the model and
  // the context (embed_step.cpp), for callers that size buffers first.
  Status CheckEmbed(const RequestSpec& spec) const;
  // Values per output row of a checked EMBED spec (after `dimensions`).
  int32_t EmbedRowSize(const RequestSpec& spec) const;
  Status Poll(llm_event* events, uint32_t capacity, uint32_t stride, uint32_t* n_out, int32_t timeout_ms) {
    return events_.Poll(events, capacity, stride, n_out, timeout_ms);
  }
  void Wakeup() { events_.Wakeup(); }
  // The statistics as of the last published loop iteration (Publish), in
  // one consistent snapshot: every field of a full-size struct.
  void GetStats(llm_stats* out) const;
  // Each CUDA device's share (Backend::device_memory; its figures read now).
  std::vector<DeviceMemory> DeviceStats() const { return backend_->device_memory(); }

  // ---- work on the engine's own state from a caller's thread
  // Runs `fn` on the calling thread while the engine thread waits between
  // two steps, so fn may read and change what only the engine thread
  // touches otherwise (the KV pool, the backend's memory). Requests keep
  // queueing meanwhile; their steps wait. Callers take turns; a call from
  // inside fn on the same thread (a callback calling back) fails with
  // INVALID_ARGUMENT instead of deadlocking; SHUTDOWN once the engine stops.
  Status RunPaused(const std::function<Status(KvCacheManager& kv, Backend& backend)>& fn);

  // The KV stream of the cached prefix of `tokens` (kvstate/kv_transfer.h),
  // and its import into the prefix cache.
  StatusOr<int32_t> ExportKv(std::span<const int32_t> tokens, uint64_t cache_salt, const kvstate::WriteFn& write);
  kvstate::ImportResult ImportKv(uint64_t cache_salt, const kvstate::ReadFn& read);

  // A producer context's publisher (capi/capi_disagg.cpp): takes a
  // finished kv_produce request's KV stream, returns its descriptor. Set
  // before any request is submitted.
  using KvPublishFn = std::function<StatusOr<std::string>(std::vector<uint8_t> stream, int32_t n_tokens)>;
  void SetKvPublisher(KvPublishFn fn) { publish_kv_ = std::move(fn); }

  // ---- images in the prompt
  // Gives the engine a projector file (model/vision_weights.h) to encode
  // the images of requests with RequestSpec::pieces. Call once, before the
  // first such request. MODEL_FORMAT when the projector's output width is
  // not the text model's n_embd; UNSUPPORTED on a backend other than the
  // CPU's (the CUDA backend has no embedding-row input yet) or for a
  // projector the CPU encoder does not run; INVALID_ARGUMENT when one is
  // attached already.
  Status AttachVision(std::shared_ptr<const VisionModel> vision, int n_threads);
  // Soft tokens per image (0: no projector attached; kImageOwnSize: each
  // picture's own count, from its size: Qwen2.5-VL).
  static constexpr int32_t kImageOwnSize = -1;
  int32_t n_image_tokens() const { return n_image_tokens_.load(std::memory_order_acquire); }
  // What llm_stats.images_encoded, image_cache_hits, image_tokens and
  // image_encode_seconds report.
  struct ImageStats {
    uint64_t encoded = 0;     // images run through the vision encoder
    uint64_t cache_hits = 0;  // images whose rows came from the cache
    uint64_t tokens = 0;      // image positions of the requests admitted
    uint64_t encode_ns = 0;   // time in the vision encoder
  };
  ImageStats image_stats() const {
    return {images_encoded_.load(std::memory_order_relaxed), image_cache_hits_.load(std::memory_order_relaxed),
            image_tokens_.load(std::memory_order_relaxed), image_encode_ns_.load(std::memory_order_relaxed)};
  }

  const Model& model() const { return *model_; }
  // The KV geometry of this context's pool (n_layer 0: the backend cannot
  // read or write its KV blocks, so nothing can leave or enter the pool).
  kvstate::KvGeometry kv_geometry() const {
    return kvstate::ContextGeometry(model_->config, backend_->kv_wire_layout());
  }
  const EngineConfig& config() const { return config_; }
  bool has_draft() const { return spec_.has_draft(); }
  // The KV tiers' warnings so far (a disk tier turned off, files ignored).
  std::vector<std::string> TierWarnings() const;
  int32_t backend_kind() const { return backend_->kind(); }

 private:
  Engine(std::unique_ptr<Model> model, std::unique_ptr<Backend> backend, const EngineConfig& config,
         SpecSetup spec);
  void Run();                           // the engine thread
  void Admit(std::unique_ptr<RequestState> req);
  // Submit: lays spec->pieces out into spec->prompt and spec->image_spans,
  // checking them (image_layout.cpp).
  Status LayOutImages(RequestSpec* spec) const;
  // Admit: each span's rows, from the cache or the encoder (image_layout.cpp).
  Status EncodeImages(RequestState* r);
  void CancelRequest(uint64_t id);

  // ---- embedding requests (embed_step.cpp): checked at Submit, queued
  // at Admit, run whole (never chunked) a step's token budget at a time.
  void RunEmbeddings();
  // Ends an embedding request: its final event (or its sink row), then
  // forgets it. `vec` (rows, dim) is the finished output when status is OK.
  void FinishEmbed(RequestState* r, int32_t reason, llm_status status, const std::string& message,
                   std::vector<float> vec, int32_t dim, int32_t rows);

  // ---- one step (engine.cpp: Step, then the phases in its order)
  void Step();
  void AskForLookahead();               // speculating sequences ask for draft slots
  // Runs the plan's swap-outs; if the backend fails them, the sequences
  // they belonged to recompute instead (their K/V never reached the host).
  void RunSwapOuts(const SchedulerOutput& plan);
  void FailUnschedulable(const SchedulerOutput& plan);
  void MarkScheduled(const SchedulerOutput& plan, Clock::time_point now);
  // Swap-ins and copy-on-write copies, then the forward pass.
  Status RunForward(const SchedulerOutput& plan, const Batch& batch);
  void CommitComputed(const SchedulerOutput& plan);
  // Prompt logprobs, then forks, verification and sampling (which may finish
  // and free sequences, so it comes last and each sequence samples once).
  void Postprocess();

  void SampleNext(Sequence* seq, const float* logits);
  // Appends one generated token, streams it and ends the sequence on a stop
  // condition. Returns true when the sequence finished (it may be destroyed).
  bool AppendToken(Sequence* seq, int32_t token, float logprob);
  int32_t WantedDrafts(const Sequence& seq) const;
  // rows: (1 + drafts, n_vocab) the target's logits after the pending token
  // and after each draft.
  void VerifyDrafts(Sequence* seq, const float* rows);
  void ForkChildren(Sequence* parent, const float* logits);
  void MeasureKvUtilization();
  void Publish();  // stats_ -> published_, once per loop iteration, before its events
  void FillTierStats(llm_stats* s) const;  // the kv_tier_* and kv_imports_refused fields
  // A kv_produce request's prompt KV, exported and published: the
  // descriptor, or "" (nothing cached, or publishing failed: logged).
  std::string PublishKv(const Sequence& seq);
  void Finish(Sequence* seq, int32_t reason, llm_status status, const std::string& message);
  void EmitToken(Sequence* seq, int32_t token, float logprob, std::string_view text);
  // A reasoning request's constraint, once its answer has begun.
  void EngageConstraint(Sequence* seq);

  std::unique_ptr<Model> model_;
  std::unique_ptr<Backend> backend_;
  EngineConfig config_;
  EventQueue events_;
  Clock::time_point start_time_;

  // ---- shared with callers, guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool pause_requested_ = false;        // RunPaused wants the engine to wait
  bool paused_ = false;                 // the engine thread is waiting for it
  std::condition_variable paused_cv_;   // signals paused_
  std::mutex pause_turn_;               // RunPaused callers take turns
  std::atomic<std::thread::id> pauser_{};  // the thread inside RunPaused, if any
  std::vector<std::unique_ptr<RequestState>> inbox_;
  std::vector<uint64_t> cancel_inbox_;
  std::unordered_set<uint64_t> live_;   // submitted and not yet finished
  uint64_t next_id_ = 1;
  int32_t n_queued_ = 0;                // live requests not yet admitted to run
  uint64_t n_submitted_ = 0;
  llm_stats published_{};               // stats_ as of the last Publish

  // ---- engine thread only
  KvCacheManager kv_;
  std::unique_ptr<kvstate::KvTiers> tiers_;  // null: no tiers; set before the thread starts
  uint64_t imports_refused_ = 0;             // llm_kv_import calls refused (under RunPaused)
  KvPublishFn publish_kv_;                   // producer contexts only
  Scheduler scheduler_;
  Speculator spec_;
  // The vocabulary as a byte trie for constrained requests, built on the
  // first one (constrain/token_trie.h).
  std::shared_ptr<const constrain::TokenTrie> token_trie_;
  constrain::SharedMatcherPool shared_matchers_;  // constrained sequences of one program share masks
  BatchBuilder batch_;
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::vector<RequestState*> embed_queue_;   // admitted embedding requests not yet run, in order
  uint64_t arrival_ = 0;
  std::vector<EventRecord> pending_events_;  // flushed to events_ once per step
  std::vector<float> scratch_;               // (n_vocab) the sampler's copy of a row
  // Live statistics, in llm_stats' own fields (no conversion at the ABI);
  // the caller-side ones (submitted, queue depth) live under mu_.
  llm_stats stats_{};
  uint64_t busy_ns_ = 0;                     // time spent in steps
  std::vector<uint32_t> block_stamp_;        // (n_blocks) last step that counted a block
  std::vector<int32_t> block_fill_;          // (n_blocks) tokens held, this step
  uint32_t step_no_ = 0;
  double slots_allocated_ = 0, slots_filled_ = 0;  // summed over steps

  // ---- images: set by AttachVision before any image request, under mu_
  std::shared_ptr<const VisionModel> vision_model_;  // shared with the C API (capi_parts preprocesses for it)
  std::unique_ptr<cpu::VisionEncoder> vision_;   // used on the engine thread
  std::atomic<int32_t> n_image_tokens_{0};
  ImageCache image_cache_{defaults::kImageCacheEntries};  // engine thread only
  std::atomic<uint64_t> images_encoded_{0}, image_cache_hits_{0}, image_tokens_{0}, image_encode_ns_{0};

  std::thread thread_;
};

}  // namespace llm
