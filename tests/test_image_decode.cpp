// The image decoder (src/vision/image_decode.h) against Pillow: the pictures
// in tests/data/images (tools/gen_image_vectors.py) — every PNG colour type
// and depth, JPEG 4:2:0 / 4:4:4 / gray / progressive / CMYK / EXIF-rotated,
// WebP lossy / lossless with and without alpha — decode to the RGB bytes
// Pillow gave (PNG and WebP exactly, JPEG within one unit; the MANIFEST says
// which rule made each reference). Then the refusals: headers declaring too
// many pixels (refused before any allocation), truncated and corrupted
// streams, formats not supported (an animated WebP), empty input. The WebP
// cases skip in a build without libwebp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_paths.h"
#include "vision/image_decode.h"

namespace llm::test {
namespace {

struct Vector {
  std::string file;
  int width = 0, height = 0, tol = 0;
  std::string rule;
};

std::string ImagesDir() { return DataDir() + "/images/"; }

std::vector<Vector> Manifest() {
  std::vector<Vector> out;
  std::istringstream in(ReadFile(ImagesDir() + "MANIFEST.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Vector v;
    std::istringstream(line) >> v.file >> v.width >> v.height >> v.tol >> v.rule;
    out.push_back(v);
  }
  return out;
}

StatusOr<RgbImage> Decode(const std::string& bytes, const ImageLimits& limits = {}) {
  return DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), limits);
}

bool IsWebp(const std::string& name) { return name.size() > 5 && name.compare(name.size() - 5, 5, ".webp") == 0; }

class ImageDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveImageCodecs()) GTEST_SKIP() << "built without libpng/libjpeg-turbo (LLM_IMAGE_CODECS)";
  }
};

TEST_F(ImageDecode, MatchesPillow) {
  const auto vectors = Manifest();
  ASSERT_GE(vectors.size(), 15u) << "tests/data/images/MANIFEST.txt";
  size_t n_webp = 0;
  for (const Vector& v : vectors) {
    SCOPED_TRACE(v.file + " (" + v.rule + ")");
    if (IsWebp(v.file)) {
      ++n_webp;
      if (!HaveWebpCodec()) continue;
    }
    const std::string bytes = ReadFile(ImagesDir() + v.file);
    const std::string want = ReadFile(ImagesDir() + v.file + ".rgb");
    ASSERT_FALSE(bytes.empty());
    ASSERT_EQ(want.size(), static_cast<size_t>(v.width) * v.height * 3);
    auto img = Decode(bytes);
    ASSERT_TRUE(img.ok()) << img.status().message();
    ASSERT_EQ(img->width, v.width);
    ASSERT_EQ(img->height, v.height);
    ASSERT_EQ(img->rgb.size(), want.size());
    int worst = 0;
    size_t off = 0;
    for (size_t i = 0; i < want.size(); ++i)
      off += std::abs(int(img->rgb[i]) - int(static_cast<uint8_t>(want[i]))) > 0,
          worst = std::max(worst, std::abs(int(img->rgb[i]) - int(static_cast<uint8_t>(want[i]))));
    EXPECT_LE(worst, v.tol) << off << " of " << want.size() << " bytes differ";
    if (v.tol > 0) RecordProperty(v.file + "_max_diff", worst);
  }
  EXPECT_GE(n_webp, 5u) << "the MANIFEST's WebP pictures";
}

TEST(ImageSniff, MagicBytes) {
  auto sniff = [](const std::string& s) { return SniffImageFormat(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(sniff("\x89PNG\r\n\x1a\nxxxx"), ImageFormat::kPng);
  EXPECT_EQ(sniff(std::string("\xff\xd8\xff\xe0", 4)), ImageFormat::kJpeg);
  EXPECT_EQ(sniff("RIFF\x10\0\0\0WEBPVP8 "), ImageFormat::kUnknown);  // NUL cuts the literal: too short
  EXPECT_EQ(sniff(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)), ImageFormat::kWebp);
  EXPECT_EQ(sniff("GIF89a...."), ImageFormat::kGif);
  EXPECT_EQ(sniff("\x89PN"), ImageFormat::kUnknown);  // a signature cut short
  EXPECT_EQ(sniff("hello world"), ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat(nullptr, 10), ImageFormat::kUnknown);
}

TEST(ImageDecodeRefusals, EmptyUnknownUnsupported) {
  EXPECT_EQ(DecodeImage(nullptr, 5).status().code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Decode("").status().code(), LLM_ERR_INVALID_ARGUMENT);
  auto junk = Decode("this is not a picture at all");
  EXPECT_EQ(junk.status().code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(junk.status().message().find("not a PNG, JPEG or WebP"), std::string::npos) << junk.status().message();
  // a WebP container with an empty VP8 chunk: corrupt where libwebp is
  // built in, unsupported where it is not; named either way
  auto webp = Decode(std::string("RIFF\x10\0\0\0WEBPVP8 \0\0\0\0", 20));
  EXPECT_EQ(webp.status().code(), HaveWebpCodec() ? LLM_ERR_INVALID_ARGUMENT : LLM_ERR_UNSUPPORTED);
  EXPECT_NE(webp.status().message().find("WebP"), std::string::npos) << webp.status().message();
  auto gif = Decode("GIF89a\x01\0\x01\0");
  EXPECT_EQ(gif.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(gif.status().message().find("GIF"), std::string::npos) << gif.status().message();
}

// WebP's hostile and unsupported files: a lossless header declaring
// 16384 x 16384 with no pixel data, and a complete, valid lossless
// 16383 x 8192 picture of one colour (402 MiB as RGB) in 38 bytes, are
// refused from their headers; an animation is UNSUPPORTED (not decoded as
// its first frame); every prefix of a lossy and a lossless file is refused.
TEST_F(ImageDecode, WebpRefusals) {
  if (!HaveWebpCodec()) GTEST_SKIP() << "built without libwebp";
  for (const char* f : {"huge.webp", "bomb.webp"}) {
    SCOPED_TRACE(f);
    const std::string bytes = ReadFile(ImagesDir() + f);
    ASSERT_FALSE(bytes.empty());
    auto img = Decode(bytes);
    ASSERT_EQ(img.status().code(), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(img.status().message().find("header declares"), std::string::npos) << img.status().message();
    EXPECT_NE(img.status().message().find("budget"), std::string::npos) << img.status().message();
  }
  auto anim = Decode(ReadFile(ImagesDir() + "animated.webp"));
  EXPECT_EQ(anim.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(anim.status().message().find("animated WebP"), std::string::npos) << anim.status().message();
  ImageLimits tight;
  tight.max_side = 16;
  EXPECT_EQ(Decode(ReadFile(ImagesDir() + "lossy.webp"), tight).status().code(), LLM_ERR_INVALID_ARGUMENT);
  for (const char* f : {"lossy.webp", "lossless.webp", "alpha_lossy.webp"}) {
    SCOPED_TRACE(f);
    const std::string bytes = ReadFile(ImagesDir() + f);
    ASSERT_GT(bytes.size(), 100u);
    for (size_t n = 1; n < bytes.size(); n += (bytes.size() < 1200 ? 1 : 5)) {
      auto img = Decode(bytes.substr(0, n));
      ASSERT_FALSE(img.ok()) << "a " << n << "-byte prefix of " << bytes.size() << " decoded";
      ASSERT_EQ(img.status().code(), LLM_ERR_INVALID_ARGUMENT) << n << ": " << img.status().message();
    }
  }
  auto cut = Decode(ReadFile(ImagesDir() + "lossless.webp").substr(0, 900));
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
}

// Declared sizes past the limits are refused from the header: the 100000 x
// 100000 PNG has no pixel data at all, and the bomb is a complete, valid
// 1-bit 16384 x 8192 picture (402 MiB as RGB) in 16 KB.
TEST_F(ImageDecode, RefusesOversizedHeaders) {
  for (const char* f : {"huge.png", "bomb.png", "huge.jpg"}) {
    SCOPED_TRACE(f);
    const std::string bytes = ReadFile(ImagesDir() + f);
    ASSERT_FALSE(bytes.empty());
    auto img = Decode(bytes);
    ASSERT_EQ(img.status().code(), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(img.status().message().find("header declares"), std::string::npos) << img.status().message();
  }
  EXPECT_NE(Decode(ReadFile(ImagesDir() + "bomb.png")).status().message().find("budget"), std::string::npos);
  // the same bomb within a budget that holds it decodes (it is a real picture)
  ImageLimits roomy;
  roomy.max_pixels = int64_t{16384} * 8192;
  auto ok = Decode(ReadFile(ImagesDir() + "bomb.png"), roomy);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->width, 16384);
  // and tighter limits than the defaults are obeyed
  ImageLimits tight;
  tight.max_side = 16;
  EXPECT_EQ(Decode(ReadFile(ImagesDir() + "rgb.png"), tight).status().code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Decode(ReadFile(ImagesDir() + "rgb.jpg"), tight).status().code(), LLM_ERR_INVALID_ARGUMENT);
  tight.max_side = 1000;
  tight.max_pixels = 100;
  EXPECT_EQ(Decode(ReadFile(ImagesDir() + "rgb.png"), tight).status().code(), LLM_ERR_INVALID_ARGUMENT);
}

// Every prefix of each file (every byte count for the small PNGs, a spread
// for the rest) is refused with the decoder's reason; none decodes to a
// picture made up from missing data.
TEST_F(ImageDecode, TruncatedStreamsAreRefused) {
  for (const char* f : {"rgb.png", "palette_trns.png", "gray16.png", "rgb.jpg", "progressive.jpg", "cmyk.jpg"}) {
    SCOPED_TRACE(f);
    const std::string bytes = ReadFile(ImagesDir() + f);
    ASSERT_GT(bytes.size(), 100u);
    for (size_t n = 1; n < bytes.size(); n += (bytes.size() < 600 ? 1 : 7)) {
      auto img = Decode(bytes.substr(0, n));
      ASSERT_FALSE(img.ok()) << "a " << n << "-byte prefix of " << bytes.size() << " decoded";
      ASSERT_EQ(img.status().code(), LLM_ERR_INVALID_ARGUMENT) << n << ": " << img.status().message();
      ASSERT_FALSE(img.status().message().empty());
    }
  }
  auto cut = Decode(ReadFile(ImagesDir() + "rgb.jpg").substr(0, 700));
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
}

// Damaged bytes: a broken PNG checksum is libpng's reason; bytes flipped
// anywhere give a picture or INVALID_ARGUMENT, never a crash (ASan watches).
TEST_F(ImageDecode, CorruptStreams) {
  std::string png = ReadFile(ImagesDir() + "rgb.png");
  png[28] ^= 0x40;  // IHDR's interlace byte: its CRC no longer matches
  auto bad = Decode(png);
  ASSERT_EQ(bad.status().code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(bad.status().message().find("corrupt PNG"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("CRC"), std::string::npos) << bad.status().message();
  for (const char* f : {"rgb.png", "palette.png", "rgb.jpg", "progressive.jpg", "cmyk.jpg", "lossy.webp",
                        "alpha_lossless.webp"}) {
    const std::string bytes = ReadFile(ImagesDir() + f);
    uint32_t seed = 12345;
    for (int trial = 0; trial < 300; ++trial) {
      std::string b = bytes;
      for (int k = 0; k < 1 + trial % 4; ++k) {
        seed = seed * 1664525u + 1013904223u;
        b[(seed >> 8) % b.size()] ^= static_cast<char>(1 + (seed >> 24) % 255);
      }
      auto img = Decode(b);
      if (img.ok()) {
        ASSERT_EQ(img->rgb.size(), static_cast<size_t>(img->width) * img->height * 3) << f;
      } else {
        ASSERT_TRUE(img.status().code() == LLM_ERR_INVALID_ARGUMENT || img.status().code() == LLM_ERR_UNSUPPORTED)
            << f << ": " << img.status().message();
      }
    }
  }
}

}  // namespace
}  // namespace llm::test
