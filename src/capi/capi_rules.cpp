// The token-level options of llm_submit (issue 20): logit_bias from
// llm_sampling_params, stop_token_ids, min_tokens and top_logprobs from
// llm_request, checked and turned into the request's TokenRules.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_util.h"
#include "sample/token_rules.h"

namespace llm::capi {

llm_status ToTokenRules(const llm_request& r, const llm_sampling_params* sampling, const Tokenizer& tok,
                        RequestSpec* spec) {
  std::vector<std::pair<int32_t, float>> bias;
  if (sampling != nullptr && sampling->struct_size >= offsetof(llm_sampling_params, reserved1) + sizeof(int32_t)) {
    if (sampling->reserved1 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "sampling.reserved1 must be 0");
    if (sampling->n_logit_bias < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "sampling.n_logit_bias must be >= 0");
    if (sampling->n_logit_bias > 0 && sampling->logit_bias == nullptr)
      return Fail(LLM_ERR_NULL_ARGUMENT, "sampling.logit_bias is NULL but n_logit_bias > 0");
    if (sampling->n_logit_bias > tok.n_vocab())
      return Fail(LLM_ERR_INVALID_ARGUMENT, "sampling.n_logit_bias " + std::to_string(sampling->n_logit_bias) +
                                                " exceeds the vocabulary (" + std::to_string(tok.n_vocab()) + ")");
    for (int32_t i = 0; i < sampling->n_logit_bias; ++i)
      bias.emplace_back(sampling->logit_bias[i].token, sampling->logit_bias[i].bias);
  }
  if (r.reserved1 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved1 must be 0");
  if (r.n_stop_token_ids < 0 || r.n_stop_token_ids > 1024)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "n_stop_token_ids must be in [0, 1024]");
  if (r.n_stop_token_ids > 0 && r.stop_token_ids == nullptr)
    return Fail(LLM_ERR_NULL_ARGUMENT, "stop_token_ids is NULL but n_stop_token_ids > 0");
  if (r.top_logprobs < 0 || r.top_logprobs > 20)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "top_logprobs must be in [0, 20] (got " + std::to_string(r.top_logprobs) + ")");
  std::vector<int32_t> eog;
  if (r.min_tokens > 0 && !spec->ignore_eos) {
    for (int32_t t = 0; t < tok.n_vocab(); ++t)
      if (tok.IsEog(t)) eog.push_back(t);
  }
  auto rules = MakeTokenRules(bias, std::span<const int32_t>(r.stop_token_ids, static_cast<size_t>(r.n_stop_token_ids)),
                              r.min_tokens, r.max_tokens, static_cast<int32_t>(spec->prompt.size()), tok.n_vocab(),
                              eog, spec->ignore_eos);
  if (!rules.ok()) return Fail(rules.status());
  spec->rules = std::move(*rules);
  spec->top_logprobs = r.top_logprobs;
  return LLM_OK;
}

}  // namespace llm::capi
