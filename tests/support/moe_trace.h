// Routing traces with planted inter-layer affinity, and their online replay
// through ExpertAffinity (backend/moe_affinity.h): tests/test_moe_affinity
// and bench/moe_affinity_bench share them. Header-only.
//
// Planted: each layer l has a fixed random permutation chain_l of the
// experts; a token's k picks in layer 0 are drawn uniformly (distinct), and
// each of its picks e in layer l is followed in layer l+1 by chain_l(e) with
// probability `follow`, else by a uniform expert (distinct within the token).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backend/moe_affinity.h"

namespace llm {

struct MoeTraceSpec {
  int32_t n_layer = 4, n_expert = 8, k = 2;
  double follow = 0.8;
};

// One step: picks[l] is (n_tok, k) row by row.
struct MoeTraceStep {
  std::vector<std::vector<int32_t>> picks;
};

inline std::vector<MoeTraceStep> MakePlantedMoeTrace(const MoeTraceSpec& s, int n_steps, int n_tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> chain(static_cast<size_t>(s.n_layer));
  for (auto& c : chain) {
    c.resize(static_cast<size_t>(s.n_expert));
    std::iota(c.begin(), c.end(), 0);
    std::shuffle(c.begin(), c.end(), rng);
  }
  std::uniform_int_distribution<int32_t> any(0, s.n_expert - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<MoeTraceStep> out(static_cast<size_t>(n_steps));
  for (MoeTraceStep& st : out) {
    st.picks.assign(static_cast<size_t>(s.n_layer), {});
    for (int t = 0; t < n_tok; ++t) {
      std::vector<int32_t> prev;
      for (int32_t l = 0; l < s.n_layer; ++l) {
        std::vector<int32_t> cur;
        for (int32_t j = 0; j < s.k; ++j) {
          int32_t e = l > 0 && u(rng) < s.follow ? chain[l - 1][prev[j]] : any(rng);
          while (std::find(cur.begin(), cur.end(), e) != cur.end()) e = any(rng);
          cur.push_back(e);
        }
        st.picks[l].insert(st.picks[l].end(), cur.begin(), cur.end());
        prev = cur;
      }
    }
  }
  return out;
}

// Share of the experts each layer l+1 wanted (distinct per step) that the
// prediction made from layer l's picks named, predicting as many experts as
// layer l used; `frequency` is the same from routing frequencies alone.
struct MoeTraceAccuracy {
  double affinity = 0, frequency = 0;
};

inline std::vector<int32_t> DistinctExperts(const std::vector<int32_t>& picks) {
  std::vector<int32_t> d = picks;
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

inline MoeTraceAccuracy ReplayMoeTrace(const MoeTraceSpec& s, const std::vector<MoeTraceStep>& trace) {
  ExpertAffinity aff(s.n_layer, s.n_expert), freq(s.n_layer, s.n_expert);
  int64_t wanted = 0, right_aff = 0, right_freq = 0;
  for (const MoeTraceStep& st : trace) {
    for (int32_t l = 0; l < s.n_layer; ++l) {
      if (l > 0) {
        const std::vector<int32_t> want = DistinctExperts(st.picks[l]);
        const int32_t n = static_cast<int32_t>(DistinctExperts(st.picks[l - 1]).size());
        const std::vector<int32_t> pa = aff.Predict(l - 1, st.picks[l - 1], s.k, n);
        const std::vector<int32_t> pf = freq.Predict(l - 1, st.picks[l - 1], s.k, n);
        for (int32_t e : want) {
          ++wanted;
          right_aff += std::find(pa.begin(), pa.end(), e) != pa.end();
          right_freq += std::find(pf.begin(), pf.end(), e) != pf.end();
        }
        aff.ObservePair(l - 1, st.picks[l - 1], st.picks[l], s.k);
      }
      aff.ObserveLayer(l, st.picks[l]);
      freq.ObserveLayer(l, st.picks[l]);
    }
  }
  MoeTraceAccuracy a;
  if (wanted > 0) {
    a.affinity = static_cast<double>(right_aff) / static_cast<double>(wanted);
    a.frequency = static_cast<double>(right_freq) / static_cast<double>(wanted);
  }
  return a;
}

}  // namespace llm
