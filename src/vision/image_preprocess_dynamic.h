// From a picture to the pixel tensor of a tower that reads pictures at
// their own size (Qwen2.5-VL), as llama.cpp prepares it:
//
//   1. size: each side rounded to a multiple of `align` (P x the merger's
//      side), at least `align`; a total over max_pixels scales both sides by
//      1 / sqrt(w·h / max_pixels) and rounds them down, one under
//      min_pixels by sqrt(min_pixels / (w·h)) and rounds them up (float
//      arithmetic, as llama.cpp's, so the sizes agree);
//   2. fit: the picture scaled by min(W / w, H / h) to
//      min(ceil(w·s), W) x min(ceil(h·s), H) with Pillow's BICUBIC
//      resampling, centred on a black W x H canvas (unchanged when it
//      already is W x H);
//   3. normalise and lay out planar: (3, H, W), (v / 255 - mean) / std.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"
#include "vision/image.h"
#include "vision/image_preprocess.h"

namespace llm {

struct DynamicSizeRule {
  int32_t align = 0;       // > 0
  int64_t min_pixels = 0;  // 0: no floor
  int64_t max_pixels = 0;  // 0: no ceiling
};

struct ImageSize {
  int32_t width = 0, height = 0;
};

// Step 1 alone. INVALID_ARGUMENT for sides outside [1, kMaxImageSide], a
// rule with align < 1, or a result outside [align, kMaxImageSide].
StatusOr<ImageSize> DynamicTargetSize(int32_t width, int32_t height, const DynamicSizeRule& rule);

// Steps 1-2: the W x H picture the tower reads (for tests and callers that
// keep the bytes).
StatusOr<RgbImage> FitToDynamicSize(const RgbImage& src, const DynamicSizeRule& rule);

// Steps 1-3: out gets 3 * W * H floats, *size the W x H chosen.
Status PreprocessDynamicSize(const RgbImage& src, const DynamicSizeRule& rule, const ImageNorm& norm,
                             std::vector<float>* out, ImageSize* size);

}  // namespace llm
