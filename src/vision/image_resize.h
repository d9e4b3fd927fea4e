// Resampling an RgbImage to another size as Pillow's Image.resize does for
// 8-bit images with BILINEAR, BICUBIC or LANCZOS (the resizes llama.cpp's
// image preprocessing reproduces, so embeddings of a resized picture agree
// with it bit for bit before the first float):
//
//   separable: the width first (every source row), then the height;
//   output pixel i of a pass covers source coordinates centred at
//     c = (i + 0.5) * scale,  scale = in / out,
//   the filter (triangle of radius 1; Keys cubic with a = -0.5, radius 2;
//   Lanczos-3, radius 3) widened by max(scale, 1) when shrinking, its
//   weights normalised to sum 1 and rounded to 22-bit fixed point (half
//   away from zero); each pass rounds its sums to 8 bits (half up) and
//   clamps to [0, 255].
//
// A side that keeps its size skips its pass. BICUBIC serves LLaVA's fit and
// Qwen2.5-VL's dynamic size, LANCZOS Idefics3's tiling.
#pragma once

#include <cstdint>

#include "util/status.h"
#include "vision/image.h"

namespace llm {

enum class ResizeFilter : int32_t { kBilinear, kBicubic, kLanczos };

// `src` resampled to (width, height). Sizes in [1, kMaxImageSide], and
// src.rgb holding width * height * 3 bytes, or INVALID_ARGUMENT.
StatusOr<RgbImage> Resize(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter);

inline StatusOr<RgbImage> ResizeBilinear(const RgbImage& src, int32_t width, int32_t height) {
  return Resize(src, width, height, ResizeFilter::kBilinear);
}
inline StatusOr<RgbImage> ResizeBicubic(const RgbImage& src, int32_t width, int32_t height) {
  return Resize(src, width, height, ResizeFilter::kBicubic);
}

}  // namespace llm
