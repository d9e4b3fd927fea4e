// ModelConfig::FromGguf: Llama / Qwen2 / Qwen3 / Phi-3 / Gemma 2 / Gemma 3 hyper-parameters
// from GGUF metadata.
//
// Gemma 3 follows llama.cpp's reading of its GGUF (the files come from its
// converter): norm weights already hold Gemma's (1 + w), so RMSNorm is the
// plain x * w; RoPE is NEOX-style; local layers use base 10000 unless
// rope.freq_base_swa says otherwise, and no RoPE scaling; the attention scale
// is 1/sqrt(head_dim) except for the 27B (query_pre_attn_scalar =
// n_embd / n_head there), told apart by its 62 layers as llama.cpp does.
#include "model/config.h"

#include <cmath>
#include <string>

#include "model/gguf.h"

namespace llm {
namespace {

// Upper bounds far beyond any real model; they keep later size arithmetic
// (n_head * head_dim, n_vocab * n_embd, ...) well inside int32/int64.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxEmbd = 65536;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxFf = 1 << 20;
constexpr int64_t kMaxVocab = 4 << 20;
constexpr int64_t kMaxCtx = 1 << 24;

class Reader {
 public:
  Reader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string Key(const char* suffix) const { return arch_ + "." + suffix; }

  // An integer key in [lo, hi]; `def` when absent (nullopt def: required).
  Status Int(const char* suffix, int64_t lo, int64_t hi, std::optional<int64_t> def,
             int32_t* out) const {
    std::string key = Key(suffix);
    if (!f_.Has(key)) {
      if (!def) return ModelFormatError("missing key " + key);
      *out = static_cast<int32_t>(*def);
      return Status::Ok();
    }
    LLM_ASSIGN_OR_RETURN(int64_t v, f_.GetInt(key));
    if (v < lo || v > hi) {
      return ModelFormatError("key " + key + " = " + std::to_string(v) + " is outside [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  }

  // A float key in (lo, hi]; unchanged when absent.
  Status Float(const char* suffix, double lo, double hi, float* out) const {
    std::string key = Key(suffix);
    if (!f_.Has(key)) return Status::Ok();
    LLM_ASSIGN_OR_RETURN(double v, f_.GetFloat(key));
    if (!std::isfinite(v) || v <= lo || v > hi) {
      return ModelFormatError("key " + key + " = " + std::to_string(v) + " is outside (" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<float>(v);
    return Status::Ok();
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

Status Check(bool ok, const std::string& what) {
  return ok ? Status::Ok() : ModelFormatError(what);
}

// A soft-cap key, unchanged when absent; 0 (as some converters write for
// "none") disables the cap, as in llama.cpp.
Status ReadCap(const GgufFile& file, const std::string& key, float* out) {
  if (!file.Has(key)) return Status::Ok();
  LLM_ASSIGN_OR_RETURN(double cap, file.GetFloat(key));
  if (!(cap >= 0.0 && cap <= 1e6)) return ModelFormatError("key " + key + " is outside [0, 1e6]");
  *out = static_cast<float>(cap);
  return Status::Ok();
}

// The Gemma 3 extras on top of the common keys read by FromGguf.
Status ReadGemma3(const GgufFile& file, const Reader& r, ModelConfig* c) {
  c->rope_style = RopeStyle::kNeox;
  c->ffn_act = FfnActivation::kGeluTanh;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->qk_norm = true;
  c->post_norms = true;
  if (c->n_layer == 62) c->attn_scale = 1.0f / std::sqrt(static_cast<float>(c->n_embd / c->n_head));

  // No window (key absent or 0): every layer global, like llama.cpp.
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window", 0, kMaxCtx, int64_t{0}, &c->sliding_window));
  c->swa_pattern = 6;
  const std::string pattern_key = r.Key("attention.sliding_window_pattern");
  if (file.ArrayLength(pattern_key)) {
    return Unsupported(pattern_key + " as a per-layer array is not supported (only a period)");
  }
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window_pattern", 0, kMaxLayers, int64_t{6}, &c->swa_pattern));
  LLM_RETURN_IF_ERROR(r.Float("rope.freq_base_swa", 0.0, 1e12, &c->rope_theta_swa));
  return ReadCap(file, r.Key("final_logit_softcapping"), &c->final_logit_softcap);
}

// EmbeddingGemma (`gemma-embedding`) as llama.cpp reads it: Gemma 3's
// block run bidirectionally (causal = false); its local layers see a
// symmetric window, keys within sliding_window / 2 of the query on either
// side (the key is required); the attention scale is always
// 1/sqrt(head_dim); no logit cap. The optional sentence-transformers dense
// projections (dense_2: n_embd -> dense_2_feat_out, dense_3: back to n_embd,
// no biases) are applied to the pooled vector; both or neither.
Status ReadGemmaEmbedding(const GgufFile& file, const Reader& r, ModelConfig* c) {
  c->causal = false;
  c->attn_scale = 0.0f;
  c->final_logit_softcap = 0.0f;
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window", 1, kMaxCtx, std::nullopt, &c->sliding_window));
  const GgufTensorInfo* d2 = file.FindTensor("dense_2.weight");
  const GgufTensorInfo* d3 = file.FindTensor("dense_3.weight");
  if ((d2 == nullptr) != (d3 == nullptr))
    return Unsupported("gemma-embedding with one of dense_2 / dense_3 (both projections or neither)");
  if (d2 == nullptr) return Status::Ok();
  if (d2->dims.size() != 2 || d3->dims.size() != 2 || d2->dims[0] != static_cast<uint64_t>(c->n_embd) ||
      d3->dims[1] != static_cast<uint64_t>(c->n_embd) || d2->dims[1] != d3->dims[0] || d2->dims[1] < 1 ||
      d2->dims[1] > static_cast<uint64_t>(kMaxFf))
    return ModelFormatError("dense_2 / dense_3 are not (n_embd -> m) and (m -> n_embd) projections");
  c->n_dense = static_cast<int32_t>(d2->dims[1]);
  for (const char* k : {"dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in", "dense_3_feat_out"}) {
    if (!file.Has(r.Key(k))) continue;
    LLM_ASSIGN_OR_RETURN(int64_t v, file.GetInt(r.Key(k)));
    const bool embd_side = k == std::string("dense_2_feat_in") || k == std::string("dense_3_feat_out");
    if (v != (embd_side ? c->n_embd : c->n_dense))
      return ModelFormatError("key " + r.Key(k) + " = " + std::to_string(v) + " disagrees with the dense tensors");
  }
  return Status::Ok();
}

// Gemma 2 as llama.cpp reads it: Gemma 3's block without the q/k norms, with
// attention logits soft-capped, layers alternating local / global (even
// layers local: a period of 2), one RoPE base for both. Absent keys take
// llama.cpp's defaults: window 4096, caps 50 (attention) and 30 (logits).
Status ReadGemma2(const GgufFile& file, const Reader& r, ModelConfig* c) {
  c->rope_style = RopeStyle::kNeox;
  c->ffn_act = FfnActivation::kGeluTanh;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->post_norms = true;
  if (c->n_layer == 46) c->attn_scale = 1.0f / std::sqrt(static_cast<float>(c->n_embd / c->n_head));  // 27B
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window", 0, kMaxCtx, int64_t{4096}, &c->sliding_window));
  c->swa_pattern = 2;
  c->rope_theta_swa = c->rope_theta;
  if (c->rope_scaling.type != RopeScalingType::kNone)
    return Unsupported("gemma2 with RoPE scaling is not supported (local layers would drop it)");
  c->attn_logit_softcap = 50.0f;
  c->final_logit_softcap = 30.0f;
  LLM_RETURN_IF_ERROR(ReadCap(file, r.Key("attn_logit_softcapping"), &c->attn_logit_softcap));
  return ReadCap(file, r.Key("final_logit_softcapping"), &c->final_logit_softcap);
}

// Phi-3 as llama.cpp reads it: NEOX RoPE over rope.dimension_count of each
// head (partial rotary: Phi-4-mini rotates 96 of 128), q/k/v fused in
// attn_qkv and gate/up fused in ffn_up (no ffn_gate). Its
// attention.sliding_window is not applied: llama.cpp reads the key for phi3
// and then attends to every key (tests/data/families/phi3.json shows a
// prompt longer than the window matching it); llmrt does the same.
// LongRoPE (Phi-3.5 / Phi-4-mini): rope_factors_long and
// rope_factors_short, both or neither (has_longrope; the choice between them
// is RopeFactorsFor's, rope_freq.h), with rope.scaling.attn_factor.
Status ReadPhi3(const GgufFile& file, ModelConfig* c) {
  c->rope_style = RopeStyle::kNeox;
  c->fused_gate_up = file.FindTensor("blk.0.ffn_gate.weight") == nullptr;
  const bool has_long = file.FindTensor("rope_factors_long.weight") != nullptr;
  const bool has_short = file.FindTensor("rope_factors_short.weight") != nullptr;
  if (has_long != has_short)
    return Unsupported("phi3 LongRoPE needs both rope_factors_long and rope_factors_short (the file has one)");
  if (has_long && c->has_rope_freqs) return Unsupported("phi3 with both rope_freqs and LongRoPE factors");
  if (has_long && c->rope_scaling.type != RopeScalingType::kNone)
    return Unsupported("phi3 LongRoPE together with a rope.scaling.type is not supported");
  c->has_longrope = has_long;
  return Status::Ok();
}

// Qwen2 / Qwen3 as llama.cpp reads them: their converter keeps the HF q/k
// row order, so RoPE rotates the two halves of each head (NEOX); Qwen2 adds
// biases to q, k and v (qkv_bias, read from the tensors for every family);
// Qwen3 RMS-norms each q and k head before RoPE. A YaRN file loads and is
// refused when a backend builds its RoPE table (model/rope_freq.h), with a
// message, like any family's.
// qwen2vl's rope.dimension_sections (config.h, mrope_sections), required
// as llama.cpp requires it: 1 to 4 integers (missing ones 0), none
// negative, summing to 1 .. head_dim (ggml's rope_multi asserts the sum
// fits the head; a sum under rope_dim / 2 repeats the sections).
Status ReadMropeSections(const GgufFile& file, const Reader& r, ModelConfig* c) {
  const std::string key = r.Key("rope.dimension_sections");
  if (!file.Has(key)) return ModelFormatError("missing key " + key + " (M-RoPE sections t, h, w, e)");
  LLM_ASSIGN_OR_RETURN(std::vector<int64_t> v, file.GetIntArray(key));
  if (v.empty() || v.size() > 4)
    return ModelFormatError(key + " has " + std::to_string(v.size()) + " entries; 1 to 4 (t, h, w, e) allowed");
  int64_t sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > c->head_dim)
      return ModelFormatError(key + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is outside [0, " +
                              std::to_string(c->head_dim) + "]");
    sum += v[i];
    c->mrope_sections[i] = static_cast<int32_t>(v[i]);
  }
  if (sum < 1 || sum > c->head_dim)
    return ModelFormatError(key + " sums to " + std::to_string(sum) + "; 1 to head_dim (" +
                            std::to_string(c->head_dim) + ") allowed");
  if (c->rope_scaling.type == RopeScalingType::kYarn || c->rope_scaling.type == RopeScalingType::kLlama3 ||
      c->has_rope_freqs)
    return Unsupported(key + " with YaRN, llama3 scaling or rope_freqs is not supported");
  return Status::Ok();
}

void ReadQwen(ModelConfig* c) {
  c->rope_style = RopeStyle::kNeox;
  c->qk_norm = c->arch_kind == ModelArch::kQwen3 || c->arch_kind == ModelArch::kQwen3Moe;
}

// gpt-oss as llama.cpp reads `gpt-oss` (config.h): NEOX RoPE, the window
// (attention.sliding_window, required) on even layers (a period of 2, or
// the file's attention.sliding_window_pattern), the same rotation with its
// YaRN on every layer, attention sinks, biases on the output projection.
// The MoE keys are ReadExperts'.
Status ReadGptOss(const GgufFile& file, const Reader& r, ModelConfig* c) {
  c->rope_style = RopeStyle::kNeox;
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window", 1, kMaxCtx, std::nullopt, &c->sliding_window));
  const std::string pattern_key = r.Key("attention.sliding_window_pattern");
  if (file.ArrayLength(pattern_key))
    return Unsupported(pattern_key + " as a per-layer array is not supported (only a period)");
  c->swa_pattern = 2;
  LLM_RETURN_IF_ERROR(r.Int("attention.sliding_window_pattern", 0, kMaxLayers, int64_t{2}, &c->swa_pattern));
  c->rope_theta_swa = c->rope_theta;
  c->swa_rope_global = true;
  float base_swa = c->rope_theta;
  LLM_RETURN_IF_ERROR(r.Float("rope.freq_base_swa", 0.0, 1e12, &base_swa));
  if (base_swa != c->rope_theta)
    return Unsupported(r.Key("rope.freq_base_swa") + " different from rope.freq_base is not supported for gpt-oss");
  c->attn_sinks = true;
  c->out_bias = true;
  c->ffn_act = FfnActivation::kSwigluOai;
  return Status::Ok();
}

// Mixture of Experts as llama.cpp runs Mixtral (`llama` with expert_count)
// and qwen3moe: softmax gating, top n_expert_used, the chosen weights
// renormalised. Other gating functions (expert_gating_func) and shared
// experts are refused, never run as something else.
Status ReadExperts(const GgufFile& file, const Reader& r, ModelConfig* c) {
  LLM_RETURN_IF_ERROR(r.Int("expert_count", 0, 1024, int64_t{0}, &c->n_expert));
  const bool gpt_oss = c->arch_kind == ModelArch::kGptOss;
  const bool qwen_moe = c->arch_kind == ModelArch::kQwen3Moe || c->arch_kind == ModelArch::kQwen2Moe;
  if ((qwen_moe || gpt_oss) && c->n_expert == 0) return ModelFormatError(c->arch + " without experts");
  if (c->n_expert == 0) return Status::Ok();
  if (c->arch_kind != ModelArch::kLlama && !qwen_moe && !gpt_oss)
    return Unsupported("experts in a " + c->arch + " model are not supported");
  LLM_RETURN_IF_ERROR(r.Int("expert_used_count", 1, c->n_expert, std::nullopt, &c->n_expert_used));
  c->n_ff_exp = c->n_ff;
  if (gpt_oss) {
    // llama.cpp's gpt-oss: top-k of the biased router logits, softmax over
    // those k (its SOFTMAX_WEIGHT gating), not renormalised, no scale;
    // biased experts with the clamped SwiGLU.
    c->expert_softmax_topk = true;
    c->expert_weights_norm = false;
    c->expert_bias = true;
  }
  if (qwen_moe || gpt_oss)
    LLM_RETURN_IF_ERROR(r.Int("expert_feed_forward_length", 1, kMaxFf, std::nullopt, &c->n_ff_exp));
  // llama.cpp's gpt-oss gating is fixed (it reads no gating, weight-norm or
  // scale key for it), and so is ours; a shared expert is refused below.
  if (gpt_oss && file.FindTensor("blk.0.ffn_gate_shexp.weight") != nullptr)
    return Unsupported("shared experts are not supported outside qwen2moe");
  if (gpt_oss) return Status::Ok();
  if (c->arch_kind == ModelArch::kQwen2Moe) {
    // Qwen1.5-MoE / Qwen2-MoE, as llama.cpp runs them: the chosen weights
    // are not renormalised, and a shared expert (its own FFN length) runs
    // for every token, its output scaled by sigmoid(xn · ffn_gate_inp_shexp).
    c->expert_weights_norm = false;
    LLM_RETURN_IF_ERROR(r.Int("expert_shared_feed_forward_length", 1, kMaxFf, std::nullopt, &c->n_ff_shexp));
  }
  int32_t gating = 1;  // llama.cpp: 1 softmax, 2 sigmoid
  LLM_RETURN_IF_ERROR(r.Int("expert_gating_func", 0, 16, int64_t{1}, &gating));
  if (gating != 1) return Unsupported(r.Key("expert_gating_func") + " " + std::to_string(gating) + " (only softmax)");
  if (c->arch_kind != ModelArch::kQwen2Moe &&
      (file.Has(r.Key("expert_shared_count")) || file.FindTensor("blk.0.ffn_gate_shexp.weight") != nullptr))
    return Unsupported("shared experts are not supported outside qwen2moe");
  return Status::Ok();
}

// BERT as llama.cpp reads `bert`: LayerNorm with bias (epsilon from
// attention.layer_norm_epsilon), absolute position and token-type
// embeddings, attention over the whole sequence, a GELU FFN with biases, the
// pooling the file names (pooling_type, default none as in llama.cpp).
// `nomic-bert` (config.h): RoPE in NEOX order instead of position_embd,
// fused attn_qkv, SwiGLU; its rotation as the file says (rope.freq_base,
// rope.dimension_count), no RoPE scaling.
Status ReadBert(const GgufFile& file, const Reader& r, ModelConfig* c) {
  c->is_encoder = true;
  c->causal = false;
  c->norm_kind = NormKind::kLayer;
  c->ffn_act = FfnActivation::kGeluTanh;
  if (c->arch_kind == ModelArch::kNomicBert) {
    c->rope_encoder = true;
    c->rope_style = RopeStyle::kNeox;
    c->ffn_act = FfnActivation::kSilu;
    if (!c->fused_qkv) return Unsupported("nomic-bert without a fused attn_qkv.weight is not supported");
    if (c->rope_scaling.type != RopeScalingType::kNone || c->has_rope_freqs)
      return Unsupported("nomic-bert with RoPE scaling is not supported");
  }
  c->rms_eps = 1e-12f;
  LLM_RETURN_IF_ERROR(r.Float("attention.layer_norm_epsilon", 0.0, 1.0, &c->rms_eps));
  if (file.Has(r.Key("attention.causal"))) {
    LLM_ASSIGN_OR_RETURN(bool causal, file.GetBool(r.Key("attention.causal")));
    if (causal) return Unsupported(r.Key("attention.causal") + " = true is not supported for bert");
  }
  int32_t pooling = 0;
  LLM_RETURN_IF_ERROR(r.Int("pooling_type", 0, 4, int64_t{0}, &pooling));
  c->pooling = static_cast<Pooling>(pooling);
  if (c->n_head_kv != c->n_head) return Unsupported("bert with grouped-query attention is not supported");
  if (const GgufTensorInfo* t = file.FindTensor("token_types.weight"); t != nullptr && t->dims.size() == 2) {
    if (t->dims[1] < 1 || t->dims[1] > 64) return ModelFormatError("token_types.weight has too many rows");
    c->n_token_types = static_cast<int32_t>(t->dims[1]);
  }
  if (const GgufTensorInfo* t = file.FindTensor("cls.output.weight"); t != nullptr && t->dims.size() == 2) {
    if (t->dims[1] < 1 || t->dims[1] > 65536) return ModelFormatError("cls.output.weight has too many rows");
    c->n_cls_out = static_cast<int32_t>(t->dims[1]);
  }
  if (c->pooling == Pooling::kRank && c->n_cls_out == 0)
    return ModelFormatError("pooling_type rank without a classifier head (cls.output.weight)");
  return Status::Ok();
}

// A decoder that makes embeddings (config.h): the pooling its file names
// (optional; none, the default, leaves it a generative model only) and a
// rank head's outputs.
Status ReadDecoderPooling(const GgufFile& file, const Reader& r, ModelConfig* c) {
  int32_t pooling = 0;
  LLM_RETURN_IF_ERROR(r.Int("pooling_type", 0, 4, int64_t{0}, &pooling));
  c->pooling = static_cast<Pooling>(pooling);
  if (const GgufTensorInfo* t = file.FindTensor("cls.output.weight"); t != nullptr) {
    if (t->dims.size() != 2 || t->dims[1] < 1 || t->dims[1] > 65536)
      return ModelFormatError("cls.output.weight is not a (n_embd, n_out) matrix of at most 65536 outputs");
    c->n_cls_out = static_cast<int32_t>(t->dims[1]);
  }
  if (c->pooling == Pooling::kRank && c->n_cls_out == 0)
    return ModelFormatError("pooling_type rank without a classifier head (cls.output.weight)");
  if (c->pooling != Pooling::kNone && c->n_expert > 0)
    return Unsupported("embeddings from a Mixture-of-Experts decoder are not supported");
  return Status::Ok();
}

}  // namespace

float ModelConfig::AttnScale() const {
  return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  if (!file.Has("general.architecture")) {
    return ModelFormatError("missing key general.architecture");
  }
  LLM_ASSIGN_OR_RETURN(std::string_view arch, file.GetString("general.architecture"));
  if (arch == "llama") {
    c.arch_kind = ModelArch::kLlama;
  } else if (arch == "gemma3" || arch == "gemma-embedding") {
    c.arch_kind = ModelArch::kGemma3;
  } else if (arch == "gemma2") {
    c.arch_kind = ModelArch::kGemma2;
  } else if (arch == "phi3") {
    c.arch_kind = ModelArch::kPhi3;
  } else if (arch == "qwen2moe") {
    c.arch_kind = ModelArch::kQwen2Moe;
  } else if (arch == "qwen3moe") {
    c.arch_kind = ModelArch::kQwen3Moe;
  } else if (arch == "qwen2") {
    c.arch_kind = ModelArch::kQwen2;
  } else if (arch == "qwen3") {
    c.arch_kind = ModelArch::kQwen3;
  } else if (arch == "bert") {
    c.arch_kind = ModelArch::kBert;
  } else if (arch == "gpt-oss") {
    c.arch_kind = ModelArch::kGptOss;
  } else if (arch == "nomic-bert") {
    c.arch_kind = ModelArch::kNomicBert;
  } else if (arch == "qwen2vl") {
    c.arch_kind = ModelArch::kQwen2;  // Qwen2's block; M-RoPE from rope.dimension_sections (ReadMropeSections)
  } else {
    return Unsupported("model architecture '" + std::string(arch) +
                       "' is not supported (only llama, qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, gemma3, "
                       "gemma-embedding, gpt-oss, bert and nomic-bert)");
  }
  c.arch = std::string(arch);
  if (file.Has("general.name")) {
    LLM_ASSIGN_OR_RETURN(std::string_view name, file.GetString("general.name"));
    c.name = std::string(name);
  }

  Reader r(file, c.arch);
  LLM_RETURN_IF_ERROR(r.Int("context_length", 1, kMaxCtx, std::nullopt, &c.n_ctx_train));
  LLM_RETURN_IF_ERROR(r.Int("embedding_length", 1, kMaxEmbd, std::nullopt, &c.n_embd));
  LLM_RETURN_IF_ERROR(r.Int("block_count", 1, kMaxLayers, std::nullopt, &c.n_layer));
  LLM_RETURN_IF_ERROR(r.Int("feed_forward_length", 1, kMaxFf, std::nullopt, &c.n_ff));
  LLM_RETURN_IF_ERROR(r.Int("attention.head_count", 1, kMaxHeads, std::nullopt, &c.n_head));
  LLM_RETURN_IF_ERROR(r.Int("attention.head_count_kv", 1, kMaxHeads, c.n_head, &c.n_head_kv));
  LLM_RETURN_IF_ERROR(Check(c.n_head % c.n_head_kv == 0,
                            r.Key("attention.head_count") + " (" + std::to_string(c.n_head) +
                                ") is not a multiple of head_count_kv (" +
                                std::to_string(c.n_head_kv) + ")"));
  LLM_RETURN_IF_ERROR(r.Int("attention.key_length", 1, kMaxHeadDim, c.n_embd / c.n_head,
                            &c.head_dim));
  LLM_RETURN_IF_ERROR(Check(c.head_dim >= 1 && c.head_dim <= kMaxHeadDim,
                            "head dimension " + std::to_string(c.head_dim) + " (" +
                                r.Key("embedding_length") + " / head_count) is out of range"));
  LLM_RETURN_IF_ERROR(Check(c.head_dim % 2 == 0,
                            "head dimension " + std::to_string(c.head_dim) + " is odd"));
  if (!file.Has(r.Key("attention.key_length"))) {
    LLM_RETURN_IF_ERROR(Check(c.n_embd % c.n_head == 0,
                              r.Key("embedding_length") + " is not a multiple of head_count"));
  }
  int32_t value_len = c.head_dim;
  LLM_RETURN_IF_ERROR(r.Int("attention.value_length", 1, kMaxHeadDim, c.head_dim, &value_len));
  if (value_len != c.head_dim) {
    return Unsupported(r.Key("attention.value_length") + " (" + std::to_string(value_len) +
                       ") differs from key_length (" + std::to_string(c.head_dim) + ")");
  }
  LLM_RETURN_IF_ERROR(r.Int("rope.dimension_count", 2, c.head_dim, c.head_dim, &c.rope_dim));
  LLM_RETURN_IF_ERROR(Check(c.rope_dim % 2 == 0,
                            r.Key("rope.dimension_count") + " " + std::to_string(c.rope_dim) +
                                " is odd"));
  LLM_RETURN_IF_ERROR(r.Float("rope.freq_base", 0.0, 1e12, &c.rope_theta));
  LLM_RETURN_IF_ERROR(r.Float("attention.layer_norm_rms_epsilon", 0.0, 1.0, &c.rms_eps));

  // --- RoPE scaling ---
  std::string type_key = r.Key("rope.scaling.type");
  if (file.Has(type_key)) {
    LLM_ASSIGN_OR_RETURN(std::string_view t, file.GetString(type_key));
    if (t == "none") {
      c.rope_scaling.type = RopeScalingType::kNone;
    } else if (t == "linear") {
      c.rope_scaling.type = RopeScalingType::kLinear;
    } else if (t == "yarn") {
      c.rope_scaling.type = RopeScalingType::kYarn;
    } else if (t == "llama3") {
      c.rope_scaling.type = RopeScalingType::kLlama3;
    } else {
      return Unsupported(type_key + " '" + std::string(t) + "' is not supported");
    }
  }
  LLM_RETURN_IF_ERROR(r.Float("rope.scaling.factor", 0.0, 1e6, &c.rope_scaling.factor));
  if (!file.Has(type_key) && file.Has(r.Key("rope.scale_linear"))) {
    // Older files: a bare linear factor.
    LLM_RETURN_IF_ERROR(r.Float("rope.scale_linear", 0.0, 1e6, &c.rope_scaling.factor));
    if (c.rope_scaling.factor != 1.0f) c.rope_scaling.type = RopeScalingType::kLinear;
  }
  LLM_RETURN_IF_ERROR(r.Int("rope.scaling.original_context_length", 1, kMaxCtx, int64_t{0},
                            &c.rope_scaling.original_ctx));
  if (c.rope_scaling.type == RopeScalingType::kYarn) {
    // llama.cpp's YaRN: the original context defaults to the training one;
    // beta_fast / beta_slow 32 / 1 unless the file says. The keys that tune
    // its magnitude (attn_factor, log multipliers) are not read here:
    // refused rather than ignored.
    if (c.rope_scaling.original_ctx == 0) c.rope_scaling.original_ctx = c.n_ctx_train;
    LLM_RETURN_IF_ERROR(r.Float("rope.scaling.yarn_beta_fast", 0.0, 1e6, &c.rope_scaling.beta_fast));
    LLM_RETURN_IF_ERROR(r.Float("rope.scaling.yarn_beta_slow", 0.0, 1e6, &c.rope_scaling.beta_slow));
    for (const char* k : {"rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_ext_factor",
                          "rope.scaling.yarn_attn_factor"})
      if (file.Has(r.Key(k))) return Unsupported(r.Key(k) + " is not supported");
  } else {
    // Outside YaRN llama.cpp scales cos and sin by it (RopeMagnitude).
    LLM_RETURN_IF_ERROR(r.Float("rope.scaling.attn_factor", 0.0, 1e6, &c.rope_attn_factor));  // (0, 1e6]
  }
  LLM_RETURN_IF_ERROR(r.Float("rope.scaling.low_freq_factor", 0.0, 1e6,
                              &c.rope_scaling.low_freq_factor));
  LLM_RETURN_IF_ERROR(r.Float("rope.scaling.high_freq_factor", 0.0, 1e6,
                              &c.rope_scaling.high_freq_factor));
  c.has_rope_freqs = file.FindTensor("rope_freqs.weight") != nullptr;
  // Biases on q/k/v are optional in every family for llama.cpp; Qwen2's
  // converter always writes them. ModelWeights requires all or none.
  c.qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.fused_qkv = file.FindTensor("blk.0.attn_qkv.weight") != nullptr;
  if (c.fused_qkv && c.qkv_bias) return Unsupported("q/k/v biases with a fused attn_qkv are not supported");

  // --- vocabulary: explicit size, else the tokenizer's, else the embedding's ---
  if (file.Has(r.Key("vocab_size"))) {
    LLM_RETURN_IF_ERROR(r.Int("vocab_size", 1, kMaxVocab, std::nullopt, &c.n_vocab));
  } else if (auto n = file.ArrayLength("tokenizer.ggml.tokens")) {
    LLM_RETURN_IF_ERROR(Check(*n >= 1 && *n <= static_cast<uint64_t>(kMaxVocab),
                              "tokenizer.ggml.tokens has " + std::to_string(*n) +
                                  " entries; 1 to " + std::to_string(kMaxVocab) + " allowed"));
    c.n_vocab = static_cast<int32_t>(*n);
  } else if (const GgufTensorInfo* t = file.FindTensor("token_embd.weight");
             t != nullptr && t->dims.size() == 2) {
    LLM_RETURN_IF_ERROR(Check(t->dims[1] <= kMaxVocab, "token_embd.weight has too many rows"));
    c.n_vocab = static_cast<int32_t>(t->dims[1]);
  } else {
    return ModelFormatError("cannot tell the vocabulary size: no " + r.Key("vocab_size") +
                            ", tokenizer.ggml.tokens or token_embd.weight");
  }

  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  // A `llama` file's attention.sliding_window (Mistral's converter writes
  // it) is not applied: llama.cpp reads no window for `llama` either (its
  // n_swa stays 0; tests/data/families/mistral.json records it), and these
  // files are proven against llama.cpp. Every layer attends to all keys.
  if (c.arch_kind == ModelArch::kGemma3) LLM_RETURN_IF_ERROR(ReadGemma3(file, r, &c));
  if (c.arch == "gemma-embedding") LLM_RETURN_IF_ERROR(ReadGemmaEmbedding(file, r, &c));
  if (c.arch_kind == ModelArch::kGemma2) LLM_RETURN_IF_ERROR(ReadGemma2(file, r, &c));
  if (c.arch_kind == ModelArch::kPhi3) LLM_RETURN_IF_ERROR(ReadPhi3(file, &c));
  if (c.arch_kind == ModelArch::kQwen2 || c.arch_kind == ModelArch::kQwen3 || c.arch_kind == ModelArch::kQwen3Moe ||
      c.arch_kind == ModelArch::kQwen2Moe)
    ReadQwen(&c);
  if (c.arch == "qwen2vl") LLM_RETURN_IF_ERROR(ReadMropeSections(file, r, &c));
  const bool encoder = c.arch_kind == ModelArch::kBert || c.arch_kind == ModelArch::kNomicBert;
  if (encoder) LLM_RETURN_IF_ERROR(ReadBert(file, r, &c));
  if (c.arch_kind == ModelArch::kGptOss) LLM_RETURN_IF_ERROR(ReadGptOss(file, r, &c));
  LLM_RETURN_IF_ERROR(ReadExperts(file, r, &c));
  if (!encoder) LLM_RETURN_IF_ERROR(ReadDecoderPooling(file, r, &c));
  if (!c.causal && !c.MakesEmbeddings())
    return ModelFormatError("a bidirectional '" + c.arch + "' model whose file names no pooling_type makes nothing");
  return c;
}

}  // namespace llm
