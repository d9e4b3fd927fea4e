#include "vision/image_decode.h"

#include <cstring>
#include <string>

#include "vision/image_codecs.h"

namespace llm {

ImageFormat SniffImageFormat(const uint8_t* data, size_t n) {
  auto starts = [&](const char* magic, size_t len, size_t at = 0) {
    return n >= at + len && std::memcmp(data + at, magic, len) == 0;
  };
  if (data == nullptr) return ImageFormat::kUnknown;
  if (starts("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (starts("\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::kWebp;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::kGif;
  if (starts("BM", 2)) return ImageFormat::kBmp;
  return ImageFormat::kUnknown;
}

const char* ImageFormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

Status CheckImageSize(int64_t width, int64_t height, const ImageLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width < 1 || height < 1) return InvalidArgument("image: the header declares an empty picture (" + size + ")");
  if (width > limits.max_side || height > limits.max_side)
    return InvalidArgument("image: the header declares " + size + " pixels; each side may be at most " +
                           std::to_string(limits.max_side));
  if (width * height > limits.max_pixels)
    return InvalidArgument("image: the header declares " + size + " = " + std::to_string(width * height) +
                           " pixels, more than the budget of " + std::to_string(limits.max_pixels));
  return Status::Ok();
}

bool HaveImageCodecs() { return codecs::Available(); }
bool HaveWebpCodec() { return codecs::WebpAvailable(); }

StatusOr<RgbImage> DecodeImage(const uint8_t* data, size_t n, const ImageLimits& limits) {
  if (data == nullptr || n == 0) return InvalidArgument("image: no bytes");
  if (n > defaults::kMaxImageBytes)
    return InvalidArgument("image: " + std::to_string(n) + " encoded bytes, more than the limit of " +
                           std::to_string(defaults::kMaxImageBytes));
  const ImageFormat f = SniffImageFormat(data, n);
  switch (f) {
    case ImageFormat::kPng: return codecs::DecodePng(data, n, limits);
    case ImageFormat::kJpeg: return codecs::DecodeJpeg(data, n, limits);
    case ImageFormat::kWebp: return codecs::DecodeWebp(data, n, limits);
    case ImageFormat::kUnknown:
      return InvalidArgument("image: the bytes are not a PNG, JPEG or WebP file (unrecognised signature)");
    default:
      return Unsupported(std::string("image: ") + ImageFormatName(f) + " is not supported (PNG, JPEG and WebP are)");
  }
}

}  // namespace llm
