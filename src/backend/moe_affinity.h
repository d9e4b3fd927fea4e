// Inter-layer expert affinity, gathered online from routing: which experts
// a token uses in layer l predicts which it uses in layer l+1 (experts of
// trained MoE models form such chains). The CUDA backend's host-resident
// experts use it to prefetch layer l+1's likely experts while layer l runs
// (cuda_moe_host.cpp); bench/moe_affinity_bench measures it on traces.
//
//   count[l][a][b]  tokens that chose a in layer l and b in layer l+1
//   freq[l][b]      tokens that chose b in layer l
//
// Predict(l, picks of the step's tokens in layer l, n) ranks layer l+1's
// experts by Σ_token Σ_{a ∈ token's picks} count[l][a][b] / freq[l][a]
// (each source expert's empirical next-layer distribution, summed over the
// step's picks), ties and unseen sources broken by freq[l+1][b], and returns
// the n best. No state beyond the counts: a cold predictor falls back to
// the most used experts, then to expert order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llm {

class ExpertAffinity {
 public:
  ExpertAffinity() = default;
  ExpertAffinity(int32_t n_layer, int32_t n_expert);

  int32_t n_layer() const { return n_layer_; }
  int32_t n_expert() const { return n_expert_; }

  // One step's picks of layer l, (n_tok, k) expert ids row by row, and of
  // layer l+1 for the same tokens (the pairs count; l+1 < n_layer).
  void ObservePair(int32_t l, std::span<const int32_t> picks_l, std::span<const int32_t> picks_next, int32_t k);
  // Layer l's picks alone (frequencies).
  void ObserveLayer(int32_t l, std::span<const int32_t> picks);
  // The n experts of layer l+1 most likely wanted after layer l's picks
  // (n_tok, k), best first.
  std::vector<int32_t> Predict(int32_t l, std::span<const int32_t> picks_l, int32_t k, int32_t n) const;

 private:
  int32_t n_layer_ = 0, n_expert_ = 0;
  std::vector<uint32_t> count_;  // (n_layer - 1, n_expert, n_expert)
  std::vector<uint32_t> freq_;   // (n_layer, n_expert)
};

}  // namespace llm
