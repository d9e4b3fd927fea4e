// Verifier: decides, position by position, which drafted tokens the target
// model accepts, so that the tokens emitted are distributed exactly as
// non-speculative sampling would emit them.
//
// Temperature 0: a draft is accepted when it equals the target's argmax
// (after penalties); the first mismatch is replaced by that argmax.
// Temperature > 0 (rejection sampling, Leviathan et al. / Chen et al.): with
// p the target's transformed distribution and q the draft's, the draft d is
// accepted with probability min(1, p(d) / q(d)); on rejection the token is
// drawn from normalize(max(0, p - q)). The proposers here are deterministic
// (q one-hot at d), which reduces this to: accept with probability p(d), else
// draw from p with d removed, renormalised.
//
//   rows:  r0 (after the pending token) r1 (after d1) ... rk (after dk)
//   r0 accepts d1? -> r1 accepts d2? -> ... -> rk gives the bonus token
//   emitted: d1 .. da, then the correction (or the bonus when a = k)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampler.h"

namespace llm {

// How drafts are judged. kAcceptEveryDraft is a verifier that is wrong on
// purpose, so a statistical test can show that it notices (test_spec); the
// engine is given it only through the context builder's test overrides.
enum class VerifyPolicy { kExact, kAcceptEveryDraft };

// One rejection-sampling step over explicit distributions. p: (n) the
// target's probabilities; q: (n) the draft's, or empty for a one-hot q at
// `draft`. Returns `draft` when accepted, else a token drawn from
// normalize(max(0, p - q)). `scratch`: reused buffer.
int32_t RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft, Rng& rng,
                        std::vector<float>* scratch, VerifyPolicy policy = VerifyPolicy::kExact);

// Verifies one position: `logits` is the target's raw row (modified, as by
// Sampler::Sample), `history` the tokens before it, `draft` the proposed token
// or -1 for the bonus position (plain sampling). `probs`: (n_vocab) scratch.
// Returns the token to emit; it equals `draft` exactly when the draft is
// accepted.
int32_t VerifyPosition(Sampler& sampler, float* logits, std::span<const int32_t> history, int32_t draft,
                       std::vector<float>* probs, std::vector<float>* scratch,
                       VerifyPolicy policy = VerifyPolicy::kExact);

}  // namespace llm
