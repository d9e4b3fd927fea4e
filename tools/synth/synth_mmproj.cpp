#include "synth_mmproj.h"

#include <vector>

#include "gguf_stream_writer.h"

namespace llm::synth {
namespace {

// tiny-gemma3's tower: 32 x 32 pixels in 4 x 4 patches (an 8 x 8 grid),
// pooled 2 x 2 to 16 soft tokens of tiny-gemma3's width 64; F != E so that
// a swapped ffn_up/ffn_down would be noticed; a mean and std per channel
// that differ, so a channel mix-up changes the answer.
const std::vector<SynthVisionShape>& Shapes() {
  static const std::vector<SynthVisionShape> v = [] {
    SynthVisionShape g;
    g.text_shape = "tiny-gemma3";
    g.projector = "gemma3";
    g.n_embd = 32;
    g.n_ff = 48;
    g.n_layer = 2;
    g.n_head = 2;
    g.image_size = 32;
    g.patch_size = 4;
    g.n_merge = 2;
    g.n_embd_out = 64;
    g.eps = 1e-6f;
    g.mean[0] = 0.48f, g.mean[1] = 0.46f, g.mean[2] = 0.41f;
    g.std[0] = 0.27f, g.std[1] = 0.26f, g.std[2] = 0.28f;
    // tiny-smolvlm's: the same SigLIP size, tiles of 32 x 32 with pixel
    // shuffle 2 (16 tokens per tile, features 4·32 = 128), pictures scaled
    // to a longest edge of 64 (up to 2 x 2 tiles plus the overview).
    SynthVisionShape i = g;
    i.text_shape = "tiny-smolvlm";
    i.projector = "idefics3";
    i.n_merge = 2;
    i.longest_edge = 64;
    i.mean[0] = 0.5f, i.mean[1] = 0.45f, i.mean[2] = 0.4f;
    i.std[0] = 0.5f, i.std[1] = 0.55f, i.std[2] = 0.6f;
    // tiny-llava's: a CLIP tower (class token, pre-norm, quick GELU, no
    // patch bias, no post-norm) of 3 layers of which llama.cpp's default
    // feature layer runs 2, 32 x 32 pixels in 4 x 4 patches: 64 tokens,
    // each through a 96-wide GELU MLP; CLIP's own mean and std.
    SynthVisionShape l = g;
    l.text_shape = "tiny-llava";
    l.projector = "mlp";
    l.n_layer = 3;
    l.n_merge = 1;
    l.mlp_hidden = 96;
    l.quick_gelu = true;
    l.eps = 1e-5f;
    l.mean[0] = 0.48145466f, l.mean[1] = 0.4578275f, l.mean[2] = 0.40821073f;
    l.std[0] = 0.26862954f, l.std[1] = 0.26130258f, l.std[2] = 0.27577711f;
    // tiny-qwen2vl's Qwen2.5-VL tower: the released patch size 14 (so
    // llama.cpp's 112-pixel attention window is 4 x 4 merged cells, and a
    // picture of more than 4 cells a side has several windows), 4 layers of
    // which 1 and 3 attend fully, head_dim 16 (2D RoPE: 4 pairs per axis),
    // SwiGLU with F != E, merged to tiny-qwen2vl's width 64; CLIP's mean/std.
    SynthVisionShape q;
    q.text_shape = "tiny-qwen2vl";
    q.projector = "qwen2.5vl_merger";
    q.n_embd = 32;
    q.n_ff = 48;
    q.n_layer = 4;
    q.n_head = 2;
    q.image_size = 112;  // written as llama.cpp's converter does; the picture keeps its own size
    q.patch_size = 14;
    q.n_merge = 2;
    q.n_wa_pattern = 2;
    q.n_embd_out = 64;
    q.eps = 1e-6f;
    q.mean[0] = 0.48145466f, q.mean[1] = 0.4578275f, q.mean[2] = 0.40821073f;
    q.std[0] = 0.26862954f, q.std[1] = 0.26130258f, q.std[2] = 0.27577711f;
    // gemma3-4b-vision's: Gemma 3's released tower (SigLIP so400m: width
    // 1152, 27 layers, 16 heads, FFN 4304) at 896 x 896 pixels in 14 x 14
    // patches, pooled 4 x 4 to 256 soft tokens of width 2560: the shape the
    // encoding-time benchmark runs (bench/vision_encode_bench.py).
    SynthVisionShape gb = g;
    gb.text_shape = "gemma3-4b-vision";
    gb.n_embd = 1152;
    gb.n_ff = 4304;
    gb.n_layer = 27;
    gb.n_head = 16;
    gb.image_size = 896;
    gb.patch_size = 14;
    gb.n_merge = 4;
    gb.n_embd_out = 2560;
    gb.mean[0] = gb.mean[1] = gb.mean[2] = 0.5f;
    gb.std[0] = gb.std[1] = gb.std[2] = 0.5f;
    return std::vector<SynthVisionShape>{g, i, l, q, gb};
  }();
  return v;
}

struct Plan {
  std::string name;
  TensorType type;
  std::vector<int64_t> dims;  // GGUF order
  float mean, sd;
};

}  // namespace

const SynthVisionShape* FindSynthVisionShape(std::string_view text_shape) {
  for (const SynthVisionShape& s : Shapes())
    if (s.text_shape == text_shape) return &s;
  return nullptr;
}

namespace {

// Writes the tensors of `plan` with values drawn from options.seed and each name.
Status WritePlan(GgufStreamWriter& w, const std::vector<Plan>& plan, const SynthOptions& o, const std::string& path) {
  for (const Plan& t : plan) w.AddTensor(t.name, t.type, t.dims);
  LLM_RETURN_IF_ERROR(w.Begin(path));
  for (const Plan& t : plan) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    SynthNormals(o.seed * 0x100000001b3ull ^ SynthNameKey(t.name), n, t.sd, v.data());
    for (float& x : v) x += t.mean;
    std::vector<char> bytes(static_cast<size_t>(n) * 4);
    SynthEncode(t.type, v.data(), n, bytes.data());
    LLM_RETURN_IF_ERROR(w.Write(bytes.data(), static_cast<size_t>(n) * (t.type == TensorType::F32 ? 4 : 2)));
  }
  return w.Finish();
}

// Qwen2.5-VL's projector file, keys and tensors as llama.cpp's converter
// writes them (model/vision_weights.h lists the tensors).
Status WriteQwen25VL(const SynthVisionShape& s, const SynthOptions& o, const std::string& path) {
  GgufStreamWriter w;
  w.AddString("general.architecture", "clip");
  w.AddString("general.name", "synth-" + s.text_shape + "-mmproj");
  w.AddUint32("general.file_type", o.type == TensorType::F32 ? 0 : o.type == TensorType::F16 ? 1 : 32);
  w.AddString("clip.projector_type", s.projector);
  w.AddBool("clip.has_vision_encoder", true);
  w.AddBool("clip.use_silu", true);
  w.AddUint32("clip.vision.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32("clip.vision.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32("clip.vision.block_count", static_cast<uint32_t>(s.n_layer));
  w.AddUint32("clip.vision.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.AddFloat32("clip.vision.attention.layer_norm_epsilon", s.eps);
  w.AddUint32("clip.vision.projection_dim", static_cast<uint32_t>(s.n_embd_out));
  w.AddUint32("clip.vision.image_size", static_cast<uint32_t>(s.image_size));
  w.AddUint32("clip.vision.patch_size", static_cast<uint32_t>(s.patch_size));
  w.AddUint32("clip.vision.spatial_merge_size", static_cast<uint32_t>(s.n_merge));
  w.AddUint32("clip.vision.n_wa_pattern", static_cast<uint32_t>(s.n_wa_pattern));
  w.AddFloatArray("clip.vision.image_mean", {s.mean[0], s.mean[1], s.mean[2]});
  w.AddFloatArray("clip.vision.image_std", {s.std[0], s.std[1], s.std[2]});

  const int64_t E = s.n_embd, F = s.n_ff, P = s.patch_size, M = 4 * E;
  const TensorType f32 = TensorType::F32;
  std::vector<Plan> plan;
  plan.push_back({"v.patch_embd.weight", o.type, {P, P, 3, E}, 0.0f, 0.1f});
  plan.push_back({"v.patch_embd.weight.1", o.type, {P, P, 3, E}, 0.0f, 0.1f});
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    plan.push_back({p + "ln1.weight", f32, {E}, 1.0f, 0.1f});
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      // q and k larger: scores of a few units, so where a patch attends shows
      plan.push_back({p + m + ".weight", o.type, {E, E}, 0.0f, m[5] == 'q' || m[5] == 'k' ? 0.35f : 0.2f});
      plan.push_back({p + m + ".bias", f32, {E}, 0.0f, 0.1f});
    }
    plan.push_back({p + "ln2.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({p + "ffn_gate.weight", o.type, {E, F}, 0.0f, 0.2f});
    plan.push_back({p + "ffn_gate.bias", f32, {F}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_up.weight", o.type, {E, F}, 0.0f, 0.2f});
    plan.push_back({p + "ffn_up.bias", f32, {F}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_down.weight", o.type, {F, E}, 0.0f, 0.15f});
    plan.push_back({p + "ffn_down.bias", f32, {E}, 0.0f, 0.1f});
  }
  plan.push_back({"v.post_ln.weight", f32, {E}, 1.0f, 0.1f});
  plan.push_back({"mm.0.weight", o.type, {M, M}, 0.0f, 0.1f});
  plan.push_back({"mm.0.bias", f32, {M}, 0.0f, 0.1f});
  plan.push_back({"mm.2.weight", o.type, {M, s.n_embd_out}, 0.0f, 0.1f});
  plan.push_back({"mm.2.bias", f32, {s.n_embd_out}, 0.0f, 0.1f});
  return WritePlan(w, plan, o, path);
}

}  // namespace

Status WriteSynthMmproj(const SynthVisionShape& s, const SynthOptions& o, const std::string& path) {
  const bool gemma3 = s.projector == "gemma3", idefics3 = s.projector == "idefics3", mlp = s.projector == "mlp";
  if (o.type != TensorType::F32 && o.type != TensorType::F16 && o.type != TensorType::BF16)
    return InvalidArgument("llm-synth: a projector file's matrices are F32, F16 or BF16");
  if (s.projector == "qwen2.5vl_merger") return WriteQwen25VL(s, o, path);
  if (!gemma3 && !idefics3 && !mlp) return Unsupported("llm-synth: projector '" + s.projector + "' is not synthesized");
  GgufStreamWriter w;
  w.AddString("general.architecture", "clip");
  w.AddString("general.name", "synth-" + s.text_shape + "-mmproj");
  w.AddUint32("general.file_type", o.type == TensorType::F32 ? 0 : o.type == TensorType::F16 ? 1 : 32);
  w.AddString("clip.projector_type", s.projector);
  w.AddBool("clip.has_vision_encoder", true);
  w.AddBool("clip.use_gelu", !s.quick_gelu);
  w.AddUint32("clip.vision.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32("clip.vision.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32("clip.vision.block_count", static_cast<uint32_t>(s.n_layer));
  w.AddUint32("clip.vision.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.AddFloat32("clip.vision.attention.layer_norm_epsilon", s.eps);
  w.AddUint32("clip.vision.projection_dim", static_cast<uint32_t>(s.n_embd_out));
  w.AddUint32("clip.vision.image_size", static_cast<uint32_t>(s.image_size));
  w.AddUint32("clip.vision.patch_size", static_cast<uint32_t>(s.patch_size));
  if (!mlp) w.AddUint32("clip.vision.projector.scale_factor", static_cast<uint32_t>(s.n_merge));
  if (idefics3) w.AddUint32("clip.vision.preproc_image_size", static_cast<uint32_t>(s.longest_edge));
  w.AddFloatArray("clip.vision.image_mean", {s.mean[0], s.mean[1], s.mean[2]});
  w.AddFloatArray("clip.vision.image_std", {s.std[0], s.std[1], s.std[2]});

  const int64_t E = s.n_embd, F = s.n_ff, P = s.patch_size, G = s.image_size / s.patch_size;
  const TensorType f32 = TensorType::F32;
  std::vector<Plan> plan;
  plan.push_back({"v.patch_embd.weight", o.type, {P, P, 3, E}, 0.0f, 0.2f});
  if (!mlp) plan.push_back({"v.patch_embd.bias", f32, {E}, 0.0f, 0.1f});
  if (mlp) plan.push_back({"v.class_embd", f32, {E}, 0.0f, 0.5f});
  // F32 whatever the matrices are: the learned positions are added as they are
  plan.push_back({"v.position_embd.weight", f32, {E, G * G + (mlp ? 1 : 0)}, 0.0f, 0.5f});
  if (mlp) {
    plan.push_back({"v.pre_ln.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({"v.pre_ln.bias", f32, {E}, 0.0f, 0.1f});
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    plan.push_back({p + "ln1.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({p + "ln1.bias", f32, {E}, 0.0f, 0.1f});
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      plan.push_back({p + m + ".weight", o.type, {E, E}, 0.0f, 0.2f});
      plan.push_back({p + m + ".bias", f32, {E}, 0.0f, 0.1f});
    }
    plan.push_back({p + "ln2.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({p + "ln2.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_up.weight", o.type, {E, F}, 0.0f, 0.2f});
    plan.push_back({p + "ffn_up.bias", f32, {F}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_down.weight", o.type, {F, E}, 0.0f, 0.15f});
    plan.push_back({p + "ffn_down.bias", f32, {E}, 0.0f, 0.1f});
  }
  if (!mlp) {
    plan.push_back({"v.post_ln.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({"v.post_ln.bias", f32, {E}, 0.0f, 0.1f});
  }
  if (gemma3) {
    plan.push_back({"mm.soft_emb_norm.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({"mm.input_projection.weight", o.type, {s.n_embd_out, E}, 0.0f, 0.2f});
  } else if (idefics3) {
    plan.push_back({"mm.model.fc.weight", o.type, {E * s.n_merge * s.n_merge, s.n_embd_out}, 0.0f, 0.1f});
  } else {
    plan.push_back({"mm.0.weight", o.type, {E, s.mlp_hidden}, 0.0f, 0.2f});
    plan.push_back({"mm.0.bias", f32, {s.mlp_hidden}, 0.0f, 0.1f});
    plan.push_back({"mm.2.weight", o.type, {s.mlp_hidden, s.n_embd_out}, 0.0f, 0.15f});
    plan.push_back({"mm.2.bias", f32, {s.n_embd_out}, 0.0f, 0.1f});
  }

  for (const Plan& t : plan) w.AddTensor(t.name, t.type, t.dims);
  LLM_RETURN_IF_ERROR(w.Begin(path));
  for (const Plan& t : plan) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    SynthNormals(o.seed * 0x100000001b3ull ^ SynthNameKey(t.name), n, t.sd, v.data());
    for (float& x : v) x += t.mean;
    std::vector<char> bytes(static_cast<size_t>(n) * 4);
    SynthEncode(t.type, v.data(), n, bytes.data());
    LLM_RETURN_IF_ERROR(w.Write(bytes.data(), static_cast<size_t>(n) * (t.type == TensorType::F32 ? 4 : 2)));
  }
  return w.Finish();
}

}  // namespace llm::synth
