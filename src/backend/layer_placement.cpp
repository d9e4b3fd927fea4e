#include "backend/layer_placement.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace llm {

StatusOr<LayerPlacement> SplitLayers(int32_t n_gpu_layers, std::span<const int32_t> devices,
                                     std::span<const float> proportions) {
  if (n_gpu_layers <= 0) return InvalidArgument("layer split: no layer to place");
  if (devices.empty() || devices.size() != proportions.size())
    return InvalidArgument("layer split: " + std::to_string(devices.size()) + " devices but " +
                           std::to_string(proportions.size()) + " proportions");
  double total = 0;
  for (float f : proportions) {
    if (!(f >= 0.0f) || !std::isfinite(f)) return InvalidArgument("layer split: proportions must be finite and >= 0");
    total += f;
  }
  if (!(total > 0)) return InvalidArgument("layer split: every proportion is 0");
  // Run i ends where the cumulative share crosses it: round(n * cum_i), so
  // rounding never loses or adds a layer and the last run ends at n.
  LayerPlacement p;
  double cum = 0;
  int32_t start = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    cum += proportions[i];
    const int32_t end =
        i + 1 == devices.size() ? n_gpu_layers : static_cast<int32_t>(std::lround(n_gpu_layers * (cum / total)));
    if (end > start) p.shares.push_back(DeviceShare{devices[i], end - start});
    start = std::max(start, end);
  }
  return p;
}

}  // namespace llm
