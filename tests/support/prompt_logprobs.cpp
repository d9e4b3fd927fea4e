#include "support/prompt_logprobs.h"

#include <gtest/gtest.h>

#include "support/api_helpers.h"

namespace llm::test {

std::vector<float> PromptLogprobs(llm_ctx* ctx, const llm_token* ids, int32_t n) {
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = ids;
  r.n_prompt_tokens = n;
  r.max_tokens = 1;
  r.prompt_logprobs = 1;
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  r.sampling = &sp;
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
  if (id == 0) return {};
  auto res = WaitFor(ctx, id);
  EXPECT_FALSE(res.empty());
  return res.empty() ? std::vector<float>() : res[0].prompt_logprobs;
}

}  // namespace llm::test
