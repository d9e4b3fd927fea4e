// Qwen2.5-VL's tensors in a projector file (vision_weights.h has the list).
#include <string>

#include "model/vision_weights.h"
#include "model/weight_loader.h"

namespace llm::vision_weights_internal {

using weights_internal::Kind;
using weights_internal::Loader;

StatusOr<VisionWeights> Qwen25VLFromGguf(const GgufFile& f, VisionConfig* config) {
  VisionConfig& c = *config;
  VisionWeights w;
  Loader l(f);
  const int64_t E = c.n_embd, F = c.n_ff, M = 4 * E;
  // Parts other towers have and this one does not: refused, never ignored.
  for (const char* other : {"v.class_embd", "v.pre_ln.weight", "v.patch_embd.bias", "v.position_embd.weight",
                            "v.blk.0.attn_qkv.weight", "v.blk.0.attn_q_norm.weight", "v.blk.0.ls1.weight",
                            "v.blk.0.ln1.bias", "v.post_ln.bias", "mm.input_projection.weight"})
    if (f.FindTensor(other) != nullptr)
      return Unsupported(std::string("projector file: tensor ") + other + " is not part of a Qwen2.5-VL tower");
  LLM_RETURN_IF_ERROR(GetPatchEmbd(f, c, &w.patch_embd, "v.patch_embd.weight"));
  LLM_RETURN_IF_ERROR(GetPatchEmbd(f, c, &w.patch_embd1, "v.patch_embd.weight.1"));
  // ffn_down {E, F} instead of {F, E}: the file's up and down are swapped (as llama.cpp reads it)
  bool swapped = false;
  if (const GgufTensorInfo* d = f.FindTensor("v.blk.0.ffn_down.weight"); d != nullptr && E != F)
    swapped = d->dims == std::vector<int64_t>{E, F};
  const std::string up = swapped ? "ffn_down" : "ffn_up", down = swapped ? "ffn_up" : "ffn_down";
  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    VisionLayerWeights& L = w.layers[i];
    const std::string p = "v.blk." + std::to_string(i) + ".";
    LLM_RETURN_IF_ERROR(l.Get(p + "ln1.weight", Kind::kNorm, 1, E, &L.ln1));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.weight", Kind::kMatrix, E, E, &L.wq));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.bias", Kind::kNorm, 1, E, &L.bq));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.weight", Kind::kMatrix, E, E, &L.wk));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.bias", Kind::kNorm, 1, E, &L.bk));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.weight", Kind::kMatrix, E, E, &L.wv));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.bias", Kind::kNorm, 1, E, &L.bv));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_out.weight", Kind::kMatrix, E, E, &L.wo));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_out.bias", Kind::kNorm, 1, E, &L.bo));
    LLM_RETURN_IF_ERROR(l.Get(p + "ln2.weight", Kind::kNorm, 1, E, &L.ln2));
    if (f.FindTensor(p + "ln2.bias") != nullptr)
      return Unsupported("projector file: tensor " + p + "ln2.bias is not part of a Qwen2.5-VL tower");
    LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate.weight", Kind::kMatrix, F, E, &L.w_gate));
    LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate.bias", Kind::kNorm, 1, F, &L.b_gate));
    LLM_RETURN_IF_ERROR(l.Get(p + up + ".weight", Kind::kMatrix, F, E, &L.w_up));
    LLM_RETURN_IF_ERROR(l.Get(p + up + ".bias", Kind::kNorm, 1, F, &L.b_up));
    LLM_RETURN_IF_ERROR(l.Get(p + down + ".weight", Kind::kMatrix, E, F, &L.w_down));
    LLM_RETURN_IF_ERROR(l.Get(p + down + ".bias", Kind::kNorm, 1, E, &L.b_down));
  }
  LLM_RETURN_IF_ERROR(l.Get("v.post_ln.weight", Kind::kNorm, 1, E, &w.post_ln));
  LLM_RETURN_IF_ERROR(l.Get("mm.0.weight", Kind::kMatrix, M, M, &w.merger_w0));
  LLM_RETURN_IF_ERROR(l.Get("mm.0.bias", Kind::kNorm, 1, M, &w.merger_b0));
  const GgufTensorInfo* proj = f.FindTensor("mm.2.weight");
  if (proj == nullptr) return ModelFormatError("projector file: missing tensor mm.2.weight");
  if (proj->dims.size() != 2 || proj->dims[1] < 1 || proj->dims[1] > 65536)
    return ModelFormatError("projector file: mm.2.weight has shape " + weights_internal::Shape(proj->dims) +
                            ", expected {" + std::to_string(M) + ", text width}");
  c.n_embd_out = static_cast<int32_t>(proj->dims[1]);
  LLM_RETURN_IF_ERROR(l.Get("mm.2.weight", Kind::kMatrix, c.n_embd_out, M, &w.merger_w1));
  LLM_RETURN_IF_ERROR(l.Get("mm.2.bias", Kind::kNorm, 1, c.n_embd_out, &w.merger_b1));
  w.n_params = l.n_params() + 2 * w.patch_embd.rows * w.patch_embd.cols;
  return w;
}

}  // namespace llm::vision_weights_internal
