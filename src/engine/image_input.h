// An image in a request, as the engine receives it: the vision tower's
// input, already decoded and preprocessed (vision/image_preprocess.h), and
// the prompt as pieces of text tokens with images between them.
//
//   pieces:  { tokens "Describe", image -1 } { tokens {}, image 0 } { tokens "briefly.", image -1 }
//   images:  [ 0: pixels (3, S, S), hash ]
//
// A piece with image >= 0 stands for that image's soft tokens
// (VisionEncoder::n_tokens() positions); its tokens come before them.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

struct ImageInput {
  std::vector<float> pixels;  // tower input, planar, after vision::PreprocessFixedSize
  int width, height;
  uint64_t hash;              // of the preprocessed pixels
};

struct PromptPiece {
  std::vector<int32_t> tokens;
  int image = -1;  // index into images or -1
};

}  // namespace llm
