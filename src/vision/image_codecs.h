// The per-format decoders behind DecodeImage (src/vision/image_decode.h):
// internal to src/vision/. Each checks the header's size with
// CheckImageSize before it allocates the pixels, and reports a corrupt or
// truncated stream as INVALID_ARGUMENT with the library's reason. A build
// without libpng/libjpeg-turbo links codecs_none.cpp instead (UNSUPPORTED);
// one without libwebp links webp_none.cpp (WebP alone UNSUPPORTED).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/status.h"
#include "vision/image.h"
#include "vision/image_decode.h"

namespace llm::codecs {

bool Available();
StatusOr<RgbImage> DecodePng(const uint8_t* data, size_t n, const ImageLimits& limits);
StatusOr<RgbImage> DecodeJpeg(const uint8_t* data, size_t n, const ImageLimits& limits);
bool WebpAvailable();
StatusOr<RgbImage> DecodeWebp(const uint8_t* data, size_t n, const ImageLimits& limits);

}  // namespace llm::codecs
