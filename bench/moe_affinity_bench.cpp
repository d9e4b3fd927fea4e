// The expert prefetch's predictor and what the device expert cache and the
// prefetch save, on routing traces (no GPU, no model: a routing trace from a
// real MoE model's router is not available here, so the traces are planted,
// tests/support/moe_trace.h; the synthesized models' own traces are measured
// online by the backend, test_cuda_families' HostExperts cases).
//
//   moe-affinity-bench [steps]
//
// For each trace shape and planted affinity: the predictor's online accuracy
// (share of the experts a layer wanted that the prediction from the layer
// before named) against routing frequency alone; then a decode replay (one
// token per step) through an LRU cache of C experts over every host layer,
// without and with the prefetch (as cuda_moe_host.cpp: predict as many as
// the layer used, within the slots it does not read), counting experts
// copied per token; and the PCIe model: bytes per token at the expert size
// of the shape's Q4_K_M file, and the copy time per token at a given
// host-to-device bandwidth.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/moe_affinity.h"
#include "support/moe_trace.h"

namespace {

using llm::ExpertAffinity;
using llm::MoeTraceSpec;
using llm::MoeTraceStep;

// LRU over keys layer * n_expert + e, as ExpertCache (cuda/moe_host.h).
struct Lru {
  std::vector<int32_t> key;       // per slot, -1 free
  std::vector<uint64_t> used;
  uint64_t tick = 0;
  explicit Lru(int32_t n) : key(static_cast<size_t>(n), -1), used(static_cast<size_t>(n), 0) {}
  int32_t Find(int32_t k) {
    for (size_t s = 0; s < key.size(); ++s)
      if (key[s] == k) {
        used[s] = ++tick;
        return static_cast<int32_t>(s);
      }
    return -1;
  }
  int32_t Insert(int32_t k, const std::vector<int32_t>& keep) {
    int32_t v = -1;
    for (size_t s = 0; s < key.size(); ++s) {
      if (std::find(keep.begin(), keep.end(), static_cast<int32_t>(s)) != keep.end()) continue;
      if (v < 0 || key[s] < 0 || (key[v] >= 0 && used[s] < used[v])) v = static_cast<int32_t>(s);
      if (key[s] < 0) break;
    }
    if (v >= 0) {
      key[v] = k;
      used[v] = ++tick;
    }
    return v;
  }
};

struct Replay {
  double copied_per_token = 0, prefetched_per_token = 0, demand_per_token = 0;
};

// Decode, one token per step: every layer of the trace is a host layer.
Replay RunCache(const MoeTraceSpec& s, const std::vector<MoeTraceStep>& trace, int32_t slots, bool prefetch) {
  Lru cache(slots);
  ExpertAffinity aff(s.n_layer, s.n_expert);
  int64_t demand = 0, pre = 0;
  for (const MoeTraceStep& st : trace) {
    for (int32_t l = 0; l < s.n_layer; ++l) {
      const std::vector<int32_t> want = llm::DistinctExperts(st.picks[l]);
      std::vector<int32_t> keep, miss;
      for (int32_t e : want) {
        const int32_t sl = cache.Find(l * s.n_expert + e);
        if (sl >= 0) {
          keep.push_back(sl);
        } else {
          miss.push_back(e);
        }
      }
      for (int32_t e : miss) {
        const int32_t sl = cache.Insert(l * s.n_expert + e, keep);
        if (sl >= 0) keep.push_back(sl);
        ++demand;
      }
      aff.ObserveLayer(l, st.picks[l]);
      if (l > 0) aff.ObservePair(l - 1, st.picks[l - 1], st.picks[l], s.k);
      if (prefetch && l + 1 < s.n_layer) {
        const int32_t room = slots - static_cast<int32_t>(keep.size());
        const std::vector<int32_t> p =
            aff.Predict(l, st.picks[l], s.k, std::min<int32_t>(static_cast<int32_t>(want.size()), std::max(room, 0)));
        std::vector<int32_t> kept = keep;
        for (int32_t e : p) {
          const int32_t k = (l + 1) * s.n_expert + e;
          if (cache.Find(k) >= 0) continue;
          const int32_t sl = cache.Insert(k, kept);
          if (sl < 0) break;
          kept.push_back(sl);
          ++pre;
        }
      }
    }
  }
  Replay r;
  const double n = static_cast<double>(trace.size());
  r.demand_per_token = demand / n;
  r.prefetched_per_token = pre / n;
  r.copied_per_token = (demand + pre) / n;
  return r;
}

struct Shape {
  const char* name;
  int32_t n_layer, n_expert, k;
  double expert_mb;  // gate + up + down of one expert in the Q4_K_M file (MB)
};

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(10, std::atoi(argv[1])) : 300;
  // 30B-A3B: n_embd 2048, n_ff_exp 768; gate/up Q4_K (4.5 bits), down Q6_K (6.5625 bits).
  const double a3b_mb = (2.0 * 768 * 2048 * 4.5 / 8 + 768.0 * 2048 * 6.5625 / 8) / 1e6;
  // Mixtral-8x7B: n_embd 4096, n_ff 14336.
  const double mixtral_mb = (2.0 * 14336 * 4096 * 4.5 / 8 + 14336.0 * 4096 * 6.5625 / 8) / 1e6;
  const Shape shapes[] = {{"qwen3moe-30B-A3B shape (48 layers, 128 experts, top 8)", 48, 128, 8, a3b_mb},
                          {"mixtral-8x7B shape (32 layers, 8 experts, top 2)", 32, 8, 2, mixtral_mb}};
  const double pcie_gbs[] = {25.0};  // PCIe 4.0 x16, practical host-to-device (assumed: no GPU measured it here)
  std::printf("# moe-affinity-bench, %d decode steps per trace\n\n", steps);
  for (const Shape& sh : shapes) {
    std::printf("## %s, %.2f MB per expert (Q4_K_M)\n\n", sh.name, sh.expert_mb);
    std::printf("| planted follow | affinity acc | frequency acc | chance | cache slots | copied/token, no prefetch | "
                "prefetch: on demand/token | prefetch: copied/token | MB/token no prefetch | MB/token on demand, "
                "prefetch | ms/token on the critical path at %.0f GB/s: no prefetch / prefetch |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n",
                pcie_gbs[0]);
    for (const double follow : {0.0, 0.5, 0.8, 0.95}) {
      MoeTraceSpec s;
      s.n_layer = sh.n_layer;
      s.n_expert = sh.n_expert;
      s.k = sh.k;
      s.follow = follow;
      const std::vector<MoeTraceStep> trace = llm::MakePlantedMoeTrace(s, steps, 1, 1234);
      const llm::MoeTraceAccuracy acc = llm::ReplayMoeTrace(s, trace);
      // The cache: one layer's experts, and a quarter of all host experts.
      for (const int32_t slots : {sh.n_expert, std::max(sh.n_expert, sh.n_layer * sh.n_expert / 4)}) {
        const Replay a = RunCache(s, trace, slots, false), b = RunCache(s, trace, slots, true);
        const double mb_a = a.copied_per_token * sh.expert_mb, mb_b = b.copied_per_token * sh.expert_mb;
        const double mb_b_demand = b.demand_per_token * sh.expert_mb;
        std::printf("| %.2f | %.3f | %.3f | %.3f | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f / %.2f |\n", follow,
                    acc.affinity, acc.frequency, static_cast<double>(s.k) / s.n_expert, slots, a.copied_per_token,
                    b.demand_per_token, b.copied_per_token, mb_a, mb_b_demand, mb_a / pcie_gbs[0],
                    mb_b_demand / pcie_gbs[0]);
        (void)mb_b;
      }
    }
    std::printf("\n");
  }
  return 0;
}
