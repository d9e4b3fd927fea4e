// From a picture to the pixel tensor a fixed-size vision tower reads
// (Gemma 3's SigLIP), as llama.cpp prepares it:
//
//   1. fit: scale the picture by s = min(S / w, S / h) (float), to
//      min(ceil(w·s), S) x min(ceil(h·s), S) with ResizeBilinear, and paste
//      it at ((S - w')/2, (S - h')/2) on an S x S black square (a picture
//      already S x S is used as is);
//   2. normalise: each byte v of channel c becomes (v / 255 - mean[c]) / std[c];
//   3. lay out planar: (3, S, S), channel-major (R plane, G plane, B plane).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "util/status.h"
#include "vision/image.h"

namespace llm {

struct ImageNorm {
  std::array<float, 3> mean{};
  std::array<float, 3> std{};  // none zero
};

// Step 1 alone: the S x S letterboxed picture (for tests and for callers that
// keep the bytes).
StatusOr<RgbImage> FitToSquare(const RgbImage& src, int32_t side);

// Steps 1-3: out gets 3 * side * side floats.
Status PreprocessFixedSize(const RgbImage& src, int32_t side, const ImageNorm& norm, std::vector<float>* out);

}  // namespace llm
