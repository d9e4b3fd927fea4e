#include "vision/image_resize.h"

#include <cmath>
#include <string>
#include <vector>

namespace llm {
namespace {

constexpr int kFracBits = 22;  // 32-bit sums of 8-bit pixels times weights, with headroom

// One pass's filter: output pixel i reads n[i] source pixels from first[i]
// with weights w[i * taps ...] (fixed point, kFracBits).
struct Filter {
  int taps = 0;
  std::vector<int32_t> first, n;
  std::vector<int32_t> w;
};

double Radius(ResizeFilter k) {
  return k == ResizeFilter::kBilinear ? 1.0 : k == ResizeFilter::kBicubic ? 2.0 : 3.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  const double px = x * 3.14159265358979323846;
  return std::sin(px) / px;
}

// The filter's weight at distance x (in source pixels, after widening).
double Kernel(ResizeFilter k, double x) {
  switch (k) {
    case ResizeFilter::kBilinear:
      x = std::fabs(x);
      return x < 1.0 ? 1.0 - x : 0.0;
    case ResizeFilter::kBicubic: {
      constexpr double a = -0.5;  // Pillow's (PyTorch's is -0.75)
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
    case ResizeFilter::kLanczos:
      return (x >= -3.0 && x < 3.0) ? Sinc(x) * Sinc(x / 3.0) : 0.0;
  }
  return 0.0;
}

Filter MakeFilter(int32_t in, int32_t out, ResizeFilter kind) {
  Filter f;
  const double scale = static_cast<double>(in) / out;
  const double widen = scale < 1.0 ? 1.0 : scale;  // shrinking widens the filter
  const double support = Radius(kind) * widen;
  const double inv_widen = 1.0 / widen;
  f.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  f.first.resize(out);
  f.n.resize(out);
  f.w.assign(static_cast<size_t>(out) * f.taps, 0);
  std::vector<double> k(f.taps);
  for (int32_t i = 0; i < out; ++i) {
    const double centre = (i + 0.5) * scale;
    // C-style truncation of (centre ± support + 0.5), then clamped to the row
    int32_t lo = static_cast<int32_t>(centre - support + 0.5);
    int32_t hi = static_cast<int32_t>(centre + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    const int32_t count = hi - lo;
    double sum = 0.0;
    for (int32_t j = 0; j < count; ++j) {
      k[j] = Kernel(kind, (lo + j - centre + 0.5) * inv_widen);  // a product, as Pillow computes it
      sum += k[j];
    }
    for (int32_t j = 0; j < count; ++j) {
      const double v = sum != 0.0 ? k[j] / sum : 0.0;
      // round half away from zero, then truncate (cubic and Lanczos weights go negative)
      f.w[static_cast<size_t>(i) * f.taps + j] = static_cast<int32_t>(v * (1 << kFracBits) + (v < 0.0 ? -0.5 : 0.5));
    }
    f.first[i] = lo;
    f.n[i] = count;
  }
  return f;
}

uint8_t Clamp8(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : static_cast<uint8_t>(v); }

// Along x: (h, in_w, 3) -> (h, out_w, 3).
std::vector<uint8_t> PassX(const std::vector<uint8_t>& src, int32_t in_w, int32_t h, int32_t out_w, ResizeFilter kind) {
  const Filter f = MakeFilter(in_w, out_w, kind);
  std::vector<uint8_t> dst(static_cast<size_t>(out_w) * h * 3);
  for (int32_t y = 0; y < h; ++y) {
    const uint8_t* row = src.data() + static_cast<size_t>(y) * in_w * 3;
    uint8_t* o = dst.data() + static_cast<size_t>(y) * out_w * 3;
    for (int32_t x = 0; x < out_w; ++x) {
      const int32_t* w = f.w.data() + static_cast<size_t>(x) * f.taps;
      for (int c = 0; c < 3; ++c) {
        int32_t acc = 1 << (kFracBits - 1);
        for (int32_t j = 0; j < f.n[x]; ++j) acc += row[(f.first[x] + j) * 3 + c] * w[j];
        o[x * 3 + c] = Clamp8(acc >> kFracBits);
      }
    }
  }
  return dst;
}

// Along y: (in_h, w, 3) -> (out_h, w, 3).
std::vector<uint8_t> PassY(const std::vector<uint8_t>& src, int32_t w, int32_t in_h, int32_t out_h, ResizeFilter kind) {
  const Filter f = MakeFilter(in_h, out_h, kind);
  const size_t row_bytes = static_cast<size_t>(w) * 3;
  std::vector<uint8_t> dst(row_bytes * out_h);
  std::vector<int32_t> acc(row_bytes);
  for (int32_t y = 0; y < out_h; ++y) {
    acc.assign(row_bytes, 1 << (kFracBits - 1));
    const int32_t* wt = f.w.data() + static_cast<size_t>(y) * f.taps;
    for (int32_t j = 0; j < f.n[y]; ++j) {
      const uint8_t* row = src.data() + static_cast<size_t>(f.first[y] + j) * row_bytes;
      for (size_t i = 0; i < row_bytes; ++i) acc[i] += row[i] * wt[j];
    }
    uint8_t* o = dst.data() + static_cast<size_t>(y) * row_bytes;
    for (size_t i = 0; i < row_bytes; ++i) o[i] = Clamp8(acc[i] >> kFracBits);
  }
  return dst;
}

bool SideOk(int64_t v) { return v >= 1 && v <= kMaxImageSide; }

}  // namespace

StatusOr<RgbImage> Resize(const RgbImage& src, int32_t width, int32_t height, ResizeFilter filter) {
  if (!SideOk(src.width) || !SideOk(src.height) || !SideOk(width) || !SideOk(height))
    return InvalidArgument("image resize: sizes must be in [1, " + std::to_string(kMaxImageSide) + "], got " +
                           std::to_string(src.width) + "x" + std::to_string(src.height) + " -> " +
                           std::to_string(width) + "x" + std::to_string(height));
  if (src.rgb.size() != static_cast<size_t>(src.width) * src.height * 3)
    return InvalidArgument("image resize: the pixel buffer does not hold width * height * 3 bytes");
  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb = src.rgb;
  if (width != src.width) out.rgb = PassX(out.rgb, src.width, src.height, width, filter);
  if (height != src.height) out.rgb = PassY(out.rgb, width, src.height, height, filter);
  return out;
}

}  // namespace llm
