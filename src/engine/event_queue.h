// EventQueue: events travel from the engine thread to llm_poll callers.
//
// The engine pushes owned EventRecords; Poll moves them out under the lock,
// then (without the lock) turns them into llm_event structs that point into
// storage kept until the next Poll, and runs callbacks on the polling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "llm.h"
#include "util/status.h"

namespace llm {

struct EventRecord {
  int32_t type = LLM_EVENT_TOKEN;
  uint64_t request_id = 0;
  int32_t seq_index = 0;
  int32_t token = -1;
  std::string text;
  std::string reasoning_text;  // a reasoning_format request: the thinking's share
  int32_t part = LLM_PART_CONTENT;
  float logprob = 0.0f;
  int32_t finish_reason = LLM_FINISH_NONE;
  llm_status status = LLM_OK;
  std::string message;
  llm_metrics metrics{};
  std::vector<float> prompt_logprobs;
  bool has_prompt_logprobs = false;
  std::vector<llm_top_logprob> top_logprobs;  // TOKEN: the request's top_logprobs alternatives
  bool has_top_logprobs = false;
  std::vector<float> embedding;  // FINAL of an EMBED request: (embedding_rows, embedding_dim)
  int32_t embedding_dim = 0;
  int32_t embedding_rows = 0;
  std::string kv_transfer_desc;   // FINAL of a kv_produce request: the descriptor ("" = none)
  int32_t transferred_prompt_tokens = 0;
  llm_status kv_transfer_status = LLM_OK;
  llm_event_callback callback = nullptr;
  void* user_data = nullptr;
};

class EventQueue {
 public:
  void Push(EventRecord&& ev);
  void PushAll(std::vector<EventRecord>* evs);  // moves and clears *evs
  void Wakeup();
  // See llm_poll in llm.h. `stride` is the caller's sizeof(llm_event).
  Status Poll(llm_event* events, uint32_t capacity, uint32_t stride, uint32_t* n_out, int32_t timeout_ms);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EventRecord> queue_;
  bool wakeup_ = false;

  std::mutex poll_mu_;                 // serializes polls; guards delivered_
  std::vector<EventRecord> delivered_; // backs the pointers of the last poll
};

}  // namespace llm
