// A build without libwebp (CMake: LLM_IMAGE_CODECS=OFF, or pkg-config found
// no libwebp): WebP image parts are refused; PNG and JPEG are unaffected.
#include "vision/image_codecs.h"

namespace llm::codecs {

bool WebpAvailable() { return false; }

StatusOr<RgbImage> DecodeWebp(const uint8_t*, size_t, const ImageLimits&) {
  return Unsupported("image: this build has no WebP decoder (rebuild with libwebp; Debian: libwebp-dev)");
}

}  // namespace llm::codecs
