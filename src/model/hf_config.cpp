// ModelConfig::FromHfConfig: a Hugging Face config.json mapped to the same
// ModelConfig the GGUF path produces for the file llama.cpp's converter
// writes from that directory.
//
// RoPE pairing: HF checkpoints keep q/k rows in the order their rotate_half
// RoPE expects (pairs (x[i], x[i + d/2]): NEOX). llama.cpp's converter
// permutes the q/k rows of `llama` files so that adjacent pairs (x[2i],
// x[2i+1]) hold the same values; Qwen, Phi-3 and Gemma files it leaves unpermuted. Reading the
// unpermuted HF rows, every family here is therefore NEOX — the same
// rotation applied to the same values, only stored in another order
// (tests/test_hf_model.cpp proves the logits equal).
#include <cmath>
#include <optional>
#include <string>

#include "model/config.h"
#include "util/json.h"

namespace llm {
namespace {

constexpr int64_t kMaxLayers = 1024, kMaxEmbd = 65536, kMaxHeads = 1024, kMaxHeadDim = 1024;
constexpr int64_t kMaxFf = 1 << 20, kMaxVocab = 4 << 20, kMaxCtx = 1 << 24;

// An integer key in [lo, hi]; `def` when absent or null (no default: required).
Status Int(const Json& cfg, const char* key, int64_t lo, int64_t hi, std::optional<int64_t> def, int32_t* out) {
  const Json* v = cfg.Find(key);
  if (v == nullptr || v->is_null()) {
    if (!def) return ModelFormatError(std::string("config.json: missing ") + key);
    *out = static_cast<int32_t>(*def);
    return Status::Ok();
  }
  if (!v->is_int() || v->as_int() < lo || v->as_int() > hi)
    return ModelFormatError(std::string("config.json: ") + key + " is not an integer in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "]");
  *out = static_cast<int32_t>(v->as_int());
  return Status::Ok();
}

// A number in (lo, hi]; unchanged when absent or null.
Status Float(const Json& cfg, const char* key, double lo, double hi, float* out) {
  const Json* v = cfg.Find(key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_number() || !std::isfinite(v->as_double()) || v->as_double() <= lo || v->as_double() > hi)
    return ModelFormatError(std::string("config.json: ") + key + " is not a number in (" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
  *out = static_cast<float>(v->as_double());
  return Status::Ok();
}

bool Bool(const Json& cfg, const char* key, bool def) {
  const Json* v = cfg.Find(key);
  return v != nullptr && v->is_bool() ? v->as_bool() : def;
}

// rope_scaling: {"rope_type" (or older "type"): "linear" | "llama3" |
// "yarn" | "default", "factor", ...}. Anything else is refused.
Status ReadRopeScaling(const Json& cfg, ModelConfig* c) {
  const Json* rs = cfg.Find("rope_scaling");
  if (rs == nullptr || rs->is_null()) return Status::Ok();
  if (!rs->is_object()) return ModelFormatError("config.json: rope_scaling is not an object");
  const Json* t = rs->Find("rope_type");
  if (t == nullptr) t = rs->Find("type");
  const std::string type = t != nullptr && t->is_string() ? t->as_string() : "";
  if (type == "default") return Status::Ok();
  if (type == "linear") {
    c->rope_scaling.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    c->rope_scaling.type = RopeScalingType::kLlama3;
  } else if (type == "yarn") {
    c->rope_scaling.type = RopeScalingType::kYarn;
    c->rope_scaling.original_ctx = c->n_ctx_train;
    for (const char* k : {"attention_factor", "mscale", "mscale_all_dim"})
      if (rs->Find(k) != nullptr) return Unsupported(std::string("config.json: rope_scaling.") + k + " is not supported");
  } else {
    return Unsupported("config.json: rope_scaling type '" + type + "' is not supported");
  }
  LLM_RETURN_IF_ERROR(Float(*rs, "factor", 0.0, 1e6, &c->rope_scaling.factor));
  LLM_RETURN_IF_ERROR(Int(*rs, "original_max_position_embeddings", 1, kMaxCtx, c->rope_scaling.original_ctx,
                          &c->rope_scaling.original_ctx));
  LLM_RETURN_IF_ERROR(Float(*rs, "low_freq_factor", 0.0, 1e6, &c->rope_scaling.low_freq_factor));
  LLM_RETURN_IF_ERROR(Float(*rs, "high_freq_factor", 0.0, 1e6, &c->rope_scaling.high_freq_factor));
  LLM_RETURN_IF_ERROR(Float(*rs, "beta_fast", 0.0, 1e6, &c->rope_scaling.beta_fast));
  return Float(*rs, "beta_slow", 0.0, 1e6, &c->rope_scaling.beta_slow);
}

// A soft cap: absent keeps the default, null disables it (transformers'
// meaning of None), else a number in [0, 1e6].
Status Cap(const Json& cfg, const char* key, float* out) {
  const Json* v = cfg.Find(key);
  if (v == nullptr) return Status::Ok();
  if (v->is_null()) {
    *out = 0.0f;
    return Status::Ok();
  }
  if (!v->is_number() || !(v->as_double() >= 0.0 && v->as_double() <= 1e6))
    return ModelFormatError(std::string("config.json: ") + key + " is not a number in [0, 1e6]");
  *out = static_cast<float>(v->as_double());
  return Status::Ok();
}

// Gemma 2 as transformers runs it and llama.cpp's converter writes it:
// GeGLU (gelu_pytorch_tanh), embeddings scaled by sqrt(hidden_size),
// post-attention / post-FFN norms, even layers local with sliding_window,
// attention and final logits soft-capped, q·k scaled by
// query_pre_attn_scalar^-1/2 (head_dim for 2B/9B, hidden_size / heads for
// 27B: what llama.cpp's gemma2 uses). Its RMSNorm weights are stored minus 1
// (HF multiplies by 1 + w): weights_hf.cpp adds the 1 the converter adds.
//
// Gemma 3 (Gemma3ForCausalLM, text): the same with q/k RMS norms, no
// attention cap (refused if set: its GGUF path has none either) and no final
// cap unless set, a window every sliding_window_pattern layers (default 6:
// five local, one global; or the same period spelled out in layer_types),
// local layers on rope_local_base_freq and global ones on rope_theta with
// rope_scaling (linear in the 4B+ models).
Status ReadGemma(const Json& cfg, ModelConfig* c) {
  const bool gemma3 = c->arch_kind == ModelArch::kGemma3;
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    const Json* act = cfg.Find(key);
    if (act != nullptr && !act->is_null() && (!act->is_string() || act->as_string() != "gelu_pytorch_tanh"))
      return Unsupported(std::string("config.json: gemma2 with ") + key + " other than gelu_pytorch_tanh");
  }
  c->ffn_act = FfnActivation::kGeluTanh;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->post_norms = true;
  LLM_RETURN_IF_ERROR(Int(cfg, "sliding_window", 1, kMaxCtx, int64_t{4096}, &c->sliding_window));
  int32_t scalar = 0;
  LLM_RETURN_IF_ERROR(Int(cfg, "query_pre_attn_scalar", 1, int64_t{1} << 20, c->head_dim, &scalar));
  if (scalar != c->head_dim) c->attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  if (!gemma3) {
    c->swa_pattern = 2;
    c->rope_theta_swa = c->rope_theta;
    if (c->rope_scaling.type != RopeScalingType::kNone)
      return Unsupported("config.json: gemma2 with rope_scaling is not supported");
    c->attn_logit_softcap = 50.0f;
    c->final_logit_softcap = 30.0f;
    LLM_RETURN_IF_ERROR(Cap(cfg, "attn_logit_softcapping", &c->attn_logit_softcap));
    return Cap(cfg, "final_logit_softcapping", &c->final_logit_softcap);
  }
  c->qk_norm = true;
  c->rope_theta_swa = 10000.0f;
  LLM_RETURN_IF_ERROR(Float(cfg, "rope_local_base_freq", 0.0, 1e12, &c->rope_theta_swa));
  LLM_RETURN_IF_ERROR(Int(cfg, "sliding_window_pattern", 1, kMaxLayers, int64_t{6}, &c->swa_pattern));
  if (const Json* types = cfg.Find("layer_types"); types != nullptr && !types->is_null()) {
    // The period of "full_attention" layers, which must repeat exactly.
    if (!types->is_array() || types->size() != static_cast<size_t>(c->n_layer))
      return ModelFormatError("config.json: layer_types must list num_hidden_layers entries");
    int32_t period = 0;
    for (size_t i = 0; i < types->size() && period == 0; ++i)
      if (types->array()[i].as_string() == "full_attention") period = static_cast<int32_t>(i) + 1;
    if (period == 0) period = c->n_layer + 1;  // no global layer
    for (size_t i = 0; i < types->size(); ++i) {
      const std::string& t = types->array()[i].as_string();
      const bool global = static_cast<int32_t>(i % period) == period - 1;
      if (t != (global ? "full_attention" : "sliding_attention"))
        return Unsupported("config.json: layer_types is not a repeating local/global pattern");
    }
    c->swa_pattern = period;
  }
  const Json* attn_cap = cfg.Find("attn_logit_softcapping");
  if (attn_cap != nullptr && !attn_cap->is_null())
    return Unsupported("config.json: gemma3 with attn_logit_softcapping is not supported");
  return Cap(cfg, "final_logit_softcapping", &c->final_logit_softcap);
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::FromHfConfig(const Json& cfg) {
  if (!cfg.is_object()) return ModelFormatError("config.json is not a JSON object");
  std::string hf_arch;
  if (const Json* a = cfg.Find("architectures"); a != nullptr && a->is_array() && a->size() > 0)
    hf_arch = a->array()[0].as_string();
  std::string model_type;
  if (const Json* t = cfg.Find("model_type"); t != nullptr) model_type = t->as_string();

  ModelConfig c;
  if (hf_arch == "LlamaForCausalLM" || hf_arch == "MistralForCausalLM" ||
      (hf_arch.empty() && (model_type == "llama" || model_type == "mistral"))) {
    c.arch = "llama", c.arch_kind = ModelArch::kLlama;
  } else if (hf_arch == "Qwen2ForCausalLM" || (hf_arch.empty() && model_type == "qwen2")) {
    c.arch = "qwen2", c.arch_kind = ModelArch::kQwen2;
  } else if (hf_arch == "Qwen3ForCausalLM" || (hf_arch.empty() && model_type == "qwen3")) {
    c.arch = "qwen3", c.arch_kind = ModelArch::kQwen3;
  } else if (hf_arch == "Gemma2ForCausalLM" || (hf_arch.empty() && model_type == "gemma2")) {
    c.arch = "gemma2", c.arch_kind = ModelArch::kGemma2;
  } else if (hf_arch == "Gemma3ForCausalLM" || (hf_arch.empty() && model_type == "gemma3_text")) {
    c.arch = "gemma3", c.arch_kind = ModelArch::kGemma3;
  } else if (hf_arch == "Phi3ForCausalLM" || (hf_arch.empty() && model_type == "phi3")) {
    // Phi-3 / Phi-3.5 / Phi-4-mini: q/k/v in one qkv_proj and gate/up in one
    // gate_up_proj, as llama.cpp's converter keeps them (attn_qkv, ffn_up).
    c.arch = "phi3", c.arch_kind = ModelArch::kPhi3;
    c.fused_qkv = c.fused_gate_up = true;
  } else {
    return Unsupported("config.json: architecture '" + (hf_arch.empty() ? model_type : hf_arch) +
                       "' is not supported in a Hugging Face directory (only LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM; convert others "
                       "to GGUF)");
  }
  c.rope_style = RopeStyle::kNeox;  // unpermuted HF q/k rows: see the top of this file

  LLM_RETURN_IF_ERROR(Int(cfg, "hidden_size", 1, kMaxEmbd, std::nullopt, &c.n_embd));
  LLM_RETURN_IF_ERROR(Int(cfg, "num_hidden_layers", 1, kMaxLayers, std::nullopt, &c.n_layer));
  LLM_RETURN_IF_ERROR(Int(cfg, "intermediate_size", 1, kMaxFf, std::nullopt, &c.n_ff));
  LLM_RETURN_IF_ERROR(Int(cfg, "num_attention_heads", 1, kMaxHeads, std::nullopt, &c.n_head));
  LLM_RETURN_IF_ERROR(Int(cfg, "num_key_value_heads", 1, kMaxHeads, c.n_head, &c.n_head_kv));
  if (c.n_head % c.n_head_kv != 0)
    return ModelFormatError("config.json: num_attention_heads is not a multiple of num_key_value_heads");
  const Json* hd = cfg.Find("head_dim");
  if ((hd == nullptr || hd->is_null()) && c.n_embd % c.n_head != 0)
    return ModelFormatError("config.json: hidden_size is not a multiple of num_attention_heads and no head_dim");
  LLM_RETURN_IF_ERROR(Int(cfg, "head_dim", 2, kMaxHeadDim, c.n_embd / c.n_head, &c.head_dim));
  if (c.head_dim % 2 != 0 || c.head_dim < 2) return ModelFormatError("config.json: head dimension is odd or zero");
  c.rope_dim = c.head_dim;
  if (const Json* p = cfg.Find("partial_rotary_factor"); p != nullptr && !p->is_null() && p->as_double() != 1.0) {
    // Phi's rotary part: the first head_dim * factor dims (rotate_half within
    // them, NEOX), as llama.cpp's rope.dimension_count.
    if (c.arch_kind != ModelArch::kPhi3)
      return Unsupported("config.json: partial_rotary_factor is not supported for " + hf_arch);
    const double f = p->is_number() ? p->as_double() : -1.0;
    const double dims = f * c.head_dim;
    if (!(f > 0.0 && f < 1.0) || dims != std::floor(dims) || static_cast<int64_t>(dims) % 2 != 0)
      return ModelFormatError("config.json: partial_rotary_factor must give an even number of rotated dims");
    c.rope_dim = static_cast<int32_t>(dims);
  }
  LLM_RETURN_IF_ERROR(Int(cfg, "max_position_embeddings", 1, kMaxCtx, std::nullopt, &c.n_ctx_train));
  LLM_RETURN_IF_ERROR(Int(cfg, "vocab_size", 1, kMaxVocab, std::nullopt, &c.n_vocab));
  LLM_RETURN_IF_ERROR(Float(cfg, "rope_theta", 0.0, 1e12, &c.rope_theta));
  LLM_RETURN_IF_ERROR(Float(cfg, "rms_norm_eps", 0.0, 1.0, &c.rms_eps));
  LLM_RETURN_IF_ERROR(ReadRopeScaling(cfg, &c));
  if (c.arch_kind == ModelArch::kGemma2 || c.arch_kind == ModelArch::kGemma3) {
    LLM_RETURN_IF_ERROR(ReadGemma(cfg, &c));
  } else if (const Json* act = cfg.Find("hidden_act"); act != nullptr && act->as_string() != "silu") {
    return Unsupported("config.json: hidden_act '" + act->as_string() + "' is not supported (only silu)");
  }
  // Llama and Mistral default to an untied lm_head, Qwen2/3 configs say;
  // Gemma's config class ties it unless told otherwise.
  c.tied_embeddings = Bool(cfg, "tie_word_embeddings", c.arch_kind == ModelArch::kGemma2 ||
                                                          c.arch_kind == ModelArch::kGemma3);
  c.qkv_bias = c.arch_kind == ModelArch::kQwen2 || Bool(cfg, "attention_bias", false);
  if (Bool(cfg, "mlp_bias", false)) return Unsupported("config.json: mlp_bias is not supported");
  c.qk_norm = c.qk_norm || c.arch_kind == ModelArch::kQwen3;
  // Sliding windows are not applied, as on the GGUF path: llama.cpp reads no
  // window for `llama` (Mistral) files and applies none for phi3, and a Qwen
  // config enables one only with use_sliding_window, refused here.
  if (Bool(cfg, "use_sliding_window", false)) return Unsupported("config.json: use_sliding_window is not supported");
  if (const Json* n = cfg.Find("num_local_experts"); n != nullptr && !n->is_null())
    return Unsupported("config.json: Mixture-of-Experts models are not supported from safetensors yet");
  return c;
}

}  // namespace llm
