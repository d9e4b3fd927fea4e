// From an encoded picture (the bytes of a PNG, JPEG or WebP file) to the
// RgbImage the vision path takes, the way llama.cpp's multimodal helper
// loads one (stb_image asked for three channels), through libpng,
// libjpeg-turbo and libwebp (stb_image has no WebP: Pillow's decode, which
// is libwebp's, is the reference there; decode_webp.cpp):
//
//   - the format is sniffed from the magic bytes, never from a name or a
//     MIME type; GIF, BMP... are UNSUPPORTED with their name, and so is
//     an animated WebP;
//   - the header's width and height are checked against ImageLimits before
//     anything is allocated for the pixels (a 100000 x 100000 header or a
//     decompression bomb is refused at once);
//   - grayscale is replicated to R = G = B; palette entries are expanded;
//     an alpha channel (or tRNS transparency) is dropped, not composited:
//     the colour under it is kept, as stb_image's 4 -> 3 conversion and
//     Pillow's convert("RGB") do;
//   - 16-bit samples keep their high byte (v >> 8), as stb_image does;
//   - PNG gamma, colour profiles and EXIF orientation are ignored (neither
//     stb_image nor llama.cpp applies them): the stored pixels are used;
//   - CMYK and YCCK JPEGs (Adobe's inverted convention) are converted:
//     R = C' * K' / 255 with the stored (inverted) values, rounded as
//     stb_image rounds.
//
// A corrupt or truncated stream is INVALID_ARGUMENT with the decoder's
// reason; a build without libpng/libjpeg-turbo answers UNSUPPORTED, and one
// without libwebp answers UNSUPPORTED for WebP (libwebp is found apart from
// the other two: a build may have PNG and JPEG without WebP).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/defaults.h"
#include "util/status.h"
#include "vision/image.h"

namespace llm {

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kGif, kBmp };

// The container the first bytes announce (kUnknown when none matches).
ImageFormat SniffImageFormat(const uint8_t* data, size_t n);
const char* ImageFormatName(ImageFormat f);

struct ImageLimits {
  int32_t max_side = kMaxImageSide;                  // each of width, height
  int64_t max_pixels = defaults::kMaxImagePixels;    // width * height
};

// The declared size against the limits: INVALID_ARGUMENT naming both.
Status CheckImageSize(int64_t width, int64_t height, const ImageLimits& limits);

StatusOr<RgbImage> DecodeImage(const uint8_t* data, size_t n, const ImageLimits& limits = {});

// Whether this build can decode PNG and JPEG (false: DecodeImage answers
// UNSUPPORTED for them).
bool HaveImageCodecs();
// Whether this build can decode WebP (libwebp).
bool HaveWebpCodec();

}  // namespace llm
