#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace llm {
namespace {

Status CheckPicture(const RgbImage& src) {
  if (src.width < 1 || src.height < 1 || src.width > kMaxImageSide || src.height > kMaxImageSide)
    return InvalidArgument("image preprocessing: the picture is " + std::to_string(src.width) + "x" +
                           std::to_string(src.height) + "; each side must be in [1, " +
                           std::to_string(kMaxImageSide) + "]");
  if (src.rgb.size() != static_cast<size_t>(src.width) * src.height * 3)
    return InvalidArgument("image preprocessing: the pixel buffer does not hold width * height * 3 bytes");
  return Status::Ok();
}

// Resize, or the picture itself when it already has the size.
StatusOr<RgbImage> ResizeOrKeep(const RgbImage& src, int32_t w, int32_t h, ResizeFilter filter) {
  if (src.width == w && src.height == h) return src;
  return Resize(src, w, h, filter);
}

RgbImage Crop(const RgbImage& src, int32_t x0, int32_t y0, int32_t w, int32_t h) {
  RgbImage out;
  out.width = w;
  out.height = h;
  out.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int32_t y = 0; y < h; ++y)
    std::memcpy(out.rgb.data() + static_cast<size_t>(y) * w * 3,
                src.rgb.data() + (static_cast<size_t>(y0 + y) * src.width + x0) * 3, static_cast<size_t>(w) * 3);
  return out;
}

}  // namespace

StatusOr<RgbImage> FitToSquare(const RgbImage& src, int32_t side, const FitOptions& fit) {
  if (side < 1 || side > kMaxImageSide) return InvalidArgument("image preprocessing: bad target size");
  LLM_RETURN_IF_ERROR(CheckPicture(src));
  if (src.width == side && src.height == side) return src;
  // float arithmetic on purpose: the sizes must round as llama.cpp's do
  const float s = std::min(static_cast<float>(side) / static_cast<float>(src.width),
                           static_cast<float>(side) / static_cast<float>(src.height));
  const int32_t w = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.width) * s)), side);
  const int32_t h = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.height) * s)), side);
  LLM_ASSIGN_OR_RETURN(RgbImage scaled, Resize(src, std::max(w, 1), std::max(h, 1), fit.filter));
  RgbImage out;
  out.width = side;
  out.height = side;
  out.rgb.resize(static_cast<size_t>(side) * side * 3);
  for (size_t p = 0; p < out.rgb.size(); p += 3) std::memcpy(out.rgb.data() + p, fit.pad.data(), 3);
  const int32_t x0 = (side - scaled.width) / 2, y0 = (side - scaled.height) / 2;
  for (int32_t y = 0; y < scaled.height; ++y)
    std::memcpy(out.rgb.data() + (static_cast<size_t>(y0 + y) * side + x0) * 3,
                scaled.rgb.data() + static_cast<size_t>(y) * scaled.width * 3, static_cast<size_t>(scaled.width) * 3);
  return out;
}

Status NormalizePlanar(const RgbImage& img, const ImageNorm& norm, std::vector<float>* out) {
  for (int c = 0; c < 3; ++c)
    if (!std::isfinite(norm.mean[c]) || !std::isfinite(norm.std[c]) || norm.std[c] == 0.0f)
      return InvalidArgument("image preprocessing: the normalisation's mean and std must be finite, std not zero");
  LLM_RETURN_IF_ERROR(CheckPicture(img));
  const size_t plane = static_cast<size_t>(img.width) * img.height;
  out->resize(3 * plane);
  for (size_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c)
      (*out)[c * plane + p] = (static_cast<float>(img.rgb[p * 3 + c]) / 255.0f - norm.mean[c]) / norm.std[c];
  return Status::Ok();
}

Status PreprocessFixedSize(const RgbImage& src, int32_t side, const ImageNorm& norm, std::vector<float>* out,
                           const FitOptions& fit) {
  for (int c = 0; c < 3; ++c)
    if (!std::isfinite(norm.mean[c]) || !std::isfinite(norm.std[c]) || norm.std[c] == 0.0f)
      return InvalidArgument("image preprocessing: the normalisation's mean and std must be finite, std not zero");
  LLM_ASSIGN_OR_RETURN(RgbImage sq, FitToSquare(src, side, fit));
  return NormalizePlanar(sq, norm, out);
}

StatusOr<ImageTiles> TileLongestEdge(const RgbImage& src, int32_t side, int32_t longest_edge) {
  if (side < 1 || side > kMaxImageSide || longest_edge < 1 || longest_edge > kMaxImageSide)
    return InvalidArgument("image preprocessing: bad tile size or longest edge");
  LLM_RETURN_IF_ERROR(CheckPicture(src));
  const ResizeFilter lanczos = ResizeFilter::kLanczos;
  // 1. the longer side to L; double arithmetic and truncation, as llama.cpp's
  const double ratio = static_cast<double>(src.width) / src.height;
  int32_t w, h;
  if (src.width >= src.height) {
    w = longest_edge;
    h = static_cast<int32_t>(longest_edge / ratio);
    h += h % 2;
  } else {
    h = longest_edge;
    w = static_cast<int32_t>(longest_edge * ratio);
    w += w % 2;
  }
  if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide)
    return InvalidArgument("image preprocessing: the picture's aspect ratio (" + std::to_string(src.width) + "x" +
                           std::to_string(src.height) + ") leaves a side of 0 pixels at the longest edge " +
                           std::to_string(longest_edge));
  ImageTiles t;
  t.grid_x = (w + side - 1) / side;
  t.grid_y = (h + side - 1) / side;
  if (static_cast<int64_t>(t.grid_x) * t.grid_y > kMaxTiles ||
      static_cast<int64_t>(t.grid_x) * side > kMaxImageSide || static_cast<int64_t>(t.grid_y) * side > kMaxImageSide)
    return InvalidArgument("image preprocessing: " + std::to_string(t.grid_x) + " x " + std::to_string(t.grid_y) +
                           " tiles are more than the limit " + std::to_string(kMaxTiles));
  LLM_ASSIGN_OR_RETURN(RgbImage resized, ResizeOrKeep(src, w, h, lanczos));
  // 2. stretched to whole tiles
  LLM_ASSIGN_OR_RETURN(RgbImage refined, ResizeOrKeep(resized, t.grid_x * side, t.grid_y * side, lanczos));
  // 3. the overview from the stretched picture, and the tiles
  LLM_ASSIGN_OR_RETURN(t.overview, ResizeOrKeep(refined, side, side, lanczos));
  for (int32_t y = 0; y < t.grid_y; ++y)
    for (int32_t x = 0; x < t.grid_x; ++x) t.tiles.push_back(Crop(refined, x * side, y * side, side, side));
  return t;
}

}  // namespace llm
