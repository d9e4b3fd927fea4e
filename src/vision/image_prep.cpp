#include "vision/image_prep.h"

#include <utility>

namespace llm {

FitOptions FitOptionsFor(ProjectorType t) {
  FitOptions f;
  if (t == ProjectorType::kMlp) {
    f.filter = ResizeFilter::kBicubic;
    f.pad = {122, 116, 104};
  }
  return f;
}

StatusOr<TowerInputs> PrepareForTower(const RgbImage& src, const VisionConfig& c) {
  const ImageNorm norm{c.image_mean, c.image_std};
  TowerInputs in;
  if (c.dynamic_size()) {
    in.pixels.emplace_back();
    ImageSize size;
    LLM_RETURN_IF_ERROR(PreprocessDynamicSize(src, DynamicSizeRule{c.size_align(), c.min_pixels(), c.max_pixels()},
                                              norm, &in.pixels.back(), &size));
    in.width = size.width;
    in.height = size.height;
    return in;
  }
  in.width = in.height = c.image_size;
  if (c.projector != ProjectorType::kIdefics3) {
    in.pixels.emplace_back();
    LLM_RETURN_IF_ERROR(PreprocessFixedSize(src, c.image_size, norm, &in.pixels.back(), FitOptionsFor(c.projector)));
    return in;
  }
  LLM_ASSIGN_OR_RETURN(ImageTiles t, TileLongestEdge(src, c.image_size, c.longest_edge));
  in.grid_x = t.grid_x;
  in.grid_y = t.grid_y;
  in.pixels.resize(t.tiles.size() + 1);
  for (size_t i = 0; i < t.tiles.size(); ++i) LLM_RETURN_IF_ERROR(NormalizePlanar(t.tiles[i], norm, &in.pixels[i]));
  LLM_RETURN_IF_ERROR(NormalizePlanar(t.overview, norm, &in.pixels.back()));
  return in;
}

}  // namespace llm
