// JPEG through libjpeg-turbo (image_codecs.h). libjpeg reports errors by
// calling error_exit, which must not return: it longjmps to ReadJpeg, the one
// frame with a setjmp, which holds only plain values (everything with a
// destructor lives in JpegRead, owned by its caller). libjpeg's defaults are
// kept (the accurate integer IDCT, "fancy" chroma upsampling), the settings
// Pillow decodes with.
//
// Damage libjpeg would paper over is an error here: a truncated stream (it
// would invent an end marker and grey out the rest), broken entropy data,
// or scans out of order; harmless oddities (extra bytes between markers, a
// bad ICC chunk) stay warnings. Progressive files are held to
// kMaxJpegScans scans, so a stream of thousands of tiny scans cannot cost
// minutes of CPU.
#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "vision/image_codecs.h"

namespace llm::codecs {

namespace {

constexpr long kMaxLibjpegMemory = 1L << 30;  // its own buffers (progressive coefficients...)

struct JpegRead {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  char error[JMSG_LENGTH_MAX + 64] = {};
  bool created = false;
  uint32_t width = 0, height = 0;
  std::vector<uint8_t>* pixels = nullptr;  // (height, width, 3), sized by ReadJpeg
  std::vector<uint8_t> cmyk_row;           // (width, 4): one row of a CMYK picture
  ImageLimits limits;

  ~JpegRead() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegRead* Owner(j_common_ptr c) { return static_cast<JpegRead*>(c->client_data); }

[[noreturn]] void OnErrorExit(j_common_ptr c) {
  JpegRead* r = Owner(c);
  char msg[JMSG_LENGTH_MAX] = {};
  c->err->format_message(c, msg);
  std::snprintf(r->error, sizeof(r->error), "%s", msg);
  std::longjmp(r->jump, 1);
}

bool FatalWarning(int code) {
  switch (code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
      return true;
    default:
      return false;
  }
}

void OnMessage(j_common_ptr c, int level) {
  if (level == -1 && FatalWarning(c->err->msg_code)) {
    if (c->err->msg_code == JWRN_JPEG_EOF) {
      std::snprintf(Owner(c)->error, sizeof(Owner(c)->error), "truncated stream (the data ends before the image does)");
      std::longjmp(Owner(c)->jump, 1);
    }
    OnErrorExit(c);
  }
}

void OnProgress(j_common_ptr c) {
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number > defaults::kMaxJpegScans) {
    std::snprintf(Owner(c)->error, sizeof(Owner(c)->error), "more than %d progressive scans", defaults::kMaxJpegScans);
    std::longjmp(Owner(c)->jump, 1);
  }
}

enum class Outcome { kOk, kLibjpegError, kSizeRefused };

// jpeg_create_decompress fails (longjmp) only when out of memory.
bool Create(JpegRead* r) {
  if (setjmp(r->jump)) return false;
  jpeg_create_decompress(&r->cinfo);  // keeps err and client_data
  r->created = true;
  return true;
}

// stb_image's rounding of x * y / 255.
inline uint8_t Blinn(unsigned x, unsigned y) {
  const unsigned t = x * y + 128;
  return static_cast<uint8_t>((t + (t >> 8)) >> 8);
}

// The one frame with a setjmp (see the top of the file).
Outcome ReadJpeg(JpegRead* r, const uint8_t* data, size_t n) {
  j_decompress_ptr d = &r->cinfo;
  if (setjmp(r->jump)) return Outcome::kLibjpegError;
  jpeg_mem_src(d, data, static_cast<unsigned long>(n));
  jpeg_read_header(d, TRUE);
  r->width = d->image_width;
  r->height = d->image_height;
  if (!CheckImageSize(r->width, r->height, r->limits).ok()) return Outcome::kSizeRefused;
  const bool cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
  d->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(d);
  if (d->output_width != r->width || d->output_height != r->height ||
      d->output_components != (cmyk ? 4 : 3))
    ERREXIT(d, JERR_BAD_LIB_VERSION);  // not what was asked for: refuse rather than guess
  r->pixels->resize(static_cast<size_t>(r->width) * r->height * 3);
  if (cmyk) r->cmyk_row.resize(static_cast<size_t>(r->width) * 4);
  while (d->output_scanline < d->output_height) {
    uint8_t* dst = r->pixels->data() + static_cast<size_t>(d->output_scanline) * r->width * 3;
    JSAMPROW row = cmyk ? r->cmyk_row.data() : dst;
    jpeg_read_scanlines(d, &row, 1);
    if (cmyk)  // Adobe's inverted CMYK, as stb_image converts it
      for (uint32_t x = 0; x < r->width; ++x) {
        const uint8_t* p = r->cmyk_row.data() + static_cast<size_t>(x) * 4;
        dst[x * 3 + 0] = Blinn(p[0], p[3]);
        dst[x * 3 + 1] = Blinn(p[1], p[3]);
        dst[x * 3 + 2] = Blinn(p[2], p[3]);
      }
  }
  jpeg_finish_decompress(d);
  return Outcome::kOk;
}

}  // namespace

StatusOr<RgbImage> DecodeJpeg(const uint8_t* data, size_t n, const ImageLimits& limits) {
  RgbImage img;
  JpegRead r;
  r.pixels = &img.rgb;
  r.limits = limits;
  r.cinfo.err = jpeg_std_error(&r.err);
  r.err.error_exit = OnErrorExit;
  r.err.emit_message = OnMessage;
  r.cinfo.client_data = &r;
  if (!Create(&r)) return Status(LLM_ERR_OUT_OF_MEMORY, std::string("JPEG: libjpeg could not start: ") + r.error);
  r.cinfo.mem->max_memory_to_use = kMaxLibjpegMemory;
  r.progress.progress_monitor = OnProgress;
  r.cinfo.progress = &r.progress;
  switch (ReadJpeg(&r, data, n)) {
    case Outcome::kOk: break;
    case Outcome::kLibjpegError: return InvalidArgument(std::string("image: corrupt JPEG: ") + r.error);
    case Outcome::kSizeRefused: return CheckImageSize(r.width, r.height, limits);
  }
  img.width = static_cast<int32_t>(r.width);
  img.height = static_cast<int32_t>(r.height);
  return img;
}

}  // namespace llm::codecs
