#include "model/vision_config.h"

#include <cmath>
#include <string>
#include <vector>

namespace llm {
namespace {

// Bounds far above any released tower, so a hostile file cannot make the
// loader or the encoder size buffers from absurd values.
constexpr int64_t kMaxWidth = 16384;
constexpr int64_t kMaxLayers = 256;
constexpr int64_t kMaxImageSize = 4096;

StatusOr<int32_t> ReadInt(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  auto v = f.GetInt(key);
  if (!v.ok()) return ModelFormatError("projector file: " + v.status().message());
  if (*v < lo || *v > hi)
    return ModelFormatError("projector file: " + key + " = " + std::to_string(*v) + " is outside [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int32_t>(*v);
}

Status ReadTriple(const GgufFile& f, const std::string& key, std::array<float, 3>* out) {
  auto v = f.GetFloatArray(key);
  if (!v.ok()) return ModelFormatError("projector file: " + v.status().message());
  if (v->size() != 3) return ModelFormatError("projector file: " + key + " must hold 3 values");
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite((*v)[i])) return ModelFormatError("projector file: " + key + " holds a non-finite value");
    (*out)[i] = (*v)[i];
  }
  return Status::Ok();
}

// Qwen2.5-VL's own keys: the merger's side (only 2, which llama.cpp's
// window layout assumes too) and the window-attention pattern (required, as
// llama.cpp requires it; 0 = every layer attends fully).
StatusOr<VisionConfig> ReadQwen25VLKeys(const GgufFile& f, VisionConfig c) {
  c.n_merge = 2;
  if (f.Has("clip.vision.spatial_merge_size")) {
    LLM_ASSIGN_OR_RETURN(c.n_merge, ReadInt(f, "clip.vision.spatial_merge_size", 1, kMaxImageSize));
  }
  if (c.n_merge != 2) return Unsupported("projector file: Qwen2.5-VL with a spatial_merge_size other than 2");
  LLM_ASSIGN_OR_RETURN(c.n_wa_pattern, ReadInt(f, "clip.vision.n_wa_pattern", 0, kMaxLayers));
  if (c.head_dim % 4 != 0) return ModelFormatError("projector file: Qwen2.5-VL's 2D RoPE needs head_dim % 4 == 0");
  if (c.n_wa_pattern > 0 && 112 / c.patch_size / 2 < 1)  // llama.cpp's 112-pixel window holds no 2 x 2 cell
    return Unsupported("projector file: Qwen2.5-VL's window attention with patch_size " + std::to_string(c.patch_size));
  if (int64_t{c.patch_size} * c.n_merge > 1024)
    return ModelFormatError("projector file: patch_size " + std::to_string(c.patch_size) + " is too large");
  return c;
}

}  // namespace

StatusOr<VisionConfig> VisionConfig::FromGguf(const GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  if (!arch.ok() || *arch != "clip")
    return ModelFormatError("not a projector file: general.architecture must be \"clip\"");
  auto has_vision = f.GetBool("clip.has_vision_encoder");
  if (!has_vision.ok() || !*has_vision) return Unsupported("the projector file has no vision encoder");
  std::string proj;
  if (auto p = f.GetString("clip.projector_type"); p.ok()) {
    proj = std::string(*p);
  } else if (auto pv = f.GetString("clip.vision.projector_type"); pv.ok()) {
    proj = std::string(*pv);
  } else {
    return ModelFormatError("projector file: missing key clip.projector_type");
  }
  VisionConfig c;
  if (proj == "gemma3") {
    c.projector = ProjectorType::kGemma3;
  } else if (proj == "idefics3") {
    c.projector = ProjectorType::kIdefics3;
  } else if (proj == "mlp") {
    c.projector = ProjectorType::kMlp;
  } else if (proj == "qwen2.5vl_merger") {
    c.projector = ProjectorType::kQwen25VL;
  } else {
    return Unsupported("projector type '" + proj +
                       "' is not supported (supported: gemma3, idefics3, mlp, qwen2.5vl_merger)");
  }
  auto gelu = f.GetBool("clip.use_gelu");
  auto silu = f.GetBool("clip.use_silu");
  const bool is_gelu = gelu.ok() && *gelu, is_silu = silu.ok() && *silu;
  if (c.projector == ProjectorType::kQwen25VL) {
    if (!is_silu || is_gelu)
      return Unsupported("projector file: only a SwiGLU tower (clip.use_silu) is supported for Qwen2.5-VL");
  } else {
    if (is_silu) return Unsupported("projector file: a SiLU tower (clip.use_silu) is supported for Qwen2.5-VL only");
    c.act = is_gelu ? VisionAct::kGelu : VisionAct::kGeluQuick;
    if (c.projector != ProjectorType::kMlp && c.act != VisionAct::kGelu)
      return Unsupported("projector file: a SigLIP tower (" + proj + ") must use GELU (clip.use_gelu)");
  }

  LLM_ASSIGN_OR_RETURN(c.n_embd, ReadInt(f, "clip.vision.embedding_length", 1, kMaxWidth));
  LLM_ASSIGN_OR_RETURN(c.n_ff, ReadInt(f, "clip.vision.feed_forward_length", 1, 4 * kMaxWidth));
  LLM_ASSIGN_OR_RETURN(c.n_layer, ReadInt(f, "clip.vision.block_count", 1, kMaxLayers));
  LLM_ASSIGN_OR_RETURN(c.n_head, ReadInt(f, "clip.vision.attention.head_count", 1, kMaxWidth));
  if (f.Has("clip.vision.attention.head_count_kv")) {
    LLM_ASSIGN_OR_RETURN(int32_t kv, ReadInt(f, "clip.vision.attention.head_count_kv", 1, kMaxWidth));
    if (kv != c.n_head) return Unsupported("projector file: grouped-query attention in the tower");
  }
  if (c.n_embd % c.n_head != 0) return ModelFormatError("projector file: embedding_length is not a multiple of head_count");
  c.head_dim = c.n_embd / c.n_head;
  if (f.Has("clip.vision.attention.head_dim")) {
    LLM_ASSIGN_OR_RETURN(int32_t hd, ReadInt(f, "clip.vision.attention.head_dim", 1, kMaxWidth));
    if (hd != c.head_dim) return Unsupported("projector file: head_dim * head_count != embedding_length");
  }
  auto eps = f.GetFloat("clip.vision.attention.layer_norm_epsilon");
  if (!eps.ok()) return ModelFormatError("projector file: " + eps.status().message());
  if (!(*eps > 0.0 && *eps < 1.0)) return ModelFormatError("projector file: layer_norm_epsilon must be in (0, 1)");
  c.eps = static_cast<float>(*eps);
  LLM_ASSIGN_OR_RETURN(c.image_size, ReadInt(f, "clip.vision.image_size", 1, kMaxImageSize));
  LLM_ASSIGN_OR_RETURN(c.patch_size, ReadInt(f, "clip.vision.patch_size", 1, kMaxImageSize));
  if (!c.dynamic_size() && c.image_size % c.patch_size != 0)
    return ModelFormatError("projector file: image_size is not a multiple of patch_size");
  LLM_RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_mean", &c.image_mean));
  LLM_RETURN_IF_ERROR(ReadTriple(f, "clip.vision.image_std", &c.image_std));
  for (float s : c.image_std)
    if (s == 0.0f) return ModelFormatError("projector file: image_std holds a zero");
  c.n_layer_run = c.n_layer;
  if (c.projector == ProjectorType::kQwen25VL) return ReadQwen25VLKeys(f, c);
  if (c.projector == ProjectorType::kGemma3) {
    c.n_merge = 4;  // Gemma 3's released towers: 64 x 64 patches pooled to 16 x 16 tokens
    if (f.Has("clip.vision.projector.scale_factor")) {
      LLM_ASSIGN_OR_RETURN(c.n_merge, ReadInt(f, "clip.vision.projector.scale_factor", 1, kMaxImageSize));
    }
  } else if (c.projector == ProjectorType::kIdefics3) {
    // both required: llama.cpp refuses a factor of 1, and files without the
    // longest edge (older conversions) are tiled another way, not built here
    LLM_ASSIGN_OR_RETURN(c.n_merge, ReadInt(f, "clip.vision.projector.scale_factor", 2, kMaxImageSize));
    if (!f.Has("clip.vision.preproc_image_size"))
      return Unsupported("projector file: an Idefics3 file without clip.vision.preproc_image_size (an older "
                         "conversion) is not supported");
    LLM_ASSIGN_OR_RETURN(c.longest_edge, ReadInt(f, "clip.vision.preproc_image_size", 1, kMaxImageSize));
  } else {
    c.n_merge = 1;
    // LLaVA 1.6's slicing of large pictures is not built: refused, never
    // replaced by the fixed-size fit
    if (f.Has("clip.vision.image_grid_pinpoints"))
      return Unsupported("projector file: LLaVA 1.6's image slicing (clip.vision.image_grid_pinpoints) is not supported");
    c.n_layer_run = c.n_layer - 1;  // the second-to-last layer's output, llama.cpp's default for these files
    if (f.Has("clip.vision.feature_layer")) {
      auto fl = f.GetIntArray("clip.vision.feature_layer");
      if (!fl.ok()) return ModelFormatError("projector file: " + fl.status().message());
      if (fl->size() != 1)
        return Unsupported("projector file: " + std::to_string(fl->size()) +
                           " feature layers (stacked features) are not supported; one is");
      if ((*fl)[0] < 1 || (*fl)[0] > c.n_layer)
        return ModelFormatError("projector file: clip.vision.feature_layer " + std::to_string((*fl)[0]) +
                                " is outside [1, block_count]");
      c.n_layer_run = static_cast<int32_t>((*fl)[0]);
    }
    if (c.n_layer_run < 1) return ModelFormatError("projector file: a LLaVA tower needs at least 2 layers");
  }
  if (c.patches_per_side() % c.n_merge != 0)
    return ModelFormatError("projector file: the patch grid (" + std::to_string(c.patches_per_side()) +
                            " per side) does not divide into the merge factor " + std::to_string(c.n_merge));
  return c;
}

}  // namespace llm
