// Speculator: the engine's one door to speculative decoding. Each step it
// routes the sequences the scheduler gave lookahead slots to their mode's
// proposer (n-gram lookup or a draft model, both behind the Proposer
// interface), keeps proposers with a KV cache of their own in step with the
// target's copy-on-write copies, and after the target's pass verifies the
// drafts (verifier.h).
//
//   engine step:  Schedule -> Propose(plan) -> target forward over
//                 pending + drafts -> Verify(seq, rows) -> append the run
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "spec/ngram_proposer.h"
#include "spec/proposer.h"
#include "spec/verifier.h"

namespace llm {

class Speculator {
 public:
  // draft: the draft-model proposer, or null (then only n-gram drafting).
  Speculator(int32_t n_vocab, std::unique_ptr<Proposer> draft, VerifyPolicy policy = VerifyPolicy::kExact);

  bool has_draft() const { return draft_ != nullptr; }

  // Fills seq->drafts (at most the chunk's n_lookahead) for every chunk of
  // the plan; chunks without lookahead slots get none. A proposer failure
  // only means no drafts this step.
  void Propose(const SchedulerOutput& plan);

  // The outcome of one verification: the accepted drafts, then one
  // correction or bonus token, with their logprobs under the raw rows.
  struct Verified {
    std::span<const int32_t> tokens;  // (accepted + 1)
    std::span<const float> logprobs;  // (accepted + 1)
    int32_t n_drafts = 0;             // drafts verified
    int32_t accepted = 0;
  };
  // rows: (1 + drafts, n_vocab) the target's logits after the pending token
  // and after each draft. Clears seq->drafts; the views stay valid until the
  // next call.
  Verified Verify(Sequence* seq, Sampler& sampler, const float* rows);

 private:
  int32_t n_vocab_;
  VerifyPolicy policy_;
  std::unique_ptr<Proposer> ngram_;
  std::unique_ptr<Proposer> draft_;  // null: no draft model
  // Reusable buffers.
  std::vector<Sequence*> by_ngram_, by_draft_;  // this step's speculating sequences
  std::vector<float> scratch_, probs_, resid_;  // (n_vocab)
  std::vector<int32_t> tokens_;                 // (<= k+1) a verification's tokens
  std::vector<float> logprobs_;                 // (<= k+1)
};

}  // namespace llm
