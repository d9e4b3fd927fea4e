// The hyper-parameters of a projector file: the GGUF llama.cpp's converters
// write beside a vision-language model's text GGUF (`--mmproj`;
// general.architecture "clip"), holding a vision tower and the projector
// that maps its output into the text model's embedding space.
//
// Read from the `clip.*` keys:
//   clip.projector_type                     "gemma3", "idefics3", "mlp" (LLaVA-style) or
//                                           "qwen2.5vl_merger" (Qwen2.5-VL)
//   clip.has_vision_encoder                 true
//   clip.use_gelu                           true: tanh GELU in the tower's feed-forward;
//                                           absent/false: quick GELU x·σ(1.702x) (CLIP's;
//                                           SigLIP families must say true)
//   clip.use_silu                           true: Qwen2.5-VL's SwiGLU tower (only there)
//   clip.vision.embedding_length            n_embd (the tower's width)
//   clip.vision.feed_forward_length         n_ff
//   clip.vision.block_count                 n_layer
//   clip.vision.attention.head_count        n_head (head_dim = n_embd / n_head)
//   clip.vision.attention.layer_norm_epsilon eps (LayerNorms and the projector's RMSNorm)
//   clip.vision.image_size, patch_size      S, P: the tower sees S x S pixels in (S/P)^2 patches
//   clip.vision.image_mean, image_std       3 floats each
//   clip.vision.projector.scale_factor      Gemma 3's pooling kernel (absent: 4, the released models');
//                                           Idefics3's pixel-shuffle factor (required)
//   clip.vision.preproc_image_size          Idefics3: the longest edge before tiling (required)
//   clip.vision.feature_layer               LLaVA: one index f, the tower's output is the input
//                                           of layer f (absent: n_layer - 1, the second-to-last
//                                           layer's output, as llama.cpp reads such files)
//   clip.vision.projection_dim              recorded; the output width is the projection tensor's
//
// Qwen2.5-VL also reads
//   clip.vision.n_wa_pattern                every n-th layer attends fully, the others in windows
//   clip.vision.spatial_merge_size          the merger's 2 x 2 (absent: 2; only 2 is run)
// and sizes each picture itself: clip.vision.image_size is read but not used.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "model/gguf.h"
#include "util/status.h"

namespace llm {

enum class ProjectorType : int32_t {
  kGemma3 = 1,    // SigLIP tower, k x k average pooling, RMSNorm, linear projection
  kIdefics3 = 2,  // SigLIP tower on tiles + overview, k x k pixel shuffle, linear projection
  kMlp = 3,       // LLaVA: CLIP tower (class token, pre-norm), two-layer GELU MLP
  kQwen25VL = 4,  // ViT with 2D RoPE and window attention at the picture's own size, 2 x 2 patch merger
};

// The tower's feed-forward activation.
enum class VisionAct : int32_t {
  kGelu = 0,       // tanh approximation
  kGeluQuick = 1,  // x·σ(1.702x)
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
  // Gemma 3: pooling kernel and stride; Idefics3: shuffle factor; MLP: 1;
  // Qwen2.5-VL: the merger's side (2)
  int32_t n_merge = 0;
  VisionAct act = VisionAct::kGelu;  // Qwen2.5-VL: unused (its SwiGLU)
  int32_t n_layer_run = 0;     // layers the tower runs (LLaVA's feature layer), <= n_layer
  int32_t longest_edge = 0;    // Idefics3: the picture's longer side before tiling
  int32_t n_wa_pattern = 0;  // Qwen2.5-VL: layer i attends fully when (i + 1) % n_wa_pattern == 0
  std::array<float, 3> image_mean{};
  std::array<float, 3> image_std{};
  int32_t n_embd_out = 0;  // the projector's output width (the text model's n_embd), set by the weights

  int32_t patches_per_side() const { return image_size / patch_size; }
  int32_t n_patches() const { return patches_per_side() * patches_per_side(); }
  // Whether each picture keeps its own size (Qwen2.5-VL) instead of the
  // fixed S x S square; then n_image_tokens() does not apply and the count
  // comes from the preprocessed picture's size: (w / P / 2) * (h / P / 2).
  bool dynamic_size() const { return projector == ProjectorType::kQwen25VL; }
  // Soft tokens one tower pass (one image; for Idefics3 one tile or the
  // overview) becomes in the text sequence (fixed-size towers).
  int32_t n_image_tokens() const {
    const int32_t side = patches_per_side() / n_merge;
    return side * side;
  }

  // Dynamic-size towers: each side a multiple of size_align() = P * n_merge,
  // between min_pixels() and max_pixels() in all (llama.cpp's limits for
  // Qwen2.5-VL: 8 to 4096 merged tokens; vision/image_preprocess_dynamic.h).
  static constexpr int64_t kQwen25VLMinTokens = 8;
  static constexpr int64_t kQwen25VLMaxTokens = 4096;
  int32_t size_align() const { return patch_size * n_merge; }
  int64_t min_pixels() const { return kQwen25VLMinTokens * size_align() * size_align(); }
  int64_t max_pixels() const { return kQwen25VLMaxTokens * size_align() * size_align(); }

  // Reads and checks the keys above: a missing key or an impossible value is
  // MODEL_FORMAT, a valid file of a projector or activation this build does
  // not run is UNSUPPORTED.
  static StatusOr<VisionConfig> FromGguf(const GgufFile& f);
};

}  // namespace llm
