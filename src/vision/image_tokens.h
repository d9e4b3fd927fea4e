// How a projector family's pictures sit in the text (as llama.cpp's
// multimodal library lays them out): the marker a chat template writes
// where a picture stands, the text placed before and after the picture's
// soft tokens, and the text model architecture the projector serves.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/vision_config.h"

namespace llm {

struct ImageTokens {
  std::string_view marker;  // what the template writes per picture
  std::string_view begin;   // before the soft tokens (a special token)
  std::string_view end;     // after them
  std::string_view arch;    // the text model's general.architecture
};

inline ImageTokens ImageTokensFor(ProjectorType t) {
  switch (t) {
    case ProjectorType::kGemma3: return {"<start_of_image>", "<start_of_image>", "<end_of_image>", "gemma3"};
    // the Qwen2-VL chat template's image, wrapped by libmtmd in vision_start/end
    case ProjectorType::kQwen25VL:
      return {"<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|>", "<|vision_end|>", "qwen2vl"};
  }
  return {};
}

// FNV-1a 64 over the preprocessed pixels' bytes: the picture's identity
// for the engine's cache of encoded pictures (ImageInput::hash).
inline uint64_t HashImagePixels(const std::vector<float>& pixels) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(pixels.data());
  for (size_t i = 0, n = pixels.size() * sizeof(float); i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace llm
