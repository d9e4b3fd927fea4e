// The log-probabilities a context gives a token sequence as a prompt
// (teacher-forced: every configuration scores the same tokens), through the
// C API: one request with prompt_logprobs, greedy, one generated token.
#pragma once

#include <cstdint>
#include <vector>

#include "llm.h"

namespace llm::test {

// Empty (with a test failure recorded) when the request cannot be
// submitted or returns nothing.
std::vector<float> PromptLogprobs(llm_ctx* ctx, const llm_token* ids, int32_t n);

}  // namespace llm::test
