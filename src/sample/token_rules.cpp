#include "sample/token_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "sample/sum_exp.h"

namespace llm {

bool TokenRules::IsStopToken(int32_t token) const {
  return std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end();
}

void TokenRules::Apply(float* logits, size_t history_len) const {
  for (const auto& [token, bias] : logit_bias) logits[token] += bias;
  const int64_t generated = static_cast<int64_t>(history_len) - n_prompt;
  if (generated < min_tokens) {
    for (int32_t t : end_tokens) logits[t] = -std::numeric_limits<float>::infinity();
  }
}

StatusOr<TokenRules> MakeTokenRules(std::span<const std::pair<int32_t, float>> bias,
                                    std::span<const int32_t> stop_tokens, int32_t min_tokens, int32_t max_tokens,
                                    int32_t n_prompt, int32_t n_vocab, std::span<const int32_t> eog, bool ignore_eos) {
  TokenRules r;
  if (bias.size() > static_cast<size_t>(n_vocab))
    return InvalidArgument("sampling.n_logit_bias " + std::to_string(bias.size()) + " exceeds the vocabulary (" +
                           std::to_string(n_vocab) + ")");
  for (size_t i = 0; i < bias.size(); ++i) {
    const auto [token, b] = bias[i];
    const std::string where = "sampling.logit_bias[" + std::to_string(i) + "]";
    if (token < 0 || token >= n_vocab)
      return InvalidArgument(where + ".token " + std::to_string(token) + " is outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")");
    // -inf bans a token; NaN, +inf and huge values would poison the softmax.
    if (!(b == -std::numeric_limits<float>::infinity() || (b >= -100.0f && b <= 100.0f))) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(b));
      return InvalidArgument(where + ".bias must be in [-100, 100] or -INFINITY (got " + buf + ")");
    }
    r.logit_bias.emplace_back(token, b);
  }
  std::vector<std::pair<int32_t, float>> sorted = r.logit_bias;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first == sorted[i - 1].first)
      return InvalidArgument("sampling.logit_bias names token " + std::to_string(sorted[i].first) + " twice");
  }
  if (stop_tokens.size() > 1024)
    return InvalidArgument("n_stop_token_ids must be in [0, 1024] (got " + std::to_string(stop_tokens.size()) + ")");
  for (size_t i = 0; i < stop_tokens.size(); ++i) {
    if (stop_tokens[i] < 0 || stop_tokens[i] >= n_vocab)
      return InvalidArgument("stop_token_ids[" + std::to_string(i) + "] = " + std::to_string(stop_tokens[i]) +
                             " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    r.stop_tokens.push_back(stop_tokens[i]);
  }
  if (min_tokens < 0 || min_tokens > max_tokens)
    return InvalidArgument("min_tokens must be in [0, max_tokens = " + std::to_string(max_tokens) + "] (got " +
                           std::to_string(min_tokens) + ")");
  r.min_tokens = min_tokens;
  r.n_prompt = n_prompt;
  if (min_tokens > 0) {
    r.end_tokens = r.stop_tokens;
    if (!ignore_eos) r.end_tokens.insert(r.end_tokens.end(), eog.begin(), eog.end());
    std::sort(r.end_tokens.begin(), r.end_tokens.end());
    r.end_tokens.erase(std::unique(r.end_tokens.begin(), r.end_tokens.end()), r.end_tokens.end());
    std::erase_if(r.end_tokens, [&](int32_t t) { return t < 0 || t >= n_vocab; });
  }
  return r;
}

void TopLogprobs(const float* logits, int32_t n_vocab, int32_t k, std::vector<int32_t>* scratch,
                 std::vector<TopLogprob>* out) {
  out->clear();
  k = std::min(k, n_vocab);
  if (k <= 0) return;
  // Order: larger logit first, NaN last, ties to the lower id (a total order,
  // so the result never depends on the partial sort's tie breaking).
  auto before = [logits](int32_t a, int32_t b) {
    const float x = logits[a], y = logits[b];
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a < b;
  };
  std::vector<int32_t>& ids = *scratch;
  ids.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  for (int32_t i = 0; i < k; ++i) {
    const int32_t t = ids[static_cast<size_t>(i)];
    if (std::isnan(logits[t])) break;
    out->push_back({t, 0.0f});
  }
  // One pass over the row serves all k, with TokenLogprob's arithmetic, so
  // the sampled token's entry equals the event's logprob exactly.
  const MaxSumExp r = RowMaxSumExp(logits, n_vocab);
  for (TopLogprob& t : *out) {
    const float l = logits[t.token];
    if (!std::isfinite(r.max)) {
      t.logprob = -std::numeric_limits<float>::infinity();
      continue;
    }
    const double log_sum = std::log1p((r.n_max - 1.0) + r.rest);
    t.logprob = static_cast<float>(static_cast<double>(l) - r.max - log_sum);
  }
}

}  // namespace llm
