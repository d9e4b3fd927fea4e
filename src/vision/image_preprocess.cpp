#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "vision/image_resize.h"

namespace llm {

StatusOr<RgbImage> FitToSquare(const RgbImage& src, int32_t side) {
  if (side < 1 || side > kMaxImageSide) return InvalidArgument("image preprocessing: bad target size");
  if (src.width < 1 || src.height < 1 || src.width > kMaxImageSide || src.height > kMaxImageSide)
    return InvalidArgument("image preprocessing: the picture is " + std::to_string(src.width) + "x" +
                           std::to_string(src.height) + "; each side must be in [1, " +
                           std::to_string(kMaxImageSide) + "]");
  if (src.rgb.size() != static_cast<size_t>(src.width) * src.height * 3)
    return InvalidArgument("image preprocessing: the pixel buffer does not hold width * height * 3 bytes");
  if (src.width == side && src.height == side) return src;
  // float arithmetic on purpose: the sizes must round as llama.cpp's do
  const float s = std::min(static_cast<float>(side) / static_cast<float>(src.width),
                           static_cast<float>(side) / static_cast<float>(src.height));
  const int32_t w = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.width) * s)), side);
  const int32_t h = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.height) * s)), side);
  LLM_ASSIGN_OR_RETURN(RgbImage scaled, ResizeBilinear(src, std::max(w, 1), std::max(h, 1)));
  RgbImage out;
  out.width = side;
  out.height = side;
  out.rgb.assign(static_cast<size_t>(side) * side * 3, 0);
  const int32_t x0 = (side - scaled.width) / 2, y0 = (side - scaled.height) / 2;
  for (int32_t y = 0; y < scaled.height; ++y)
    std::memcpy(out.rgb.data() + (static_cast<size_t>(y0 + y) * side + x0) * 3,
                scaled.rgb.data() + static_cast<size_t>(y) * scaled.width * 3, static_cast<size_t>(scaled.width) * 3);
  return out;
}

Status PreprocessFixedSize(const RgbImage& src, int32_t side, const ImageNorm& norm, std::vector<float>* out) {
  for (int c = 0; c < 3; ++c)
    if (!std::isfinite(norm.mean[c]) || !std::isfinite(norm.std[c]) || norm.std[c] == 0.0f)
      return InvalidArgument("image preprocessing: the normalisation's mean and std must be finite, std not zero");
  LLM_ASSIGN_OR_RETURN(RgbImage sq, FitToSquare(src, side));
  const size_t plane = static_cast<size_t>(side) * side;
  out->resize(3 * plane);
  for (size_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c)
      (*out)[c * plane + p] = (static_cast<float>(sq.rgb[p * 3 + c]) / 255.0f - norm.mean[c]) / norm.std[c];
  return Status::Ok();
}

}  // namespace llm
