// WebP through libwebp (image_codecs.h): lossy (VP8) and lossless (VP8L)
// still pictures, with or without alpha (VP8X). The size comes from
// WebPGetFeatures, which reads only the headers (for VP8X the canvas), and
// is checked before the pixels are allocated; libwebp then decodes into our
// buffer, so it allocates no picture-sized memory of its own. Alpha is
// dropped, not composited (the colour under it is kept, as Pillow's
// convert("RGB") does). Lossy pictures are converted from YUV with
// libwebp's defaults (its "fancy" chroma upsampling), as Pillow's libwebp
// does. Animated files are UNSUPPORTED.
#include <webp/decode.h>

#include <new>
#include <string>

#include "vision/image_codecs.h"

namespace llm::codecs {

namespace {

const char* Reason(VP8StatusCode st) {
  switch (st) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated stream (the data ends before the image does)";
  }
  return "unknown error";
}

}  // namespace

bool WebpAvailable() { return true; }

StatusOr<RgbImage> DecodeWebp(const uint8_t* data, size_t n, const ImageLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode head = WebPGetFeatures(data, n, &features);
  if (head != VP8_STATUS_OK) return InvalidArgument(std::string("image: corrupt WebP header: ") + Reason(head));
  LLM_RETURN_IF_ERROR(CheckImageSize(features.width, features.height, limits));
  if (features.has_animation) return Unsupported("image: animated WebP is not supported (a still WebP picture is)");

  RgbImage img;
  const size_t stride = static_cast<size_t>(features.width) * 3;
  try {
    img.rgb.resize(stride * static_cast<size_t>(features.height));  // (height, width, 3)
  } catch (const std::bad_alloc&) {
    return Status(LLM_ERR_OUT_OF_MEMORY, "image: no memory for the WebP picture's pixels");
  }
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return Status(LLM_ERR_INTERNAL, "WebP: libwebp's version does not match its header");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = img.rgb.data();
  config.output.u.RGBA.stride = static_cast<int>(stride);
  config.output.u.RGBA.size = img.rgb.size();
  const VP8StatusCode st = WebPDecode(data, n, &config);
  WebPFreeDecBuffer(&config.output);  // external memory: frees nothing of ours
  if (st != VP8_STATUS_OK) return InvalidArgument(std::string("image: corrupt WebP: ") + Reason(st));
  if (config.output.width != features.width || config.output.height != features.height)
    return InvalidArgument("image: corrupt WebP: the picture's size is not the one its header declares");
  img.width = features.width;
  img.height = features.height;
  return img;
}

}  // namespace llm::codecs
