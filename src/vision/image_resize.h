// Resampling an RgbImage to another size as Pillow's Image.resize does with
// BILINEAR for 8-bit images (the resize llama.cpp's image preprocessing
// reproduces, so embeddings of a resized picture agree with it bit for bit
// before the first float):
//
//   separable: the width first (every source row), then the height;
//   output pixel i of a pass covers source coordinates centred at
//     c = (i + 0.5) * scale,  scale = in / out,
//   a triangle filter widened by max(scale, 1) when shrinking, its weights
//   normalised to sum 1 and rounded to 22-bit fixed point; each pass rounds
//   its sums to 8 bits (half up) and clamps to [0, 255].
//
// A side that keeps its size skips its pass. ResizeBicubic is the same with
// Pillow's BICUBIC kernel (a = -0.5, radius 2 widened; negative weights
// rounded half away from zero), which Qwen2.5-VL's preprocessing uses.
#pragma once

#include <cstdint>

#include "util/status.h"
#include "vision/image.h"

namespace llm {

// `src` resampled to (width, height). Sizes in [1, kMaxImageSide], and
// src.rgb holding width * height * 3 bytes, or INVALID_ARGUMENT.
StatusOr<RgbImage> ResizeBilinear(const RgbImage& src, int32_t width, int32_t height);
StatusOr<RgbImage> ResizeBicubic(const RgbImage& src, int32_t width, int32_t height);

}  // namespace llm
