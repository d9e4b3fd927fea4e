// Helpers for tests that drive the public C API.
#pragma once

#include <string>
#include <vector>

#include "llm.h"

namespace llm::test {

struct SeqResult {
  std::vector<llm_token> tokens;
  std::vector<float> logprobs;
  std::string text;
  int32_t n_token_events = 0;
  int32_t n_final = 0;
  int32_t finish_reason = LLM_FINISH_NONE;
  llm_status status = LLM_OK;
  std::string message;
  llm_metrics metrics{};
  std::vector<float> prompt_logprobs;
};

// Polls `ctx` until every sequence of `id` (n of them) has its final event,
// or `timeout_s` passes. Events of other requests are dropped.
std::vector<SeqResult> WaitFor(llm_ctx* ctx, llm_request_id id, int n = 1, double timeout_s = 60);

// Submits `prompt` greedily (temperature 0) and waits for the result.
SeqResult Generate(llm_ctx* ctx, const char* prompt, int max_tokens, const llm_sampling_params* sp = nullptr);

std::string ModelPathF32();  // models/stories260K-f32.gguf
std::string ModelPathF16();

}  // namespace llm::test
