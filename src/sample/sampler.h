// Token sampling: penalties, greedy, temperature, top-k, top-p, min-p, and a
// seeded RNG whose sequence is the same on every platform.
//
// One Sampler per sequence. It owns its scratch buffers (sized once for the
// vocabulary), so Sample() does not allocate on the hot path.
//
// The chain, in order:
//
//   raw logits ─► token rules (bias, min_tokens mask) ─► penalties ─► temperature == 0 or top_k == 1 ? argmax (ties → lowest id)
//                                   │ no
//                                   ▼
//              top-k ─► softmax(logits / T) ─► top-p ─► min-p ─► renormalise ─► draw
//
// Every filter keeps a prefix of the candidates ordered by (logit desc, id asc),
// a total order, so which tokens survive never depends on how the standard
// library breaks ties.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/token_rules.h"
#include "constrain/constraint.h"
#include "util/status.h"

namespace llm {

// Mirrors llm_sampling_params (without struct_size). See include/llm.h.
struct SamplingParams {
  float temperature = 0.8f;         // 0 = greedy
  int32_t top_k = 40;               // 0 = off
  float top_p = 0.95f;              // (0, 1]; 1 = off
  float min_p = 0.05f;              // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float frequency_penalty = 0.0f;   // [-2, 2]
  float presence_penalty = 0.0f;    // [-2, 2]
  int32_t penalty_last_n = 64;      // -1 = whole history, 0 = none
  uint64_t seed = 0;                // used as is: the engine resolves LLM_SEED_RANDOM
};

// INVALID_ARGUMENT naming the offending field and value, or OK.
Status ValidateSamplingParams(const SamplingParams& p);

// p with every out-of-range field replaced by its "off" value. The engine
// validates first; samplers (host and device) use this so that a bad value
// that slips through stays harmless, the same way everywhere.
SamplingParams SanitisedSamplingParams(SamplingParams p);

// xoshiro256** seeded through splitmix64: small, fast, and bit-identical on
// every platform (only 64-bit integer arithmetic).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t NextU64();
  double NextDouble();  // uniform in [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  // `p` should have passed ValidateSamplingParams; out-of-range values are
  // clamped to something harmless rather than trusted. n_vocab > 0.
  // The RNG is seeded from p.seed alone (UINT64_MAX is an ordinary seed here),
  // so equal params give equal draws.
  Sampler(const SamplingParams& p, int32_t n_vocab);

  // logits: (n_vocab) raw model logits; modified in place (penalties applied,
  // NaN replaced by -inf).
  // Take TokenLogprob() from them before calling this.
  // history: prompt + generated tokens so far; the penalties look at the last
  // penalty_last_n of them (ids outside the vocabulary are ignored).
  // Returns the chosen token id, always in [0, n_vocab).
  int32_t Sample(float* logits, std::span<const int32_t> history);

  // The distribution Sample() draws from, as probabilities by id, for the
  // speculative verifier (spec/verifier.h): the same chain — penalties, then
  // one-hot argmax when greedy, else top-k, softmax(logits / T), top-p, min-p,
  // renormalised. logits: (n_vocab), modified like Sample(). probs: (n_vocab)
  // out; zero for every filtered token, summing to 1.
  void Distribution(float* logits, std::span<const int32_t> history, float* probs);

  // Sample() takes the argmax (temperature 0 or top_k 1).
  bool greedy() const { return p_.temperature == 0.0f || p_.top_k == 1; }
  // Sample() neither modifies the logits nor draws: it is Argmax(logits)
  // (greedy, no penalty in force), so a caller may skip copying the row.
  bool is_plain_argmax() const {
    return greedy() && (rules_ == nullptr || rules_->empty()) && constraint_ == nullptr && (p_.penalty_last_n == 0 || (p_.repetition_penalty == 1.0f && p_.frequency_penalty == 0.0f &&
                                                   p_.presence_penalty == 0.0f));
  }
  // The id of the largest logit; ties go to the lowest id, NaN never wins.
  int32_t Argmax(const float* logits) const;
  // The request's token rules (logit bias, min_tokens), applied to the raw
  // logits first by Sample() and Distribution(); null = none. Not owned: the
  // request that holds them outlives its sequences' samplers.
  void set_rules(const TokenRules* rules) { rules_ = rules; }
  // The sequence's output constraint, applied after the token rules by
  // Sample() and Distribution() (forbidden tokens get -inf); null = none.
  // Not owned: the sequence that holds it outlives its sampler's use.
  void set_constraint(constrain::ConstraintState* c) { constraint_ = c; }
  // The sampler's own random stream, for draws made outside Sample().
  Rng& rng() { return rng_; }

  const SamplingParams& params() const { return p_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Candidate {
    float logit;  // penalised logit; NaN replaced by -inf
    int32_t id;
    float w;      // exp((logit - max) / T): unnormalised probability, max = 1
  };

  void ApplyPenalties(float* logits, std::span<const int32_t> history);
  // Over c[0..k) sorted by Before: sets each w and returns how many lead
  // candidates survive top-p and then min-p.
  size_t WeighAndCut(Candidate* c, size_t k, float inv_t) const;
  int32_t SampleTopK(const float* logits, float inv_t, size_t k);
  int32_t SampleWide(float* logits, float inv_t, size_t k);

  SamplingParams p_;
  const TokenRules* rules_ = nullptr;
  constrain::ConstraintState* constraint_ = nullptr;
  int32_t n_vocab_;
  Rng rng_;
  std::vector<Candidate> cand_;   // (n_vocab) scratch
  std::vector<float> w_;          // (n_vocab) scratch: filtered weights by id
  std::vector<int32_t> window_;   // (penalty window) scratch
};

// log p(token) under softmax(logits): no penalties, no temperature. Stable for
// large logits. Returns -inf for a token outside [0, n_vocab).
float TokenLogprob(const float* logits, int32_t n_vocab, int32_t token);

// Sample()'s token for a plain-argmax sampler (Sampler::is_plain_argmax:
// the first position of the largest non-NaN logit, 0 when there is none) and
// its TokenLogprob, from one pass over the row that serves both.
struct GreedyPick {
  int32_t token;
  float logprob;
};
GreedyPick GreedyWithLogprob(const float* logits, int32_t n_vocab);

// out[i] = logits[i] - logsumexp(logits), computed stably. `out` may alias `logits`.
void LogSoftmax(const float* logits, int32_t n_vocab, float* out);

}  // namespace llm
