// Which layers run on which device: llama.cpp's default layer split. The
// first n_gpu_layers layers are cut into consecutive runs, one per device in
// the order given, each run's length in proportion to the device's share
// (tensor_split, or each device's free memory); the remaining layers run on
// the CPU backend (split_backend.h).
//
//   layers  0 ........ a-1 | a ........ b-1 | b ......... n_layer-1
//           device d0       | device d1       | CPU (n_gpu_layers = b)
//
// A run is a pipeline stage: each device holds its layers' weights and KV.
// Tensor parallelism would split within a stage (each layer's heads and FFN
// columns over a group of devices, docs/ARCHITECTURE.md) and leave this
// placement as the outer level.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/status.h"

namespace llm {

struct DeviceShare {
  int32_t device = 0;    // CUDA ordinal
  int32_t n_layers = 0;  // consecutive layers, after the previous share's
};

struct LayerPlacement {
  std::vector<DeviceShare> shares;  // in layer order; none empty
  int32_t gpu_layers() const {
    int32_t n = 0;
    for (const DeviceShare& s : shares) n += s.n_layers;
    return n;
  }
};

// The first n_gpu_layers layers over devices[i] in proportion to
// proportions[i] (same length; >= 0, finite, not all 0). A device whose
// share rounds to no layer is left out. INVALID_ARGUMENT on bad input.
StatusOr<LayerPlacement> SplitLayers(int32_t n_gpu_layers, std::span<const int32_t> devices,
                                     std::span<const float> proportions);

}  // namespace llm
