// PNG through libpng (image_codecs.h). libpng reports errors by longjmp to
// the frame that called setjmp; so that no C++ object is ever skipped by a
// jump, everything with a destructor lives in PngRead, owned by the caller
// of ReadPng (the only frame with a setjmp), and ReadPng itself holds only
// plain values.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "vision/image_codecs.h"

namespace llm::codecs {

namespace {

constexpr png_alloc_size_t kMaxChunkBytes = png_alloc_size_t{8} << 20;  // an ancillary chunk (iCCP, zTXt...)

struct PngRead {
  const uint8_t* data = nullptr;
  size_t n = 0;
  size_t pos = 0;
  char error[256] = {};
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_uint_32 width = 0, height = 0;
  std::vector<uint8_t>* pixels = nullptr;  // (height, width, 3), sized by ReadPng
  std::vector<png_bytep> rows;             // (height), into *pixels
  ImageLimits limits;

  ~PngRead() { png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr); }
};

void OnError(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngRead*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof(r->error), "%s", msg != nullptr ? msg : "unknown error");
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // ancillary damage: libpng skips the chunk

void OnRead(png_structp png, png_bytep out, png_size_t len) {
  auto* r = static_cast<PngRead*>(png_get_io_ptr(png));
  if (len > r->n - r->pos) png_error(png, "truncated stream (the data ends before the image does)");
  std::memcpy(out, r->data + r->pos, len);
  r->pos += len;
}

enum class Outcome { kOk, kLibpngError, kSizeRefused, kLayout };

// The one frame with a setjmp (see the top of the file).
Outcome ReadPng(PngRead* r) {
  if (setjmp(png_jmpbuf(r->png))) return Outcome::kLibpngError;
  png_set_read_fn(r->png, r, OnRead);
  png_set_chunk_malloc_max(r->png, kMaxChunkBytes);
  png_read_info(r->png, r->info);
  r->width = png_get_image_width(r->png, r->info);
  r->height = png_get_image_height(r->png, r->info);
  if (!CheckImageSize(r->width, r->height, r->limits).ok()) return Outcome::kSizeRefused;

  const int color = png_get_color_type(r->png, r->info);
  const int depth = png_get_bit_depth(r->png, r->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(r->png);
  if (depth == 16) png_set_strip_16(r->png);  // the high byte, as stb_image keeps
  png_set_strip_alpha(r->png);                // dropped, not composited
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  if (png_get_channels(r->png, r->info) != 3 || png_get_bit_depth(r->png, r->info) != 8 ||
      png_get_rowbytes(r->png, r->info) != static_cast<size_t>(r->width) * 3)
    return Outcome::kLayout;

  r->pixels->resize(static_cast<size_t>(r->width) * r->height * 3);
  r->rows.resize(r->height);
  for (png_uint_32 y = 0; y < r->height; ++y) r->rows[y] = r->pixels->data() + static_cast<size_t>(y) * r->width * 3;
  png_read_image(r->png, r->rows.data());
  png_read_end(r->png, nullptr);  // the chunks after the image, to IEND: a cut-off file is an error
  return Outcome::kOk;
}

}  // namespace

bool Available() { return true; }

StatusOr<RgbImage> DecodePng(const uint8_t* data, size_t n, const ImageLimits& limits) {
  // The size first, straight from IHDR (the first chunk, at a fixed
  // place): a picture too large is refused whatever follows its header.
  if (n >= 24 && std::memcmp(data + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return (uint32_t{data[at]} << 24) | (uint32_t{data[at + 1]} << 16) | (uint32_t{data[at + 2]} << 8) | data[at + 3];
    };
    if (Status s = CheckImageSize(be32(16), be32(20), limits); !s.ok()) return s;
  }
  RgbImage img;
  PngRead r;
  r.data = data;
  r.n = n;
  r.pixels = &img.rgb;
  r.limits = limits;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, OnError, OnWarning);
  if (r.png == nullptr) return Status(LLM_ERR_OUT_OF_MEMORY, "PNG: libpng could not start");
  r.info = png_create_info_struct(r.png);
  if (r.info == nullptr) return Status(LLM_ERR_OUT_OF_MEMORY, "PNG: libpng could not start");
  switch (ReadPng(&r)) {
    case Outcome::kOk: break;
    case Outcome::kLibpngError: return InvalidArgument(std::string("image: corrupt PNG: ") + r.error);
    case Outcome::kSizeRefused: return CheckImageSize(r.width, r.height, limits);
    case Outcome::kLayout: return Status(LLM_ERR_INTERNAL, "PNG: libpng did not produce 8-bit RGB rows");
  }
  img.width = static_cast<int32_t>(r.width);
  img.height = static_cast<int32_t>(r.height);
  return img;
}

}  // namespace llm::codecs
