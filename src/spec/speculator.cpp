#include "spec/speculator.h"

#include <cstring>

#include "llm.h"

namespace llm {

Speculator::Speculator(int32_t n_vocab, std::unique_ptr<Proposer> draft, VerifyPolicy policy)
    : n_vocab_(n_vocab), policy_(policy), ngram_(std::make_unique<NgramProposer>()), draft_(std::move(draft)) {
  scratch_.resize(n_vocab);
  probs_.resize(n_vocab);
  resid_.resize(n_vocab);
}

void Speculator::Propose(const SchedulerOutput& plan) {
  by_ngram_.clear();
  by_draft_.clear();
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* s = c.seq;
    s->drafts.clear();
    s->spec_k = c.n_lookahead;
    if (c.n_lookahead <= 0) continue;
    (s->spec_mode == LLM_SPEC_DRAFT ? by_draft_ : by_ngram_).push_back(s);
  }
  if (!by_ngram_.empty()) (void)ngram_->Propose(by_ngram_);
  if (draft_ == nullptr) return;
  // The draft's cache follows the target's copy-on-write copies (the draft
  // may already hold K/V for the copied block's tokens); if it cannot, the
  // draft recomputes those sequences from their start.
  for (const KvCopy& c : plan.copies) {
    if (!draft_->CopyKvBlock(c.src, c.dst).ok()) {
      for (const ScheduledChunk& ch : plan.chunks) ch.seq->draft_computed = 0;
      break;
    }
  }
  if (!by_draft_.empty() && !draft_->Propose(by_draft_).ok()) {
    for (Sequence* s : by_draft_) s->drafts.clear();
  }
}

Speculator::Verified Speculator::Verify(Sequence* seq, Sampler& sampler, const float* rows) {
  const int32_t n_drafts = static_cast<int32_t>(seq->drafts.size());
  const size_t base = seq->tokens.size();
  logprobs_.clear();
  for (int32_t i = 0; i <= n_drafts; ++i) {
    const float* row = rows + static_cast<size_t>(i) * n_vocab_;
    std::memcpy(scratch_.data(), row, sizeof(float) * n_vocab_);  // the sampler edits its copy
    const int32_t d = i < n_drafts ? seq->drafts[i] : -1;
    const int32_t t = VerifyPosition(sampler, scratch_.data(), seq->tokens, d, &probs_, &resid_, policy_);
    seq->tokens.push_back(t);  // the history the next position's penalties see
    logprobs_.push_back(TokenLogprob(row, n_vocab_, t));
    if (t != d) break;
  }
  tokens_.assign(seq->tokens.begin() + static_cast<std::ptrdiff_t>(base), seq->tokens.end());
  seq->tokens.resize(base);
  seq->drafts.clear();
  const int32_t accepted = static_cast<int32_t>(tokens_.size()) - 1;
  return Verified{tokens_, logprobs_, n_drafts, accepted};
}

}  // namespace llm
