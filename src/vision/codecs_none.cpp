// A build without libpng/libjpeg-turbo (CMake: LLM_IMAGE_CODECS=OFF or the
// packages not found): image parts are refused, everything else works.
#include "vision/image_codecs.h"

namespace llm::codecs {

bool Available() { return false; }

StatusOr<RgbImage> DecodePng(const uint8_t*, size_t, const ImageLimits&) {
  return Unsupported("image: this build has no PNG decoder (rebuild with libpng; Debian: libpng-dev)");
}

StatusOr<RgbImage> DecodeJpeg(const uint8_t*, size_t, const ImageLimits&) {
  return Unsupported("image: this build has no JPEG decoder (rebuild with libjpeg-turbo; Debian: libjpeg62-turbo-dev)");
}

}  // namespace llm::codecs
