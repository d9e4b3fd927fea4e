// Images to soft tokens on the CPU: a projector file's tower and projector
// (model/vision_weights.h) run over one preprocessed image at a time
// (vision/image_preprocess.h makes the pixels): the ViT tower
// (vision_tower.h), then the family's projector: Gemma 3's pooling
// (gemma3_projector.h), Idefics3's pixel shuffle (idefics3_projector.h; one
// Encode per tile or overview), LLaVA's MLP (llava_projector.h); or
// Qwen2.5-VL's own tower and patch merger at the picture's size
// (qwen25vl_vision.h, EncodeSized).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "util/status.h"

namespace llm::cpu {

class VisionEncoder {
 public:
  virtual ~VisionEncoder() = default;
  // Soft tokens per image and floats per token (the text model's width).
  virtual int32_t n_tokens() const = 0;
  virtual int32_t n_embd_out() const = 0;
  // pixels: 3·S·S floats, planar, normalised; out: n_tokens() · n_embd_out().
  virtual Status Encode(const std::vector<float>& pixels, float* out) = 0;

  // Towers that read each picture at its own size (VisionConfig::
  // dynamic_size(), Qwen2.5-VL): the soft tokens of a width x height
  // picture, and its encoding from 3·height·width planar floats
  // (vision/image_preprocess_dynamic.h). Fixed-size towers: n_tokens(), and
  // Encode when the size is S x S.
  virtual int32_t n_tokens_for(int32_t width, int32_t height) const {
    (void)width, (void)height;
    return n_tokens();
  }
  virtual Status EncodeSized(const std::vector<float>& pixels, int32_t width, int32_t height, float* out) {
    (void)width, (void)height;
    return Encode(pixels, out);
  }
};

// The config and weights must outlive the encoder. INVALID_ARGUMENT for
// weights that do not fit the config, UNSUPPORTED for a projector this
// backend does not run.
StatusOr<std::unique_ptr<VisionEncoder>> CreateCpuVisionEncoder(const VisionConfig& config,
                                                                const VisionWeights& weights, int n_threads);

}  // namespace llm::cpu
