// A picture to the tower inputs its projector family takes, as llama.cpp's
// multimodal library prepares them (vision/image_preprocess.h has the
// steps):
//   Gemma 3   one S x S square: bilinear fit, centred on black;
//   LLaVA     one S x S square: bicubic fit, centred on grey (122, 116, 104);
//   Idefics3  the tiles row after row, then the overview (TileLongestEdge);
//   Qwen2.5-VL one picture at its own size (PreprocessDynamicSize).
// Each input is (3, H, W) planar (H = W = S but for Qwen2.5-VL), normalised with the file's mean and std.
#pragma once

#include <cstdint>
#include <vector>

#include "model/vision_config.h"
#include "util/status.h"
#include "vision/image.h"
#include "vision/image_preprocess.h"
#include "vision/image_preprocess_dynamic.h"

namespace llm {

struct TowerInputs {
  std::vector<std::vector<float>> pixels;  // each 3·S·S
  int32_t grid_x = 0, grid_y = 0;          // tiled: tiles per row and rows (pixels: tiles, then the overview)
  int32_t width = 0, height = 0;           // each input's W x H (S x S, or an own-size tower's picture)
};

FitOptions FitOptionsFor(ProjectorType t);

StatusOr<TowerInputs> PrepareForTower(const RgbImage& src, const VisionConfig& c);

}  // namespace llm
