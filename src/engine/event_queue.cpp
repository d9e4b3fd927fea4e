#include "engine/event_queue.h"

#include <chrono>
#include <cstring>

namespace llm {

namespace {
thread_local bool t_in_callback = false;

void Fill(const EventRecord& r, llm_event* e) {
  e->type = r.type;
  e->request_id = r.request_id;
  e->seq_index = r.seq_index;
  e->token = r.token;
  e->text = r.text.c_str();
  e->text_len = static_cast<uint32_t>(r.text.size());
  e->logprob = r.logprob;
  e->finish_reason = r.finish_reason;
  e->status = r.status;
  e->message = r.message.c_str();
  e->metrics = r.metrics;
  e->prompt_logprobs = r.has_prompt_logprobs ? r.prompt_logprobs.data() : nullptr;
  e->n_prompt_logprobs = r.has_prompt_logprobs ? static_cast<int32_t>(r.prompt_logprobs.size()) : 0;
  e->reserved0 = 0;
  e->top_logprobs = r.has_top_logprobs ? r.top_logprobs.data() : nullptr;
  e->n_top_logprobs = r.has_top_logprobs ? static_cast<int32_t>(r.top_logprobs.size()) : 0;
  e->reserved1 = 0;
  e->embedding = r.embedding_dim > 0 ? r.embedding.data() : nullptr;
  e->n_embedding = r.embedding_dim;
  e->n_embedding_rows = r.embedding_rows;
  e->kv_transfer_desc = r.kv_transfer_desc.empty() ? nullptr : r.kv_transfer_desc.c_str();
  e->transferred_prompt_tokens = r.transferred_prompt_tokens;
  e->kv_transfer_status = r.kv_transfer_status;
  e->reasoning_text = r.reasoning_text.c_str();
  e->reasoning_text_len = static_cast<uint32_t>(r.reasoning_text.size());
  e->part = r.part;
}
}  // namespace

void EventQueue::Push(EventRecord&& ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

void EventQueue::PushAll(std::vector<EventRecord>* evs) {
  if (evs->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : *evs) queue_.push_back(std::move(e));
  }
  evs->clear();
  cv_.notify_all();
}

void EventQueue::Wakeup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wakeup_ = true;
  }
  cv_.notify_all();
}

size_t EventQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

Status EventQueue::Poll(llm_event* events, uint32_t capacity, uint32_t stride, uint32_t* n_out,
                        int32_t timeout_ms) {
  if (t_in_callback) return InvalidArgument("llm_poll must not be called from an event callback");
  std::lock_guard<std::mutex> poll_lock(poll_mu_);
  delivered_.clear();
  std::vector<size_t> to_array;  // indices into delivered_
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return !queue_.empty() || wakeup_; };
    if (timeout_ms < 0) {
      cv_.wait(lock, ready);
    } else if (timeout_ms > 0) {
      cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
    }
    wakeup_ = false;
    // Take events in order; stop at the first array-bound event that no
    // longer fits, so no request's events are reordered.
    while (!queue_.empty()) {
      EventRecord& r = queue_.front();
      if (r.callback == nullptr) {
        if (to_array.size() >= capacity) break;
        to_array.push_back(delivered_.size());
      }
      delivered_.push_back(std::move(r));
      queue_.pop_front();
    }
  }
  // Outside the lock: the engine keeps pushing while we copy and call back.
  uint32_t n = 0;
  for (size_t i : to_array) {
    auto* e = reinterpret_cast<llm_event*>(reinterpret_cast<char*>(events) + size_t{n} * stride);
    llm_event full{};
    Fill(delivered_[i], &full);
    full.struct_size = stride;
    std::memcpy(e, &full, stride);
    ++n;
  }
  *n_out = n;
  for (const EventRecord& r : delivered_) {
    if (r.callback == nullptr) continue;
    llm_event e{};
    Fill(r, &e);
    e.struct_size = sizeof(llm_event);
    t_in_callback = true;
    r.callback(&e, r.user_data);
    t_in_callback = false;
  }
  return Status::Ok();
}

}  // namespace llm
