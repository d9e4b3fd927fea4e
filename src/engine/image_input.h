// What the C API hands the engine for a prompt with pictures: the prompt as
// pieces (a run of tokens, or one picture) and the pictures, each already
// decoded and preprocessed for the context's vision tower
// (src/vision/image_preprocess.h). The engine encodes each distinct picture
// once (keyed by `hash`) and lays its soft tokens where its piece stands.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

struct ImageInput {
  std::vector<float> pixels;  // (3, S, S): the tower's input, planar, after PreprocessFixedSize
  int width = 0, height = 0;  // S, S: the preprocessed size (the tower's image_size)
  uint64_t hash = 0;          // 64-bit hash of `pixels` (ImagePixelsHash)
};

struct PromptPiece {
  std::vector<int32_t> tokens;  // the piece's tokens when image == -1
  int image = -1;               // index into the request's images, or -1
};

}  // namespace llm
