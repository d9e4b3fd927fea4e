// Synthetic projector files (`--mmproj`, general.architecture "clip"): the
// vision tower and projector of a vision-language family with random
// weights, keys and tensor names as llama.cpp's converter writes them
// (model/vision_config.h, model/vision_weights.h), paired with a text shape
// of synth_model.h whose n_embd is the projector's output width.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "synth_model.h"
#include "util/status.h"

namespace llm::synth {

struct SynthVisionShape {
  std::string text_shape;       // the synth_model.h shape it pairs with
  std::string projector;        // clip.projector_type: "gemma3", "idefics3", "mlp" or "qwen2.5vl_merger"
  int32_t n_embd = 0;           // tower width E
  int32_t n_ff = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t image_size = 0;       // S
  int32_t patch_size = 0;       // P
  int32_t n_merge = 0;          // Gemma 3's pooling kernel, Idefics3's shuffle (projector.scale_factor)
  int32_t longest_edge = 0;     // Idefics3: clip.vision.preproc_image_size
  int32_t mlp_hidden = 0;       // mlp: mm.0's output width H
  bool quick_gelu = false;      // mlp: CLIP's quick GELU (clip.use_gelu false)
  int32_t n_embd_out = 0;       // the text model's n_embd
  float eps = 1e-6f;
  float mean[3] = {0.5f, 0.5f, 0.5f};
  float std[3] = {0.5f, 0.5f, 0.5f};
  int32_t n_wa_pattern = 0;     // Qwen2.5-VL: every n-th layer attends fully
};

// The projector shape paired with text shape `text_shape` ("tiny-gemma3",
// "tiny-smolvlm", "tiny-llava", "tiny-qwen2vl"),
// nullptr when it has none.
const SynthVisionShape* FindSynthVisionShape(std::string_view text_shape);

// Writes the projector file: matrices in options.type (F32, F16 or BF16),
// norms and biases F32, the same file for the same options.seed.
Status WriteSynthMmproj(const SynthVisionShape& shape, const SynthOptions& options, const std::string& path);

}  // namespace llm::synth
