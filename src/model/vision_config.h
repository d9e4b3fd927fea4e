// The hyper-parameters of a projector file: the GGUF llama.cpp's converters
// write beside a vision-language model's text GGUF (`--mmproj`;
// general.architecture "clip"), holding a vision tower and the projector
// that maps its output into the text model's embedding space.
//
// Read from the `clip.*` keys:
//   clip.projector_type                     "gemma3" (the one read so far)
//   clip.has_vision_encoder                 true
//   clip.use_gelu                           true (Gemma 3's tower: tanh GELU)
//   clip.vision.embedding_length            n_embd (the tower's width)
//   clip.vision.feed_forward_length         n_ff
//   clip.vision.block_count                 n_layer
//   clip.vision.attention.head_count        n_head (head_dim = n_embd / n_head)
//   clip.vision.attention.layer_norm_epsilon eps (LayerNorms and the projector's RMSNorm)
//   clip.vision.image_size, patch_size      S, P: the tower sees S x S pixels in (S/P)^2 patches
//   clip.vision.image_mean, image_std       3 floats each
//   clip.vision.projector.scale_factor      Gemma 3's pooling kernel (absent: 4, the released models')
//   clip.vision.projection_dim              recorded; the output width is the projection tensor's
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "model/gguf.h"
#include "util/status.h"

namespace llm {

enum class ProjectorType : int32_t {
  kGemma3 = 1,  // SigLIP tower, k x k average pooling, RMSNorm, linear projection
};

struct VisionConfig {
  ProjectorType projector = ProjectorType::kGemma3;
  int32_t n_embd = 0;
  int32_t n_ff = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t head_dim = 0;
  float eps = 1e-6f;
  int32_t image_size = 0;  // S
  int32_t patch_size = 0;  // P
  int32_t n_merge = 0;     // Gemma 3: pooling kernel and stride
  std::array<float, 3> image_mean{};
  std::array<float, 3> image_std{};
  int32_t n_embd_out = 0;  // the projector's output width (the text model's n_embd), set by the weights

  int32_t patches_per_side() const { return image_size / patch_size; }
  int32_t n_patches() const { return patches_per_side() * patches_per_side(); }
  // Soft tokens one image becomes in the text sequence.
  int32_t n_image_tokens() const {
    const int32_t side = patches_per_side() / n_merge;
    return side * side;
  }

  // Reads and checks the keys above: a missing key or an impossible value is
  // MODEL_FORMAT, a valid file of a projector or activation this build does
  // not run is UNSUPPORTED.
  static StatusOr<VisionConfig> FromGguf(const GgufFile& f);
};

}  // namespace llm
