// BatchBuilder: lays out one step's plan as the backend's Batch (the
// counterpart of nano-vllm's ModelRunner.prepare_*), and remembers what each
// logits row it asks for is for.
//
// A speculating sequence runs its pending token and its drafts; their k+1
// rows follow each other, the first one the sample row:
//
//   chunks:  A: prompt chunk p3..p6 (last)   B: pending g4 + drafts d1 d2
//   tokens:  [ p3 p4 p5 p6 | g4 d1 d2 ]
//   rows:    [ 3 (A kSample) | 4 (B kSample) 5 (B kDraft) 6 (B kDraft) ]
//
// A request that wants prompt logprobs adds a kPromptLogprob row for every
// position of its chunk that predicts a prompt token not yet scored.
//
// A step with image tokens (RequestState::image_rows) also points each of
// them at its soft-token row and lets it see its whole span (Batch::embd,
// Batch::attn_end); a step without any leaves both empty.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "sched/scheduler.h"

namespace llm {

struct LogitRow {
  enum Use : uint8_t {
    kPromptLogprob,  // scores prompt token pos + 1
    kSample,         // predicts the next new token (a speculating sequence's draft rows follow it)
    kDraft,          // the row after a draft: read with its sample row
  };
  Sequence* seq;
  int32_t pos;  // position whose logits this row holds
  Use use;
};

class BatchBuilder {
 public:
  BatchBuilder(int32_t n_vocab, int32_t n_embd) : n_vocab_(n_vocab), n_embd_(n_embd) {}

  // Lays out the plan's chunks (each with its drafts) and sizes the logits
  // buffer. The Batch views this builder's buffers: valid until the next Build.
  Batch Build(const SchedulerOutput& plan);

  // Whether an image's positions see each other both ways (Gemma 3; set
  // when a projector is attached) or causally, as text does (the default).
  void set_image_both_ways(bool both) { image_both_ways_ = both; }
  // Whether the model turns positions by M-RoPE sections (qwen2vl): a step
  // with image spans then carries every row's (t, h, w)
  // (core/mrope_positions.h) in Batch::mrope_pos.
  void set_mrope(bool mrope) { mrope_ = mrope; }

  std::span<const LogitRow> rows() const { return rows_; }
  float* logits() { return logits_.data(); }            // (rows, n_vocab)
  const float* row(size_t i) const { return logits_.data() + i * static_cast<size_t>(n_vocab_); }

 private:
  // Image positions of the chunks: embd_ and attn_end_ (n_tokens).
  void PlaceImages(const SchedulerOutput& plan);

  int32_t n_vocab_;
  int32_t n_embd_;
  bool image_both_ways_ = false;
  bool mrope_ = false;
  std::vector<int32_t> tokens_;      // (n_tokens)
  std::vector<const float*> embd_;   // (n_tokens) or empty: image rows
  std::vector<int32_t> attn_end_;    // (n_tokens) or empty
  std::vector<int32_t> mrope_pos_;   // (n_tokens, 3) or empty
  std::vector<BatchSeq> seqs_;       // (n_seqs)
  std::vector<int32_t> logit_rows_;  // (n_logits) token index of each row
  std::vector<LogitRow> rows_;       // (n_logits) what each row is for
  std::vector<float> logits_;        // (n_logits, n_vocab)
};

}  // namespace llm
