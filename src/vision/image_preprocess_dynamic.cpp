#include "vision/image_preprocess_dynamic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "vision/image_resize.h"

namespace llm {
namespace {

bool SideOk(int64_t v) { return v >= 1 && v <= kMaxImageSide; }

}  // namespace

StatusOr<ImageSize> DynamicTargetSize(int32_t width, int32_t height, const DynamicSizeRule& rule) {
  if (rule.align < 1 || rule.align > kMaxImageSide || rule.min_pixels < 0 || rule.max_pixels < 0)
    return InvalidArgument("image preprocessing: bad dynamic-size rule");
  if (!SideOk(width) || !SideOk(height))
    return InvalidArgument("image preprocessing: the picture is " + std::to_string(width) + "x" +
                           std::to_string(height) + "; each side must be in [1, " + std::to_string(kMaxImageSide) +
                           "]");
  // float arithmetic on purpose: the sizes must round as llama.cpp's do
  const float f = static_cast<float>(rule.align);
  auto round_to = [&](float x) { return static_cast<int64_t>(std::round(x / f)) * rule.align; };
  auto ceil_to = [&](float x) { return static_cast<int64_t>(std::ceil(x / f)) * rule.align; };
  auto floor_to = [&](float x) { return static_cast<int64_t>(std::floor(x / f)) * rule.align; };
  int64_t w = std::max<int64_t>(rule.align, round_to(static_cast<float>(width)));
  int64_t h = std::max<int64_t>(rule.align, round_to(static_cast<float>(height)));
  if (rule.max_pixels > 0 && w * h > rule.max_pixels) {
    const float beta = std::sqrt(static_cast<float>(height) * static_cast<float>(width) /
                                 static_cast<float>(rule.max_pixels));
    h = std::max<int64_t>(rule.align, floor_to(static_cast<float>(height) / beta));
    w = std::max<int64_t>(rule.align, floor_to(static_cast<float>(width) / beta));
  } else if (rule.min_pixels > 0 && w * h < rule.min_pixels) {
    const float beta = std::sqrt(static_cast<float>(rule.min_pixels) /
                                 (static_cast<float>(height) * static_cast<float>(width)));
    h = ceil_to(static_cast<float>(height) * beta);
    w = ceil_to(static_cast<float>(width) * beta);
  }
  if (!SideOk(w) || !SideOk(h))
    return InvalidArgument("image preprocessing: a " + std::to_string(width) + "x" + std::to_string(height) +
                           " picture would be resized to " + std::to_string(w) + "x" + std::to_string(h) +
                           ", outside [1, " + std::to_string(kMaxImageSide) + "]");
  return ImageSize{static_cast<int32_t>(w), static_cast<int32_t>(h)};
}

StatusOr<RgbImage> FitToDynamicSize(const RgbImage& src, const DynamicSizeRule& rule) {
  LLM_ASSIGN_OR_RETURN(ImageSize t, DynamicTargetSize(src.width, src.height, rule));
  if (src.rgb.size() != static_cast<size_t>(src.width) * src.height * 3)
    return InvalidArgument("image preprocessing: the pixel buffer does not hold width * height * 3 bytes");
  if (src.width == t.width && src.height == t.height) return src;
  const float s = std::min(static_cast<float>(t.width) / static_cast<float>(src.width),
                           static_cast<float>(t.height) / static_cast<float>(src.height));
  const int32_t w = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.width) * s)), t.width);
  const int32_t h = std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.height) * s)), t.height);
  LLM_ASSIGN_OR_RETURN(RgbImage scaled, ResizeBicubic(src, std::max(w, 1), std::max(h, 1)));
  RgbImage out;
  out.width = t.width;
  out.height = t.height;
  out.rgb.assign(static_cast<size_t>(t.width) * t.height * 3, 0);
  const int32_t x0 = (t.width - scaled.width) / 2, y0 = (t.height - scaled.height) / 2;
  for (int32_t y = 0; y < scaled.height; ++y)
    std::memcpy(out.rgb.data() + (static_cast<size_t>(y0 + y) * t.width + x0) * 3,
                scaled.rgb.data() + static_cast<size_t>(y) * scaled.width * 3, static_cast<size_t>(scaled.width) * 3);
  return out;
}

Status PreprocessDynamicSize(const RgbImage& src, const DynamicSizeRule& rule, const ImageNorm& norm,
                             std::vector<float>* out, ImageSize* size) {
  for (int c = 0; c < 3; ++c)
    if (!std::isfinite(norm.mean[c]) || !std::isfinite(norm.std[c]) || norm.std[c] == 0.0f)
      return InvalidArgument("image preprocessing: the normalisation's mean and std must be finite, std not zero");
  if (out == nullptr || size == nullptr) return InvalidArgument("image preprocessing: no output");
  LLM_ASSIGN_OR_RETURN(RgbImage img, FitToDynamicSize(src, rule));
  const size_t plane = static_cast<size_t>(img.width) * img.height;
  out->resize(3 * plane);
  for (size_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c)
      (*out)[c * plane + p] = (static_cast<float>(img.rgb[p * 3 + c]) / 255.0f - norm.mean[c]) / norm.std[c];
  *size = ImageSize{img.width, img.height};
  return Status::Ok();
}

}  // namespace llm
