// Per-request rules on which tokens a sequence may sample, applied to the raw
// logits before the sampler's chain (sampler.h): a logit bias per token, and
// min_tokens, which masks the tokens that would end the sequence (EOS/EOG and
// the request's stop_token_ids) until it has generated that many. Also the
// top-k logprobs a token event reports.
//
// One TokenRules per request, shared read-only by its sequences' samplers;
// it never changes after submit. Apply() knows a sequence's progress from the
// length of the history the sampler already gets (prompt + generated), so
// speculative verification, which samples several positions in one step,
// sees the mask lift at exactly the right position.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "util/status.h"

namespace llm {

struct TokenRules {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, bias), tokens unique
  std::vector<int32_t> stop_tokens;                    // end a sequence like EOS
  std::vector<int32_t> end_tokens;                     // masked until min_tokens: EOG (unless ignore_eos) + stop_tokens
  int32_t min_tokens = 0;
  int32_t n_prompt = 0;  // history.size() - n_prompt = tokens generated so far

  // True when Apply() changes nothing at any position.
  bool empty() const { return logit_bias.empty() && (min_tokens == 0 || end_tokens.empty()); }
  bool IsStopToken(int32_t token) const;
  // logits: (n_vocab) raw logits of the position after `history_len` tokens.
  void Apply(float* logits, size_t history_len) const;
};

// Checks and builds the rules of one request. bias: (token, bias) pairs as
// llm_sampling_params carries them; tokens must be in [0, n_vocab) and
// unique, biases finite in [-100, 100] or -inf. stop_tokens in [0, n_vocab).
// min_tokens in [0, max_tokens]. eog: the tokenizer's end-of-generation ids
// (masked by min_tokens unless ignore_eos).
StatusOr<TokenRules> MakeTokenRules(std::span<const std::pair<int32_t, float>> bias,
                                    std::span<const int32_t> stop_tokens, int32_t min_tokens, int32_t max_tokens,
                                    int32_t n_prompt, int32_t n_vocab, std::span<const int32_t> eog, bool ignore_eos);

// The most likely alternatives at one position.
struct TopLogprob {
  int32_t token;
  float logprob;
};

// The k most likely tokens under softmax(logits) with their log-probabilities
// (no bias, no temperature: TokenLogprob's distribution), most likely first,
// ties to the lower id; NaN logits never appear. *out is resized to
// min(k, n_vocab). `scratch` is reused between calls.
void TopLogprobs(const float* logits, int32_t n_vocab, int32_t k, std::vector<int32_t>* scratch,
                 std::vector<TopLogprob>* out);

}  // namespace llm
