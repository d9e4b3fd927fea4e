#include "backend/fit_plan.h"

#include <algorithm>
#include <string>

namespace llm {
namespace {

// The budget of `device` (an ordinal of pb.devices).
int64_t BudgetOf(const FitProblem& pb, int32_t device) {
  for (const FitDevice& d : pb.devices)
    if (d.device == device) return d.budget;
  return 0;
}

// True, with *out filled, when every stage of `pl` fits its device (the
// first stage keeping the experts of its first n_cpu_moe layers in host
// memory); false otherwise. Errors are the cost function's.
StatusOr<bool> Fits(const FitProblem& pb, const FitStageCost& cost, const LayerPlacement& pl, int32_t n_cpu_moe,
                    FitPlan* out) {
  std::vector<int64_t> need, budget;
  int32_t first = 0;
  for (const DeviceShare& s : pl.shares) {
    LLM_ASSIGN_OR_RETURN(const int64_t b, cost(first, first + s.n_layers, first == 0 ? n_cpu_moe : 0));
    const int64_t have = BudgetOf(pb, s.device);
    if (b > have) return false;
    need.push_back(b);
    budget.push_back(have);
    first += s.n_layers;
  }
  out->placement = pl;
  out->n_cpu_moe = n_cpu_moe;
  out->need = std::move(need);
  out->budget = std::move(budget);
  return true;
}

// Split (b): each device in turn takes the most of the remaining layers of
// [0, k) it holds (a device holding none is left out). Empty when the
// devices together hold fewer than k.
StatusOr<LayerPlacement> FillInTurn(const FitProblem& pb, const FitStageCost& cost, int32_t k) {
  LayerPlacement pl;
  int32_t first = 0;
  for (const FitDevice& d : pb.devices) {
    if (first == k) break;
    int32_t end = first;
    while (end < k) {
      LLM_ASSIGN_OR_RETURN(const int64_t b, cost(first, end + 1, first == 0 ? pb.fixed_n_cpu_moe : 0));
      if (b > d.budget) break;
      ++end;
    }
    if (end > first) pl.shares.push_back(DeviceShare{d.device, end - first});
    first = end;
  }
  if (first < k) pl.shares.clear();
  return pl;
}

}  // namespace

StatusOr<FitPlan> PlanFit(const FitProblem& pb, const FitStageCost& cost) {
  if (pb.devices.empty()) return InvalidArgument("fit: no device");
  if (!pb.proportions.empty() && pb.proportions.size() != pb.devices.size())
    return InvalidArgument("fit: " + std::to_string(pb.proportions.size()) + " proportions for " +
                           std::to_string(pb.devices.size()) + " devices");
  std::vector<int32_t> ids;
  std::vector<float> shares;
  bool any_share = false;
  for (size_t i = 0; i < pb.devices.size(); ++i) {
    ids.push_back(pb.devices[i].device);
    const float f = pb.proportions.empty() ? static_cast<float>(std::max<int64_t>(pb.devices[i].budget, 0))
                                           : pb.proportions[i];
    shares.push_back(f);
    any_share = any_share || f > 0.0f;
  }
  FitPlan plan;
  if (!any_share) return plan;  // no device has room for anything
  // Host experts live in one stage (split_backend.h): a caller's n_cpu_moe
  // allows only one device; the search's own may pick one device too.
  const bool one_device_only = pb.fixed_n_cpu_moe != 0;
  const bool one_device_too = pb.host_experts_allowed && pb.devices.size() > 1;
  for (int32_t k = pb.n_layer; k >= 1; --k) {
    std::vector<LayerPlacement> splits;
    if (!one_device_only) {
      LLM_ASSIGN_OR_RETURN(LayerPlacement by_share, SplitLayers(k, ids, shares));
      splits.push_back(std::move(by_share));
      if (pb.proportions.empty() && pb.devices.size() > 1) {
        LLM_ASSIGN_OR_RETURN(LayerPlacement filled, FillInTurn(pb, cost, k));
        if (!filled.shares.empty()) splits.push_back(std::move(filled));
      }
    }
    if (one_device_only || one_device_too) {
      for (size_t i = 0; i < pb.devices.size(); ++i) {
        if (!(shares[i] > 0.0f) && !pb.proportions.empty()) continue;  // tensor_split gives it nothing
        LayerPlacement alone;
        alone.shares.push_back(DeviceShare{pb.devices[i].device, k});
        splits.push_back(std::move(alone));
      }
    }
    for (const LayerPlacement& pl : splits) {
      LLM_ASSIGN_OR_RETURN(bool ok, Fits(pb, cost, pl, pb.fixed_n_cpu_moe, &plan));
      if (ok) return plan;
      if (!pb.host_experts_allowed || pl.shares.size() != 1) continue;
      LLM_ASSIGN_OR_RETURN(ok, Fits(pb, cost, pl, k, &plan));
      if (!ok) continue;
      // The fewest host layers: a stage's bytes fall as m grows (each host
      // layer's experts leave the device; the cache is there from m = 1).
      for (int32_t m = 1; m < k; ++m) {
        LLM_ASSIGN_OR_RETURN(ok, Fits(pb, cost, pl, m, &plan));
        if (ok) return plan;
      }
      LLM_ASSIGN_OR_RETURN(ok, Fits(pb, cost, pl, k, &plan));
      return plan;
    }
  }
  return FitPlan{};
}

}  // namespace llm
