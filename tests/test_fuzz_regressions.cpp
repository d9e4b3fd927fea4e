// Inputs the fuzzers (tests/fuzz) found problems with, kept as fixed cases so
// the fixes stay fixed. Each names its target and what went wrong.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "llm.h"
#include "support/api_helpers.h"

namespace llm::test {
namespace {

// fuzz_capi: penalty_last_n = INT32_MAX made the engine thread reserve an
// 8 GiB penalty window when it admitted the request (out of memory, and
// std::bad_alloc on the engine thread). The window now grows with the
// sequence instead.
TEST(FuzzRegressions, HugePenaltyWindowIsNotReservedUpFront) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = 1;
  p.n_ctx = 64;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  sp.penalty_last_n = INT32_MAX;
  sp.repetition_penalty = 1.3f;
  SeqResult r = Generate(ctx, "Once upon a time", 8, &sp);
  EXPECT_EQ(r.status, LLM_OK) << r.message;
  EXPECT_EQ(r.tokens.size(), 8u);
  sp.penalty_last_n = -1;  // whole sequence: same window in practice
  SeqResult whole = Generate(ctx, "Once upon a time", 8, &sp);
  EXPECT_EQ(whole.tokens, r.tokens);
  llm_ctx_destroy(ctx);
}

// fuzz_capi: max_tokens = INT32_MAX made the engine reserve token storage
// for prompt + max_tokens per sequence (GiBs). Such a request can never fit
// the context: it is rejected at submit, and the reservation is capped by
// the context anyway.
TEST(FuzzRegressions, HugeMaxTokensIsRejectedNotReserved) {
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(nullptr, &ctx), LLM_OK) << llm_last_error();
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time";
  r.max_tokens = INT32_MAX;
  r.n = 64;
  llm_request_id id = 0;
  EXPECT_EQ(llm_submit(ctx, &r, &id), LLM_ERR_CONTEXT_OVERFLOW);
  r.max_tokens = 500;  // fits the 512-token context exactly
  r.n = 4;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
  ASSERT_EQ(llm_cancel(ctx, id), LLM_OK);
  auto res = WaitFor(ctx, id, 4);
  for (auto& s : res) EXPECT_EQ(s.n_final, 1);
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
