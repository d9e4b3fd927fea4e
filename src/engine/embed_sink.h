// Where llm_embed's requests deliver their vectors: straight into the
// caller's buffer, under a lock, instead of through the event queue (so a
// blocking embed neither needs nor disturbs llm_poll).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "llm.h"

namespace llm {

struct EmbedSink {
  float* out = nullptr;  // (n_inputs, dim) the caller's rows
  int32_t dim = 0;
  std::mutex mu;
  std::condition_variable cv;
  int32_t n_done = 0;        // requests delivered (any status)
  llm_status status = LLM_OK;  // the first failure, if any
  std::string message;

  // Called by the engine thread once per request.
  void Deliver(int32_t index, llm_status st, const std::string& msg, const float* v, int64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (st == LLM_OK && n == dim) {
        std::memcpy(out + static_cast<int64_t>(index) * dim, v, static_cast<size_t>(n) * sizeof(float));
      } else if (status == LLM_OK) {
        status = st == LLM_OK ? LLM_ERR_INTERNAL : st;
        message = st == LLM_OK ? "an embedding of the wrong size" : msg;
      }
      ++n_done;
    }
    cv.notify_all();
  }
};

}  // namespace llm
