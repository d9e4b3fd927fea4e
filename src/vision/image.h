// A decoded picture as the vision path takes it: 8-bit RGB, row after row,
// three bytes per pixel (R, G, B), no padding between rows.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

struct RgbImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3)

  bool empty() const { return width <= 0 || height <= 0; }
};

// The largest side an RgbImage may have anywhere in the vision path (source
// pictures and resize targets): beyond it a request is refused before any
// memory is taken for it.
inline constexpr int32_t kMaxImageSide = 16384;

}  // namespace llm
