#include "engine/batch_builder.h"

#include <algorithm>

#include "core/mrope_positions.h"
#include "engine/engine.h"

namespace llm {

Batch BatchBuilder::Build(const SchedulerOutput& plan) {
  tokens_.clear();
  seqs_.clear();
  logit_rows_.clear();
  rows_.clear();
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* s = c.seq;
    const int32_t first = static_cast<int32_t>(tokens_.size());
    tokens_.insert(tokens_.end(), s->tokens.begin() + s->n_computed, s->tokens.begin() + s->n_computed + c.n_tokens);
    const int32_t n_drafts = static_cast<int32_t>(s->drafts.size());  // 0 unless speculating
    tokens_.insert(tokens_.end(), s->drafts.begin(), s->drafts.end());
    seqs_.push_back(BatchSeq{first, c.n_tokens + n_drafts, s->n_computed, s->block_table});
    if (Gen(s).req->spec.prompt_logprobs) {
      // Rows predicting prompt tokens 1 .. n_prompt-1 not yet scored.
      for (int32_t p = std::max(s->n_computed, static_cast<int32_t>(Gen(s).prompt_logprobs.size()));
           p < std::min(s->n_computed + c.n_tokens, s->n_prompt - 1); ++p) {
        logit_rows_.push_back(first + (p - s->n_computed));
        rows_.push_back({s, p, LogitRow::kPromptLogprob});
      }
    }
    if (s->n_computed + c.n_tokens == static_cast<int32_t>(s->tokens.size())) {
      logit_rows_.push_back(first + c.n_tokens - 1);
      rows_.push_back({s, static_cast<int32_t>(s->tokens.size()) - 1, LogitRow::kSample});
      for (int32_t d = 0; d < n_drafts; ++d) {
        logit_rows_.push_back(first + c.n_tokens + d);
        rows_.push_back({s, static_cast<int32_t>(s->tokens.size()) + d, LogitRow::kDraft});
      }
    }
  }
  logits_.resize(logit_rows_.size() * static_cast<size_t>(n_vocab_));
  PlaceImages(plan);
  return Batch{tokens_, seqs_, logit_rows_, embd_, attn_end_, mrope_pos_};
}

void BatchBuilder::PlaceImages(const SchedulerOutput& plan) {
  embd_.clear();
  attn_end_.clear();
  mrope_pos_.clear();
  bool any = false;
  for (const ScheduledChunk& c : plan.chunks) any |= !c.seq->image_spans.empty();
  if (!any) return;
  embd_.assign(tokens_.size(), nullptr);
  attn_end_.resize(tokens_.size());
  if (mrope_) mrope_pos_.resize(3 * tokens_.size());
  for (size_t q = 0; q < seqs_.size(); ++q) {
    const BatchSeq& b = seqs_[q];
    for (int32_t i = 0; i < b.n_tokens; ++i) attn_end_[b.first + i] = b.n_past + i + 1;  // causal
    const Sequence* s = plan.chunks[q].seq;
    if (mrope_) MropePositions(s->image_spans, b.n_past, b.n_tokens, mrope_pos_.data() + 3 * b.first);
    const RequestState& r = *Gen(*s).req;
    for (size_t k = 0; k < s->image_spans.size(); ++k) {
      const ImageSpan& im = s->image_spans[k];
      const int32_t p0 = std::max(im.first, b.n_past), p1 = std::min(im.first + im.n, b.n_past + b.n_tokens);
      for (int32_t p = p0; p < p1; ++p) {
        const int32_t t = b.first + (p - b.n_past);
        embd_[t] = r.image_rows[k]->data() + static_cast<size_t>(p - im.first) * n_embd_;
        if (image_both_ways_) attn_end_[t] = im.first + im.n;
      }
    }
  }
}

}  // namespace llm
