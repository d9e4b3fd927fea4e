// Draft-model proposer: a smaller model with the target's vocabulary (a
// second GGUF, or the target's own first L layers: self-drafting) runs K
// greedy steps per speculation round, batched over the speculating sequences.
//
// Its KV pool is addressed by the target's block ids (same KvCacheSpec), so
// the target's block tables serve it unchanged. seq->draft_computed counts
// the tokens whose draft K/V are valid; a round first catches up
// tokens[draft_computed .. size) in one chunk (the prompt, the tokens the
// last round accepted, the pending token), then feeds its own drafts:
//
//   round:  chunk tokens[dc .. size) -> d1 ; feed d1 -> d2 ; ... ; feed d(k-1) -> dk
//   draft KV written: positions dc .. size-1+k-1, all inside the slots the
//   scheduler reserved (n_computed + 1 + k); the verifier rolls
//   draft_computed back to the accepted length.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "spec/proposer.h"

namespace llm {

class DraftModelProposer final : public Proposer {
 public:
  // `backend` runs the draft; `owned_model` (may be null) keeps a separately
  // loaded draft model's weights alive for the backend's lifetime.
  DraftModelProposer(std::unique_ptr<Backend> backend, int32_t n_vocab, std::unique_ptr<Model> owned_model);
  ~DraftModelProposer() override;

  Status Propose(std::span<Sequence* const> seqs) override;
  // Copy-on-write copies the target made: the draft's cache follows.
  Status CopyKvBlock(int32_t src, int32_t dst) override { return backend_->CopyKvBlock(src, dst); }

 private:
  std::unique_ptr<Model> owned_model_;  // declared first: destroyed after the backend
  std::unique_ptr<Backend> backend_;
  int32_t n_vocab_;
  // Reusable round buffers.
  std::vector<int32_t> tokens_;   // (n_tokens)
  std::vector<BatchSeq> seqs_;    // (n_active)
  std::vector<int32_t> rows_;     // (n_active)
  std::vector<Sequence*> active_; // (n_active)
  std::vector<float> logits_;     // (n_active, n_vocab)
};

// Self-drafting: a view of `config`/`weights` with only the first
// `n_layers` layers (plus the final norm and output head); no weight copies.
struct LayerPrefixView {
  ModelConfig config;
  ModelWeights weights;
};
StatusOr<LayerPrefixView> MakeLayerPrefixView(const ModelConfig& config, const ModelWeights& weights,
                                              int32_t n_layers);

// OK when `draft` tokenizes exactly like `target` (same vocabulary size, same
// token texts, same BOS/EOS); INVALID_ARGUMENT naming the first difference.
Status CheckSameVocabulary(const Model& target, const Model& draft);

}  // namespace llm
