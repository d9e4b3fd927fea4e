#include "support/api_helpers.h"

#include <gtest/gtest.h>

#include <chrono>

#include "support/test_paths.h"

namespace llm::test {

std::string ModelPathF32() { return RepoDir() + "/models/stories260K-f32.gguf"; }
std::string ModelPathF16() { return RepoDir() + "/models/stories260K-f16.gguf"; }

std::vector<SeqResult> WaitFor(llm_ctx* ctx, llm_request_id id, int n, double timeout_s) {
  std::vector<SeqResult> out(static_cast<size_t>(n));
  int finals = 0;
  auto t0 = std::chrono::steady_clock::now();
  llm_event ev[8];
  while (finals < n) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ADD_FAILURE() << "timed out waiting for request " << id;
      break;
    }
    uint32_t got = 0;
    ev[0].struct_size = sizeof(llm_event);
    EXPECT_EQ(llm_poll(ctx, ev, 8, &got, 200), LLM_OK) << llm_last_error();
    for (uint32_t k = 0; k < got; ++k) {
      const llm_event& e = ev[k];
      if (e.request_id != id) continue;
      EXPECT_GE(e.seq_index, 0);
      EXPECT_LT(e.seq_index, n);
      SeqResult& r = out[static_cast<size_t>(e.seq_index)];
      EXPECT_EQ(r.n_final, 0) << "event after the final event";
      r.text.append(e.text, e.text_len);
      if (e.type == LLM_EVENT_TOKEN) {
        r.tokens.push_back(e.token);
        r.logprobs.push_back(e.logprob);
        r.n_token_events++;
      } else {
        r.n_final++;
        finals++;
        r.finish_reason = e.finish_reason;
        r.status = e.status;
        r.message = e.message;
        r.metrics = e.metrics;
        if (e.prompt_logprobs) r.prompt_logprobs.assign(e.prompt_logprobs, e.prompt_logprobs + e.n_prompt_logprobs);
      }
    }
  }
  return out;
}

SeqResult Generate(llm_ctx* ctx, const char* prompt, int max_tokens, const llm_sampling_params* sp) {
  llm_sampling_params greedy;
  llm_sampling_params_init(&greedy);
  greedy.temperature = 0.0f;
  llm_request r;
  llm_request_init(&r);
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling = sp ? sp : &greedy;
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
  if (id == 0) return {};
  return WaitFor(ctx, id)[0];
}

}  // namespace llm::test
