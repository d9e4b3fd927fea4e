// n_gpu_layers = LLM_GPU_LAYERS_AUTO's search (llama.cpp's -ngl auto /
// --fit): the most layers that fit the devices, as a layer placement
// (layer_placement.h), and for a model with experts on one device the
// fewest layers whose experts go to host memory. Pure arithmetic over a cost
// function, so it is tested without a device; engine/auto_fit.cpp gives it
// the CUDA backend's own footprint (backend.h, EstimateCudaFootprint) and
// each device's budget.
//
//   for k = n_layer .. 1:                       the most layers first
//     for each split of layers [0, k) over the devices:
//       (a) in proportion to tensor_split, or to the devices' budgets
//       (b) without tensor_split: each device filled in turn, as many
//           layers as it holds (the budgets' split can lose a layer to the
//           first device's embedding or the last one's classifier)
//       (c) with experts in host memory (the caller's n_cpu_moe, or the
//           search's own on several devices): all k on one device, each in
//           turn (host experts live in one stage; the caller's n_cpu_moe
//           allows only these)
//       every stage within its device's budget with all experts on the
//       device -> this plan; else, on one device with host experts allowed:
//       the smallest m in [1, k] with the experts of layers [0, m) in host
//       memory that fits -> this plan
//   none: nothing fits (the CPU backend runs the model)
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/layer_placement.h"
#include "util/status.h"

namespace llm {

struct FitDevice {
  int32_t device = 0;  // CUDA ordinal
  int64_t budget = 0;  // bytes a context may allocate there (may be <= 0: none)
};

struct FitProblem {
  int32_t n_layer = 0;
  std::vector<FitDevice> devices;  // in split order
  std::vector<float> proportions;  // tensor_split shares, one per device; empty: by budget
  // The model has experts and the caller left n_cpu_moe to the search (it
  // is 0): on one device, the experts of the first layers may go to host
  // memory. Otherwise fixed_n_cpu_moe is every plan's n_cpu_moe.
  bool host_experts_allowed = false;
  int32_t fixed_n_cpu_moe = 0;
};

// Device bytes of a stage running layers [first, end) with the experts of
// its first n_cpu_moe layers (-1: all) in host memory; end < n_layer means
// the CPU runs the rest.
using FitStageCost = std::function<StatusOr<int64_t>(int32_t first, int32_t end, int32_t n_cpu_moe)>;

struct FitPlan {
  LayerPlacement placement;   // empty: not one layer fits
  int32_t n_cpu_moe = 0;      // the experts of the first n_cpu_moe layers in host memory
  std::vector<int64_t> need;  // (placement.shares) bytes each stage needs on its device
  std::vector<int64_t> budget;  // (placement.shares) ... and its device's budget
};

// The plan, or the cost function's error. INVALID_ARGUMENT on a malformed
// problem (no device, proportions of another length).
StatusOr<FitPlan> PlanFit(const FitProblem& problem, const FitStageCost& cost);

}  // namespace llm
