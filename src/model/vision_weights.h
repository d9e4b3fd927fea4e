// The tensors of a projector file (vision_config.h), as views into its
// mapping, named as llama.cpp's converter names them:
//
//   v.patch_embd.weight   GGUF {P, P, 3, E}: a P x P stride-P convolution,
//                         read as the (E, 3·P·P) matrix over (channel, y, x)
//   v.patch_embd.bias     {E} (absent in a CLIP tower)
//   v.class_embd          {E}: CLIP's class token (LLaVA), the sequence's first row
//   v.position_embd.weight {E, N (+1)}: one learned row per patch (the class token's first)
//   v.pre_ln              LayerNorm weight and bias {E} (CLIP: before the first layer)
//   v.blk.i.ln1 / ln2     LayerNorm weight and bias {E}
//   v.blk.i.attn_q/k/v/out, ffn_up/down   weight (out, in) and bias
//   v.post_ln             LayerNorm weight and bias {E} (optional for LLaVA)
// and the projector's, per family:
//   gemma3    mm.soft_emb_norm.weight {E} (RMSNorm weight, used as stored),
//             mm.input_projection.weight {D, E}: token = pooled·W, D the text width
//   idefics3  mm.model.fc.weight {E·k², D}: token = shuffled·Wᵀ (no bias)
//   mlp       mm.0.weight {E, H} + bias {H}, mm.2.weight {H, D} + bias {D}
//
// Some converted Gemma 3 files name ffn_up and ffn_down the other way
// round; a file whose ffn_down is {E, F} (and E != F) is read swapped, as
// llama.cpp does.
//
// Qwen2.5-VL (vision_weights_qwen25vl.cpp) instead: two patch kernels
// v.patch_embd.weight and v.patch_embd.weight.1 (the video model's two
// frames; a still picture goes through both and they are summed), no patch
// bias and no learned positions (2D RoPE); ln1/ln2 are RMSNorm weights
// without biases; ffn_gate beside ffn_up (SwiGLU, biases on all three);
// v.post_ln the merger's RMSNorm; mm.0 (4E, 4E) and mm.2 (D, 4E) with
// biases the merger's MLP over each 2 x 2 group of patches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/vision_config.h"
#include "model/weights.h"
#include "util/status.h"

namespace llm {

struct VisionLayerWeights {
  WeightView ln1, ln1_b;        // (E)
  WeightView wq, bq, wk, bk, wv, bv, wo, bo;  // (E, E), (E)
  WeightView ln2, ln2_b;        // (E)
  WeightView w_up, b_up;        // (F, E), (F)
  WeightView w_down, b_down;    // (E, F), (E)
  WeightView w_gate, b_gate;    // Qwen2.5-VL: (F, E), (F)
};

struct VisionWeights {
  WeightView patch_embd;        // (E, 3·P·P)
  WeightView patch_bias;        // (E); empty for CLIP
  WeightView class_embd;        // (E); empty but for CLIP
  WeightView position_embd;     // (N + class, E)
  WeightView pre_ln, pre_ln_b;  // (E); empty but for CLIP
  std::vector<VisionLayerWeights> layers;
  WeightView post_ln, post_ln_b;  // (E); may be empty for LLaVA
  // gemma3
  WeightView soft_emb_norm;     // (E)
  WeightView input_proj;        // (E, D): rows are the tower's features, columns the text model's
  // idefics3
  WeightView mm_fc;             // (D, E·k²)
  // mlp
  WeightView mm0, mm0_b;        // (H, E), (H)
  WeightView mm2, mm2_b;        // (D, H), (D)
  // Qwen2.5-VL
  WeightView patch_embd1;       // (E, 3·P·P): the second patch kernel
  WeightView merger_w0, merger_b0;  // (4E, 4E), (4E)
  WeightView merger_w1, merger_b1;  // (D, 4E), (D)
  int64_t n_params = 0;

  // Sets config->n_embd_out from the projector's last matrix.
  static StatusOr<VisionWeights> FromGguf(const GgufFile& f, VisionConfig* config);
};

namespace vision_weights_internal {
Status GetPatchEmbd(const GgufFile& f, const VisionConfig& c, WeightView* out, const std::string& name);
StatusOr<VisionWeights> Qwen25VLFromGguf(const GgufFile& f, VisionConfig* config);
}  // namespace vision_weights_internal

// A projector file opened: the mapping, its config and its weights.
struct VisionModel {
  std::unique_ptr<GgufFile> file;
  VisionConfig config;
  VisionWeights weights;

  static StatusOr<std::unique_ptr<VisionModel>> Open(const std::string& path);
  static StatusOr<std::unique_ptr<VisionModel>> FromFile(std::unique_ptr<GgufFile> file);
};

}  // namespace llm
