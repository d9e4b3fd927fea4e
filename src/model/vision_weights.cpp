#include "model/vision_weights.h"

#include <string>
#include <utility>

#include "model/weight_loader.h"

namespace llm {

using weights_internal::Kind;
using weights_internal::Loader;

namespace vision_weights_internal {

// v.patch_embd.weight (or `name`), GGUF {P, P, 3, E}, as the (E, 3·P·P) matrix.
Status GetPatchEmbd(const GgufFile& f, const VisionConfig& c, WeightView* out, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return ModelFormatError("projector file: missing tensor " + name);
  const std::vector<int64_t> want = {c.patch_size, c.patch_size, 3, c.n_embd};
  if (t->dims != want)
    return ModelFormatError("projector file: " + name + " has shape " + weights_internal::Shape(t->dims) +
                            ", expected " + weights_internal::Shape(want));
  const int64_t cols = 3LL * c.patch_size * c.patch_size;
  const size_t row_bytes = TensorRowBytes(t->type, cols);
  if (row_bytes == 0 || row_bytes * static_cast<uint64_t>(c.n_embd) != t->nbytes)
    return ModelFormatError("projector file: " + name + "'s rows are not whole " +
                            std::string(TensorTypeName(t->type)) + " blocks");
  out->type = t->type;
  out->data = t->data;
  out->rows = c.n_embd;
  out->cols = cols;
  out->row_bytes = row_bytes;
  return Status::Ok();
}

}  // namespace vision_weights_internal

namespace {

constexpr int64_t kMaxTextWidth = 65536;

using vision_weights_internal::GetPatchEmbd;

}  // namespace

StatusOr<VisionWeights> VisionWeights::FromGguf(const GgufFile& f, VisionConfig* config) {
  if (config->projector == ProjectorType::kQwen25VL) return vision_weights_internal::Qwen25VLFromGguf(f, config);
  VisionConfig& c = *config;
  VisionWeights w;
  Loader l(f);
  const int64_t E = c.n_embd, F = c.n_ff, N = c.n_patches();
  const bool clip = c.projector == ProjectorType::kMlp;
  // Parts of other towers (fused qkv, q/k norms, layer scales, gated
  // feed-forwards; CLIP's class token and pre-norm in a SigLIP family):
  // refused, never ignored.
  for (const char* other : {"v.blk.0.attn_qkv.weight", "v.blk.0.attn_q_norm.weight", "v.blk.0.ls1.weight",
                            "v.blk.0.ffn_gate.weight", "v.patch_embd.weight.1", "mm.1.weight", "mm.3.weight",
                            "v.image_newline", "model.image_newline"})
    if (f.FindTensor(other) != nullptr)
      return Unsupported(std::string("projector file: tensor ") + other + " is not part of the towers this build runs");
  if (!clip)
    for (const char* other : {"v.class_embd", "v.pre_ln.weight"})
      if (f.FindTensor(other) != nullptr)
        return Unsupported(std::string("projector file: tensor ") + other + " is not part of a SigLIP tower");
  LLM_RETURN_IF_ERROR(GetPatchEmbd(f, c, &w.patch_embd, "v.patch_embd.weight"));
  if (!clip || f.FindTensor("v.patch_embd.bias") != nullptr)
    LLM_RETURN_IF_ERROR(l.Get("v.patch_embd.bias", Kind::kNorm, 1, E, &w.patch_bias));
  const bool cls = clip && f.FindTensor("v.class_embd") != nullptr;
  if (cls) LLM_RETURN_IF_ERROR(l.Get("v.class_embd", Kind::kNorm, 1, E, &w.class_embd));
  LLM_RETURN_IF_ERROR(l.Get("v.position_embd.weight", Kind::kMatrix, N + (cls ? 1 : 0), E, &w.position_embd));
  if (clip && f.FindTensor("v.pre_ln.weight") != nullptr) {
    LLM_RETURN_IF_ERROR(l.Get("v.pre_ln.weight", Kind::kNorm, 1, E, &w.pre_ln));
    LLM_RETURN_IF_ERROR(l.Get("v.pre_ln.bias", Kind::kNorm, 1, E, &w.pre_ln_b));
  }
  // ffn_down {E, F} instead of {F, E}: the file's up and down are swapped
  bool swapped = false;
  if (const GgufTensorInfo* d = f.FindTensor("v.blk.0.ffn_down.weight"); d != nullptr && E != F)
    swapped = d->dims == std::vector<int64_t>{E, F};
  const std::string up = swapped ? "ffn_down" : "ffn_up", down = swapped ? "ffn_up" : "ffn_down";
  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    VisionLayerWeights& L = w.layers[i];
    const std::string p = "v.blk." + std::to_string(i) + ".";
    LLM_RETURN_IF_ERROR(l.Get(p + "ln1.weight", Kind::kNorm, 1, E, &L.ln1));
    LLM_RETURN_IF_ERROR(l.Get(p + "ln1.bias", Kind::kNorm, 1, E, &L.ln1_b));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.weight", Kind::kMatrix, E, E, &L.wq));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.bias", Kind::kNorm, 1, E, &L.bq));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.weight", Kind::kMatrix, E, E, &L.wk));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.bias", Kind::kNorm, 1, E, &L.bk));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.weight", Kind::kMatrix, E, E, &L.wv));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.bias", Kind::kNorm, 1, E, &L.bv));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_out.weight", Kind::kMatrix, E, E, &L.wo));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_out.bias", Kind::kNorm, 1, E, &L.bo));
    LLM_RETURN_IF_ERROR(l.Get(p + "ln2.weight", Kind::kNorm, 1, E, &L.ln2));
    LLM_RETURN_IF_ERROR(l.Get(p + "ln2.bias", Kind::kNorm, 1, E, &L.ln2_b));
    LLM_RETURN_IF_ERROR(l.Get(p + up + ".weight", Kind::kMatrix, F, E, &L.w_up));
    LLM_RETURN_IF_ERROR(l.Get(p + up + ".bias", Kind::kNorm, 1, F, &L.b_up));
    LLM_RETURN_IF_ERROR(l.Get(p + down + ".weight", Kind::kMatrix, E, F, &L.w_down));
    LLM_RETURN_IF_ERROR(l.Get(p + down + ".bias", Kind::kNorm, 1, E, &L.b_down));
  }
  if (!clip || f.FindTensor("v.post_ln.weight") != nullptr) {
    LLM_RETURN_IF_ERROR(l.Get("v.post_ln.weight", Kind::kNorm, 1, E, &w.post_ln));
    LLM_RETURN_IF_ERROR(l.Get("v.post_ln.bias", Kind::kNorm, 1, E, &w.post_ln_b));
  }
  // the projector's output width: dims[d] of `name` (GGUF order)
  auto out_width = [&](const char* name, int d, const std::string& want) -> Status {
    const GgufTensorInfo* t = f.FindTensor(name);
    if (t == nullptr) return ModelFormatError(std::string("projector file: missing tensor ") + name);
    if (t->dims.size() != 2 || t->dims[d] < 1 || t->dims[d] > kMaxTextWidth)
      return ModelFormatError(std::string("projector file: ") + name + " has shape " +
                              weights_internal::Shape(t->dims) + ", expected " + want);
    c.n_embd_out = static_cast<int32_t>(t->dims[d]);
    return Status::Ok();
  };
  if (c.projector == ProjectorType::kGemma3) {
    LLM_RETURN_IF_ERROR(l.Get("mm.soft_emb_norm.weight", Kind::kNorm, 1, E, &w.soft_emb_norm));
    LLM_RETURN_IF_ERROR(out_width("mm.input_projection.weight", 0, "{text width, " + std::to_string(E) + "}"));
    LLM_RETURN_IF_ERROR(l.Get("mm.input_projection.weight", Kind::kMatrix, E, c.n_embd_out, &w.input_proj));
  } else if (c.projector == ProjectorType::kIdefics3) {
    const int64_t K = E * c.n_merge * c.n_merge;
    LLM_RETURN_IF_ERROR(out_width("mm.model.fc.weight", 1, "{" + std::to_string(K) + ", text width}"));
    LLM_RETURN_IF_ERROR(l.Get("mm.model.fc.weight", Kind::kMatrix, c.n_embd_out, K, &w.mm_fc));
  } else {
    const GgufTensorInfo* m0 = f.FindTensor("mm.0.weight");
    if (m0 == nullptr || m0->dims.size() != 2 || m0->dims[1] < 1 || m0->dims[1] > 4 * kMaxTextWidth)
      return ModelFormatError("projector file: missing or misshapen tensor mm.0.weight, expected {" +
                              std::to_string(E) + ", hidden}");
    const int64_t H = m0->dims[1];
    LLM_RETURN_IF_ERROR(l.Get("mm.0.weight", Kind::kMatrix, H, E, &w.mm0));
    LLM_RETURN_IF_ERROR(l.Get("mm.0.bias", Kind::kNorm, 1, H, &w.mm0_b));
    LLM_RETURN_IF_ERROR(out_width("mm.2.weight", 1, "{" + std::to_string(H) + ", text width}"));
    LLM_RETURN_IF_ERROR(l.Get("mm.2.weight", Kind::kMatrix, c.n_embd_out, H, &w.mm2));
    LLM_RETURN_IF_ERROR(l.Get("mm.2.bias", Kind::kNorm, 1, c.n_embd_out, &w.mm2_b));
  }
  w.n_params = l.n_params() + w.patch_embd.rows * w.patch_embd.cols;
  return w;
}

StatusOr<std::unique_ptr<VisionModel>> VisionModel::FromFile(std::unique_ptr<GgufFile> file) {
  auto m = std::make_unique<VisionModel>();
  LLM_ASSIGN_OR_RETURN(m->config, VisionConfig::FromGguf(*file));
  LLM_ASSIGN_OR_RETURN(m->weights, VisionWeights::FromGguf(*file, &m->config));
  m->file = std::move(file);
  return m;
}

StatusOr<std::unique_ptr<VisionModel>> VisionModel::Open(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  return FromFile(std::move(f));
}

}  // namespace llm
