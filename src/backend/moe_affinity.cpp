#include "backend/moe_affinity.h"

#include <algorithm>
#include <numeric>

namespace llm {

ExpertAffinity::ExpertAffinity(int32_t n_layer, int32_t n_expert)
    : n_layer_(std::max(n_layer, 0)), n_expert_(std::max(n_expert, 0)) {
  const size_t E = static_cast<size_t>(n_expert_);
  count_.assign(static_cast<size_t>(std::max(n_layer_ - 1, 0)) * E * E, 0);
  freq_.assign(static_cast<size_t>(n_layer_) * E, 0);
}

void ExpertAffinity::ObserveLayer(int32_t l, std::span<const int32_t> picks) {
  if (l < 0 || l >= n_layer_) return;
  uint32_t* f = freq_.data() + static_cast<size_t>(l) * n_expert_;
  for (int32_t e : picks)
    if (e >= 0 && e < n_expert_) ++f[e];
}

void ExpertAffinity::ObservePair(int32_t l, std::span<const int32_t> picks_l, std::span<const int32_t> picks_next,
                                 int32_t k) {
  if (l < 0 || l + 1 >= n_layer_ || k <= 0 || picks_l.size() != picks_next.size()) return;
  const size_t E = static_cast<size_t>(n_expert_);
  uint32_t* c = count_.data() + static_cast<size_t>(l) * E * E;
  const size_t n_tok = picks_l.size() / static_cast<size_t>(k);
  for (size_t t = 0; t < n_tok; ++t)
    for (int32_t i = 0; i < k; ++i) {
      const int32_t a = picks_l[t * k + i];
      if (a < 0 || a >= n_expert_) continue;
      for (int32_t j = 0; j < k; ++j) {
        const int32_t b = picks_next[t * k + j];
        if (b >= 0 && b < n_expert_) ++c[static_cast<size_t>(a) * E + b];
      }
    }
}

std::vector<int32_t> ExpertAffinity::Predict(int32_t l, std::span<const int32_t> picks_l, int32_t k,
                                             int32_t n) const {
  std::vector<int32_t> out;
  if (l < 0 || l + 1 >= n_layer_ || n <= 0 || k <= 0) return out;
  const size_t E = static_cast<size_t>(n_expert_);
  std::vector<double> score(E, 0.0);
  const uint32_t* c = count_.data() + static_cast<size_t>(l) * E * E;
  const uint32_t* f = freq_.data() + static_cast<size_t>(l) * E;
  for (int32_t a : picks_l) {
    if (a < 0 || a >= n_expert_ || f[a] == 0) continue;
    const double inv = 1.0 / (static_cast<double>(f[a]) * k);
    for (size_t b = 0; b < E; ++b) score[b] += c[static_cast<size_t>(a) * E + b] * inv;
  }
  const uint32_t* next = freq_.data() + static_cast<size_t>(l + 1) * E;
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    if (score[x] != score[y]) return score[x] > score[y];
    return next[x] > next[y];
  });
  order.resize(std::min<size_t>(E, static_cast<size_t>(n)));
  return order;
}

}  // namespace llm
