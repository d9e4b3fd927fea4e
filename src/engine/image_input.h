// An image in a request, as the engine receives it from the C API
// (capi_parts.cpp): the vision tower's input, already decoded and
// preprocessed (vision/image_preprocess.h), and the prompt as pieces of text
// tokens with images between them.
//
//   pieces:  { tokens "Describe", image -1 } { tokens {}, image 0 } { tokens "briefly.", image -1 }
//   images:  [ 0: pixels (3, S, S), hash ]
//
// A piece with image >= 0 stands for that image's soft tokens
// (VisionEncoder::n_tokens() positions); its tokens, if any, come before
// them. The engine encodes each distinct image once (keyed by `hash`).
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

struct ImageInput {
  std::vector<float> pixels;  // (3, H, W): the tower's input, planar, after PreprocessFixedSize
                              // (H = W = the tower's image_size) or PreprocessDynamicSize (Qwen2.5-VL)
  int width = 0, height = 0;  // W, H: the preprocessed size
  uint64_t hash = 0;          // 64-bit hash of `pixels` and, for own-size towers, W and H (HashImagePixels)
};

struct PromptPiece {
  std::vector<int32_t> tokens;  // text tokens (before the image, if any)
  int image = -1;               // index into the request's images, or -1
};

}  // namespace llm
