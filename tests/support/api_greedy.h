// Greedy generation through the C API and the near-tie rule the CUDA tests
// compare it by (test_cuda_capi.cpp explains the rule; test_cuda_offload
// applies it to partial offload).
//
// Near-tie rule: the two contexts' greedy tokens must agree up to the first
// position where they differ; there the other context's token must be the
// reference's runner-up and the reference's top two within `near_tie` nats.
// The continuations after it are not compared (they follow different
// histories).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "llm.h"

namespace llm::test {

struct ApiGreedyRun {
  std::vector<llm_token> tokens;
  std::vector<std::vector<llm_top_logprob>> top;  // (tokens) the top_k most likely under this context
  llm_status status = LLM_OK;
  llm_metrics metrics{};
  int32_t transferred = 0;              // the final event's transferred_prompt_tokens
  llm_status kv_transfer_status = LLM_OK;
};

// n greedy tokens after `prompt` (EOS ignored), with each position's top_k;
// keep_kv and kv_transfer_desc are the request's fields of those names.
// ApiGreedyRequest: the same for a request whose prompt the caller set
// (prompt, prompt_tokens or parts).
inline ApiGreedyRun ApiGreedyRequest(llm_ctx* ctx, llm_request r, int n, int32_t top_k = 2, int32_t keep_kv = 0,
                                     const char* kv_transfer_desc = nullptr);

inline ApiGreedyRun ApiGreedy(llm_ctx* ctx, const std::vector<llm_token>& prompt, int n, int32_t top_k = 2,
                              int32_t keep_kv = 0, const char* kv_transfer_desc = nullptr) {
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = prompt.data();
  r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
  return ApiGreedyRequest(ctx, r, n, top_k, keep_kv, kv_transfer_desc);
}

inline ApiGreedyRun ApiGreedyRequest(llm_ctx* ctx, llm_request r, int n, int32_t top_k, int32_t keep_kv,
                                     const char* kv_transfer_desc) {
  ApiGreedyRun run;
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  r.max_tokens = n;
  r.ignore_eos = 1;
  r.top_logprobs = top_k;
  r.keep_kv = keep_kv;
  r.kv_transfer_desc = kv_transfer_desc;
  r.sampling = &sp;
  llm_request_id id = 0;
  run.status = llm_submit(ctx, &r, &id);
  if (run.status != LLM_OK) return run;
  llm_event ev[32];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (bool done = false; !done;) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no final event within 5 minutes";
      run.status = LLM_ERR_INTERNAL;
      return run;
    }
    for (llm_event& e : ev) {
      std::memset(&e, 0, sizeof e);
      e.struct_size = sizeof e;
    }
    uint32_t n_ev = 0;
    run.status = llm_poll(ctx, ev, 32, &n_ev, 1000);
    if (run.status != LLM_OK) return run;
    for (uint32_t i = 0; i < n_ev; ++i) {
      if (ev[i].request_id != id) continue;
      if (ev[i].type == LLM_EVENT_TOKEN) {
        run.tokens.push_back(ev[i].token);
        run.top.emplace_back(ev[i].top_logprobs, ev[i].top_logprobs + ev[i].n_top_logprobs);
      } else if (ev[i].type == LLM_EVENT_FINAL) {
        run.status = ev[i].status;
        run.metrics = ev[i].metrics;
        run.transferred = ev[i].transferred_prompt_tokens;
        run.kv_transfer_status = ev[i].kv_transfer_status;
        done = true;
      }
    }
  }
  return run;
}

// Applies the near-tie rule to `got` against the reference `want` (both
// run with top_k >= 2); returns how many leading tokens are equal.
inline size_t ExpectEqualUpToNearTie(const ApiGreedyRun& want, const ApiGreedyRun& got, float near_tie) {
  EXPECT_EQ(got.tokens.size(), want.tokens.size());
  size_t i = 0;
  while (i < want.tokens.size() && i < got.tokens.size() && got.tokens[i] == want.tokens[i]) ++i;
  if (i < want.tokens.size() && i < got.tokens.size()) {
    EXPECT_GE(want.top[i].size(), 2u);
    if (want.top[i].size() < 2) return i;
    const float gap = want.top[i][0].logprob - want.top[i][1].logprob;
    std::printf("first difference at generated position %zu of %zu, reference gap %.4f nats\n", i,
                want.tokens.size(), gap);
    EXPECT_EQ(want.top[i][1].token, got.tokens[i])
        << "at generated position " << i << ": the token is not the reference's runner-up";
    EXPECT_LE(gap, near_tie) << "at generated position " << i << ": not a near-tie";
  }
  return i;
}

}  // namespace llm::test
