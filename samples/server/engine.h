// The server's side of one llm_ctx: many HTTP worker threads submit
// requests; one poller thread drains the context's events and hands each to
// the Job of the HTTP request that asked for it.
//
//   HTTP worker ──Submit──► llm_submit (callback = Hook)          engine thread
//        ▲                                                          │
//        └── Job::Wait ◄── Hook::OnEvent ◄── llm_poll (poller thread) ◄─┘
//
// Every llm request carries a heap Hook as its user_data. The Hook holds the
// Job alive until the request's last FINAL event, so a Job may be dropped by
// its HTTP handler (client gone, request cancelled) while events are still
// on their way.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "llm.h"

namespace server {

// One event of one sequence, copied out of the llm_event.
struct SeqEvent {
  int choice = 0;  // prompt index * n + seq_index
  bool final = false;
  llm_token token = -1;
  std::string text;
  std::string reasoning;  // the thinking's share of the text (reasoning_format)
  float logprob = 0.0f;
  std::vector<llm_top_logprob> top;         // TOKEN, when top_logprobs was asked for
  int32_t finish_reason = LLM_FINISH_NONE;  // FINAL only
  llm_status status = LLM_OK;               // FINAL only
  std::string message;                      // FINAL only
  llm_metrics metrics{};                    // FINAL only
  std::string kv_transfer_desc;             // FINAL of a kv_produce request
  int32_t transferred_tokens = 0;           // FINAL: prompt tokens that arrived by KV transfer
};

// The generations of one HTTP request: one llm request per prompt, n
// sequences each. Thread-safe.
class Job {
 public:
  // Waits up to `timeout` for events and appends them to *out. Returns true
  // when events were appended.
  bool Wait(std::vector<SeqEvent>* out, std::chrono::milliseconds timeout);
  // True once the FINAL event of every sequence has been queued.
  bool finished() const;
  // Cancels every request of this job (those already finished are skipped).
  // Returns true when something was still running.
  bool Cancel(llm_ctx* ctx);
  // The ids the sequence `choice` has generated so far.
  std::vector<llm_token> Tokens(int choice) const;

 private:
  friend class Engine;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SeqEvent> pending_;
  std::vector<llm_request_id> ids_;
  std::vector<std::vector<llm_token>> tokens_;  // per choice
  int finals_left_ = 0;
};

class Engine {
 public:
  // Takes ownership of ctx and starts the poller thread.
  explicit Engine(llm_ctx* ctx);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  llm_ctx* ctx() const { return ctx_; }

  // Submits reqs[i] (callback and user_data are set here) as prompt i of a new
  // Job with n sequences per prompt. On failure nothing stays queued (requests
  // already submitted are cancelled) and the status and llm_last_error()'s
  // message are returned; LLM_ERR_SHUTDOWN once shutdown has begun.
  llm_status Submit(std::vector<llm_request>& reqs, int n, std::shared_ptr<Job>* job, std::string* message);

  // Stops accepting requests and cancels every request in flight.
  void BeginShutdown();
  bool shutting_down() const { return stopping_.load(); }
  // BeginShutdown, waits (up to 10 s) for the cancelled requests' FINAL
  // events, stops the poller, destroys the context. Idempotent.
  void Shutdown();

  // Server-side counters for /v1/stats.
  std::atomic<uint64_t> cancelled_on_disconnect{0};
  std::atomic<uint64_t> http_requests{0};
  std::atomic<int64_t> active_streams{0};
  int live_requests() const;

 private:
  struct Hook;
  static void OnEvent(const llm_event* ev, void* user_data);
  void PollLoop();

  llm_ctx* ctx_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stop_poller_{false};
  std::thread poller_;
  mutable std::mutex mu_;
  std::condition_variable drained_;
  std::unordered_set<Hook*> hooks_;  // requests whose FINAL events are still due
};

}  // namespace server
