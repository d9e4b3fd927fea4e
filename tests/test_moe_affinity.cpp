// ExpertAffinity (backend/moe_affinity.h): the inter-layer predictor behind
// the expert prefetch, on routing traces made here, no model needed.
#include "backend/moe_affinity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "support/moe_trace.h"

namespace llm {
namespace {

TEST(MoeAffinity, ColdPredictorFallsBackToFrequencyThenOrder) {
  ExpertAffinity a(2, 8);
  const std::vector<int32_t> picks = {3, 5};
  EXPECT_EQ(a.Predict(0, picks, 2, 3), (std::vector<int32_t>{0, 1, 2}));
  a.ObserveLayer(1, std::vector<int32_t>{6, 6, 7});
  EXPECT_EQ(a.Predict(0, picks, 2, 2), (std::vector<int32_t>{6, 7}));
  EXPECT_TRUE(a.Predict(1, picks, 2, 2).empty());  // no layer after the last
  EXPECT_TRUE(a.Predict(-1, picks, 2, 2).empty());
}

TEST(MoeAffinity, LearnsAPlantedChain) {
  ExpertAffinity a(2, 8);
  // expert e in layer 0 is always followed by 7 - e in layer 1
  for (int i = 0; i < 50; ++i)
    for (int32_t e = 0; e < 8; ++e) {
      const std::vector<int32_t> p0 = {e}, p1 = {7 - e};
      a.ObserveLayer(0, p0);
      a.ObserveLayer(1, p1);
      a.ObservePair(0, p0, p1, 1);
    }
  for (int32_t e = 0; e < 8; ++e) EXPECT_EQ(a.Predict(0, std::vector<int32_t>{e}, 1, 1)[0], 7 - e);
}

TEST(MoeAffinity, IgnoresOutOfRangeIdsAndMismatchedSpans) {
  ExpertAffinity a(3, 4);
  a.ObserveLayer(0, std::vector<int32_t>{-1, 4, 99});
  a.ObservePair(0, std::vector<int32_t>{0, 1}, std::vector<int32_t>{2}, 1);  // sizes differ: ignored
  a.ObservePair(2, std::vector<int32_t>{0}, std::vector<int32_t>{1}, 1);     // no layer 3
  a.ObservePair(0, std::vector<int32_t>{-5}, std::vector<int32_t>{9}, 1);
  EXPECT_EQ(a.Predict(0, std::vector<int32_t>{-3, 100}, 1, 2), (std::vector<int32_t>{0, 1}));
}

// Online, as the backend uses it: predict layer l+1 from layer l's picks,
// then learn the pair. On a trace with planted affinity (a token follows
// its chain with probability 0.85) the predictor's top-k must find most of
// the wanted experts, far above what the routing frequencies alone find
// (the trace is balanced, so frequency is no better than chance, k / n).
TEST(MoeAffinity, OnlineAccuracyOnAPlantedTraceBeatsFrequency) {
  MoeTraceSpec spec;
  spec.n_layer = 6;
  spec.n_expert = 32;
  spec.k = 4;
  spec.follow = 0.85;
  const std::vector<MoeTraceStep> trace = MakePlantedMoeTrace(spec, 400, 1, 11);
  const MoeTraceAccuracy acc = ReplayMoeTrace(spec, trace);
  std::printf("planted trace: affinity %.3f, frequency %.3f (chance %.3f)\n", acc.affinity, acc.frequency,
              static_cast<double>(spec.k) / spec.n_expert);
  EXPECT_GT(acc.affinity, 0.70);
  EXPECT_LT(acc.frequency, 0.25);
  // No planted affinity: nothing to find, both near chance.
  spec.follow = 0.0;
  const MoeTraceAccuracy flat = ReplayMoeTrace(spec, MakePlantedMoeTrace(spec, 400, 1, 12));
  EXPECT_LT(flat.affinity, 0.25);
}

}  // namespace
}  // namespace llm
