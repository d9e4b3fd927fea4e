// A picture to the tower inputs its projector family takes, as llama.cpp's
// multimodal library prepares them (vision/image_preprocess.h has the
// steps):
//   Gemma 3   one S x S square: bilinear fit, centred on black;
//   LLaVA     one S x S square: bicubic fit, centred on grey (122, 116, 104);
//   Idefics3  the tiles row after row, then the overview (TileLongestEdge).
// Each input is (3, S, S) planar, normalised with the file's mean and std.
#pragma once

#include <cstdint>
#include <vector>

#include "model/vision_config.h"
#include "util/status.h"
#include "vision/image.h"
#include "vision/image_preprocess.h"

namespace llm {

struct TowerInputs {
  std::vector<std::vector<float>> pixels;  // each 3·S·S
  int32_t grid_x = 0, grid_y = 0;          // tiled: tiles per row and rows (pixels: tiles, then the overview)
};

FitOptions FitOptionsFor(ProjectorType t);

StatusOr<TowerInputs> PrepareForTower(const RgbImage& src, const VisionConfig& c);

}  // namespace llm
