// Prompts with pictures through the C API as llama.cpp's multimodal library
// got them in the vision references: the prompt's text with a <__media__>
// marker where each picture stands, cut into text parts and raw-RGB image
// parts; and the context those references ran in.
#pragma once

#include <string>
#include <vector>

#include "llm.h"
#include "vision/image.h"

namespace llm::test {

// The context of the references: CPU backend, F32 KV cache (as
// tools/vision_prompt_reference.py), 2 threads; `mmproj_path` may be null.
llm_ctx_params ReferenceCtxParams(const char* model_path, const char* mmproj_path);

// A request's parts; they point into this object and the pictures, so it
// is not copied.
class ImagePromptParts {
 public:
  ImagePromptParts() = default;
  ImagePromptParts(const ImagePromptParts&) = delete;
  ImagePromptParts& operator=(const ImagePromptParts&) = delete;

  // `text` cut at its markers, each empty piece left out, with `shown[i]`
  // at the i-th marker (a failed assertion when the counts differ).
  void Build(const std::string& text, const std::vector<const RgbImage*>& shown);
  // A request of these parts, tokenized with special tokens added and parsed.
  llm_request Request() const;

  const std::vector<llm_content_part>& parts() const { return parts_; }

 private:
  std::vector<std::string> texts_;
  std::vector<llm_content_part> parts_;
};

}  // namespace llm::test
