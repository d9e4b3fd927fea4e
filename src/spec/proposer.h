// Proposer: drafts the tokens a speculating sequence will probably generate
// next, for the target model to verify in one pass (verifier.h).
//
// Per engine step the engine asks each speculating sequence's proposer for
// at most seq->spec_k drafts (the lookahead slots the scheduler reserved):
//
//   tokens:   [ p0 ... | g0 ... g(m-1) ]     g(m-1) is pending (not yet run)
//   drafts:                              [ d1 d2 ... dk ]
//   target batch this step:   g(m-1) d1 ... dk   -> k+1 logits rows
//
// A proposer may return fewer drafts (even none). Every proposer here is
// deterministic given the sequence's tokens: the verifier treats its draft as
// a one-hot distribution q, which keeps rejection sampling exact.
#pragma once

#include <span>

#include "core/sequence.h"
#include "util/status.h"

namespace llm {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills seq->drafts (cleared first) with at most seq->spec_k tokens for
  // every sequence in `seqs`. Sequences of one call are batched where the
  // proposer can batch.
  virtual Status Propose(std::span<Sequence* const> seqs) = 0;
  // A proposer with a KV cache of its own (a draft model, addressed by the
  // target's block ids) follows the target's copy-on-write copies; one
  // without has nothing to copy.
  virtual Status CopyKvBlock(int32_t src, int32_t dst) {
    (void)src, (void)dst;
    return Status::Ok();
  }
};

}  // namespace llm
