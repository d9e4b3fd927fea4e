#include "spec/draft_model_proposer.h"

#include <algorithm>

namespace llm {

namespace {
int32_t ArgmaxRow(const float* row, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;  // ties keep the lowest id, like the sampler
  return best;
}
}  // namespace

DraftModelProposer::DraftModelProposer(std::unique_ptr<Backend> backend, int32_t n_vocab,
                                       std::unique_ptr<Model> owned_model)
    : owned_model_(std::move(owned_model)), backend_(std::move(backend)), n_vocab_(n_vocab) {}

DraftModelProposer::~DraftModelProposer() { backend_.reset(); }

Status DraftModelProposer::Propose(std::span<Sequence* const> seqs) {
  active_.clear();
  for (Sequence* s : seqs) {
    s->drafts.clear();
    if (s->spec_k > 0) active_.push_back(s);
  }
  for (int32_t step = 0; !active_.empty(); ++step) {
    tokens_.clear();
    seqs_.clear();
    rows_.clear();
    for (Sequence* s : active_) {
      const int32_t first = static_cast<int32_t>(tokens_.size());
      const int32_t size = static_cast<int32_t>(s->tokens.size());
      if (step == 0) {
        // Catch up: everything the draft has not seen, ending with the pending token.
        s->draft_computed = std::clamp(s->draft_computed, 0, size - 1);
        tokens_.insert(tokens_.end(), s->tokens.begin() + s->draft_computed, s->tokens.end());
      } else {
        tokens_.push_back(s->drafts.back());
      }
      const int32_t n = static_cast<int32_t>(tokens_.size()) - first;
      seqs_.push_back(BatchSeq{first, n, s->draft_computed, s->block_table});
      rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
    }
    logits_.resize(rows_.size() * static_cast<size_t>(n_vocab_));
    Status st = backend_->Forward(Batch{tokens_, seqs_, rows_}, logits_.data());
    if (!st.ok()) {
      for (Sequence* s : active_) {
        s->drafts.clear();
        s->draft_computed = 0;
      }
      return st;
    }
    size_t kept = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      Sequence* s = active_[i];
      s->draft_computed += seqs_[i].n_tokens;
      s->drafts.push_back(ArgmaxRow(logits_.data() + i * n_vocab_, n_vocab_));
      if (static_cast<int32_t>(s->drafts.size()) < s->spec_k) active_[kept++] = s;
    }
    active_.resize(kept);
  }
  return Status::Ok();
}

StatusOr<LayerPrefixView> MakeLayerPrefixView(const ModelConfig& config, const ModelWeights& weights,
                                              int32_t n_layers) {
  if (n_layers < 1 || n_layers > config.n_layer) {
    return InvalidArgument("self_draft_layers must be in [1, " + std::to_string(config.n_layer) + "] (got " +
                           std::to_string(n_layers) + ")");
  }
  LayerPrefixView v{config, weights};
  v.config.n_layer = n_layers;
  v.weights.layers.resize(static_cast<size_t>(n_layers));
  return v;
}

Status CheckSameVocabulary(const Model& target, const Model& draft) {
  const Tokenizer& a = *target.tokenizer;
  const Tokenizer& b = *draft.tokenizer;
  if (target.config.n_vocab != draft.config.n_vocab || a.n_vocab() != b.n_vocab()) {
    return InvalidArgument("the draft model's vocabulary (" + std::to_string(draft.config.n_vocab) +
                           " tokens) differs from the target's (" + std::to_string(target.config.n_vocab) + ")");
  }
  if (a.bos() != b.bos() || a.eos() != b.eos()) {
    return InvalidArgument("the draft model's BOS/EOS tokens differ from the target's");
  }
  std::string pa, pb;
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    pa.clear();
    pb.clear();
    a.AppendPiece(id, /*render_special=*/true, &pa);
    b.AppendPiece(id, /*render_special=*/true, &pb);
    if (pa != pb) {
      return InvalidArgument("the draft model's token " + std::to_string(id) + " differs from the target's");
    }
  }
  return Status::Ok();
}

}  // namespace llm
