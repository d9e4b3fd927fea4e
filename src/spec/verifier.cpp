#include "spec/verifier.h"

#include <algorithm>

namespace llm {

namespace {
// Draws an index with probability w[i] / sum(w); -1 when the sum is 0.
int32_t Draw(std::span<const float> w, Rng& rng) {
  double total = 0.0;
  for (float x : w) total += x;
  if (!(total > 0.0)) return -1;
  const double target = rng.NextDouble() * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    if ((cum += w[i]) > target) return last;
  }
  return last;  // rounding left the target at the total
}
}  // namespace

int32_t RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft, Rng& rng,
                        std::vector<float>* scratch, VerifyPolicy policy) {
  const size_t n = p.size();
  const bool in_range = draft >= 0 && static_cast<size_t>(draft) < n;
  const double pd = in_range ? p[draft] : 0.0;
  const double qd = !in_range ? 0.0 : q.empty() ? 1.0 : q[draft];
  const double u = rng.NextDouble();
  if (in_range && (policy == VerifyPolicy::kAcceptEveryDraft || (qd > 0.0 && u * qd < pd))) {
    return draft;
  }
  scratch->resize(n);
  float* r = scratch->data();
  if (q.empty()) {
    std::copy(p.begin(), p.end(), r);
    if (in_range) r[draft] = 0.0f;
  } else {
    for (size_t i = 0; i < n; ++i) r[i] = std::max(0.0f, p[i] - q[i]);
  }
  int32_t t = Draw(std::span<const float>(r, n), rng);
  if (t < 0) t = Draw(p, rng);  // p == q up to rounding: the residual is empty
  return t >= 0 ? t : 0;
}

int32_t VerifyPosition(Sampler& sampler, float* logits, std::span<const int32_t> history, int32_t draft,
                       std::vector<float>* probs, std::vector<float>* scratch, VerifyPolicy policy) {
  if (draft < 0 || sampler.greedy()) {
    // Greedy: the argmax decides, exactly as without speculation. Bonus
    // position: plain sampling.
    const int32_t t = sampler.Sample(logits, history);
    if (draft >= 0 && policy == VerifyPolicy::kAcceptEveryDraft) return draft;
    return t;
  }
  probs->resize(static_cast<size_t>(sampler.n_vocab()));
  sampler.Distribution(logits, history, probs->data());
  return RejectionSample(*probs, {}, draft, sampler.rng(), scratch, policy);
}

}  // namespace llm
