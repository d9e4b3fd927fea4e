// From a picture to the pixel tensors a vision tower reads, as llama.cpp
// prepares them for each projector family.
//
// Fixed size (Gemma 3's SigLIP: bilinear, black; LLaVA-style CLIP: bicubic,
// padded with the grey (122, 116, 104)):
//   1. fit: scale the picture by s = min(S / w, S / h) (float), to
//      min(ceil(w·s), S) x min(ceil(h·s), S) with Resize, and paste it at
//      ((S - w')/2, (S - h')/2) on an S x S square of the pad colour (a
//      picture already S x S is used as is);
//   2. normalise: each byte v of channel c becomes (v / 255 - mean[c]) / std[c];
//   3. lay out planar: (3, S, S), channel-major (R plane, G plane, B plane).
//
// Tiled (Idefics3 / SmolVLM, TileLongestEdge): Lanczos throughout,
//   1. the longer side to L (clip.vision.preproc_image_size), the other to
//      int(L / ratio) (or int(L · ratio)) rounded up to even;
//   2. that picture stretched to the next multiples of the tile side S
//      (gx·S x gy·S);
//   3. tiles: the gx x gy S x S squares of (2), row after row; the
//      overview: (2) shrunk to S x S;
// each then normalised and laid out as above.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "util/status.h"
#include "vision/image.h"
#include "vision/image_resize.h"

namespace llm {

struct ImageNorm {
  std::array<float, 3> mean{};
  std::array<float, 3> std{};  // none zero
};

struct FitOptions {
  ResizeFilter filter = ResizeFilter::kBilinear;
  std::array<uint8_t, 3> pad{0, 0, 0};
};

// Step 1 alone: the S x S letterboxed picture (for tests and for callers that
// keep the bytes).
StatusOr<RgbImage> FitToSquare(const RgbImage& src, int32_t side, const FitOptions& fit = {});

// Steps 2 and 3 on a picture already the tower's size: out gets 3·w·h floats.
Status NormalizePlanar(const RgbImage& img, const ImageNorm& norm, std::vector<float>* out);

// Steps 1-3: out gets 3 * side * side floats.
Status PreprocessFixedSize(const RgbImage& src, int32_t side, const ImageNorm& norm, std::vector<float>* out,
                           const FitOptions& fit = {});

struct ImageTiles {
  int32_t grid_x = 0, grid_y = 0;  // tiles per row, rows
  std::vector<RgbImage> tiles;     // grid_y rows of grid_x, each S x S
  RgbImage overview;               // S x S
};

// Idefics3's tiling of a picture (steps 1-3 of "Tiled" above). `side` S and
// `longest_edge` L in [1, kMaxImageSide]; at most kMaxTiles tiles.
inline constexpr int32_t kMaxTiles = 256;
StatusOr<ImageTiles> TileLongestEdge(const RgbImage& src, int32_t side, int32_t longest_edge);

}  // namespace llm
