// Fuzzes the image path of a request's picture: DecodeImage (PNG through
// libpng, JPEG through libjpeg-turbo, the format sniffed) and then
// PreprocessFixedSize to a small tower's square (bilinear on black, and
// LLaVA's bicubic on grey), PreprocessDynamicSize as Qwen2.5-VL's tower
// reads it (multiples of 28, 8 to 64 cells: a bicubic resize up or down and
// the padding), and Idefics3's Lanczos tiling (TileLongestEdge, longest
// edge 64, tiles of 32). Limits tighter than the
// library's (2048 per side, 1 Mpx) keep each input fast; the size checks
// themselves are the same code. A decoded picture must hold exactly
// width * height * 3 bytes and preprocess to finite values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/common.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/image_preprocess_dynamic.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llm::ImageLimits limits;
  limits.max_side = 2048;
  limits.max_pixels = int64_t{1} << 20;
  auto img = llm::DecodeImage(data, size, limits);
  if (!img.ok()) {
    LLM_FUZZ_CHECK(img.status().code() == LLM_ERR_INVALID_ARGUMENT || img.status().code() == LLM_ERR_UNSUPPORTED,
                   img.status().message().c_str());
    LLM_FUZZ_CHECK(!img.status().message().empty(), "a refusal without a reason");
    return 0;
  }
  LLM_FUZZ_CHECK(img->width >= 1 && img->height >= 1 && img->width <= limits.max_side && img->height <= limits.max_side,
                 "a picture outside the limits");
  LLM_FUZZ_CHECK(img->rgb.size() == static_cast<size_t>(img->width) * img->height * 3, "pixel buffer size");
  llm::ImageNorm norm;
  norm.mean = {0.5f, 0.5f, 0.5f};
  norm.std = {0.5f, 0.5f, 0.5f};
  std::vector<float> out;
  llm::Status s = llm::PreprocessFixedSize(*img, 32, norm, &out);
  LLM_FUZZ_CHECK(s.ok(), s.message().c_str());
  LLM_FUZZ_CHECK(out.size() == 3 * 32 * 32, "tower input size");
  for (float v : out) LLM_FUZZ_CHECK(std::isfinite(v) && v >= -1.0001f && v <= 1.0001f, "a pixel out of range");
  const llm::DynamicSizeRule rule{28, 8 * 28 * 28, 64 * 28 * 28};
  llm::ImageSize sz;
  s = llm::PreprocessDynamicSize(*img, rule, norm, &out, &sz);
  LLM_FUZZ_CHECK(s.ok(), s.message().c_str());
  LLM_FUZZ_CHECK(sz.width % 28 == 0 && sz.height % 28 == 0 && sz.width >= 28 && sz.height >= 28, "dynamic size");
  LLM_FUZZ_CHECK(out.size() == 3ull * sz.width * sz.height, "dynamic tower input size");
  for (float v : out) LLM_FUZZ_CHECK(std::isfinite(v) && v >= -1.0001f && v <= 1.0001f, "a pixel out of range");
  llm::FitOptions llava;
  llava.filter = llm::ResizeFilter::kBicubic;
  llava.pad = {122, 116, 104};
  s = llm::PreprocessFixedSize(*img, 32, norm, &out, llava);
  LLM_FUZZ_CHECK(s.ok(), s.message().c_str());
  for (float v : out) LLM_FUZZ_CHECK(std::isfinite(v) && v >= -1.0001f && v <= 1.0001f, "a pixel out of range");
  auto tiles = llm::TileLongestEdge(*img, 32, 64);
  if (!tiles.ok()) {  // only a side that rounds to nothing at the longest edge
    LLM_FUZZ_CHECK(tiles.status().code() == LLM_ERR_INVALID_ARGUMENT, tiles.status().message().c_str());
    return 0;
  }
  LLM_FUZZ_CHECK(tiles->grid_x >= 1 && tiles->grid_y >= 1 && tiles->grid_x <= 2 && tiles->grid_y <= 2, "tile grid");
  LLM_FUZZ_CHECK(tiles->tiles.size() == static_cast<size_t>(tiles->grid_x) * tiles->grid_y, "tile count");
  for (const llm::RgbImage& t : tiles->tiles)
    LLM_FUZZ_CHECK(t.width == 32 && t.height == 32 && t.rgb.size() == 32 * 32 * 3, "tile size");
  LLM_FUZZ_CHECK(tiles->overview.rgb.size() == 32 * 32 * 3, "overview size");
  return 0;
}
