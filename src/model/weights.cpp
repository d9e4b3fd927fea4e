// ModelWeights::FromGguf: locate and check every Llama / Qwen / Gemma / Phi-3
// tensor in a GGUF file.
#include "model/weights.h"

#include <string>

#include "model/gguf.h"
#include "model/weight_loader.h"

namespace llm {
namespace {

using weights_internal::Kind;
using weights_internal::Loader;

// Rows [first, first + n) of a matrix view: a fused tensor's part (rows are
// whole blocks of any type, so a row range is a plain byte range).
WeightView SubRows(const WeightView& w, int64_t first, int64_t n) {
  WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + first * w.row_bytes;
  v.rows = n;
  return v;
}

}  // namespace

StatusOr<ModelWeights> ModelWeights::FromGguf(const GgufFile& file, const ModelConfig& c) {
  if (c.n_layer <= 0 || c.n_embd <= 0 || c.n_vocab <= 0 || c.n_ff <= 0 || c.head_dim <= 0 ||
      c.n_head <= 0 || c.n_head_kv <= 0) {
    return InvalidArgument("model config has non-positive sizes");
  }
  if (c.arch_kind == ModelArch::kBert || c.arch_kind == ModelArch::kNomicBert) return BertWeightsFromGguf(file, c);
  ModelWeights w;
  Loader l(file);
  const int64_t embd = c.n_embd, vocab = c.n_vocab, ff = c.n_ff;
  const int64_t q = c.q_dim(), kv = c.kv_dim();

  LLM_RETURN_IF_ERROR(l.Get("token_embd.weight", Kind::kMatrix, vocab, embd, &w.token_embd));
  LLM_RETURN_IF_ERROR(l.Get("output_norm.weight", Kind::kNorm, 1, embd, &w.output_norm));
  if (c.tied_embeddings) {
    if (file.FindTensor("output.weight") != nullptr) {
      return InvalidArgument("config says tied embeddings but the file has output.weight");
    }
    w.output = w.token_embd;
  } else {
    LLM_RETURN_IF_ERROR(l.Get("output.weight", Kind::kMatrix, vocab, embd, &w.output));
  }
  if (c.n_cls_out > 0) {  // a decoder reranker's head (Qwen3-Reranker: the [yes, no] rows)
    LLM_RETURN_IF_ERROR(l.Get("cls.output.weight", Kind::kMatrix, c.n_cls_out, embd, &w.cls_out));
    LLM_RETURN_IF_ERROR(l.Get("cls.output.bias", Kind::kNorm, 1, c.n_cls_out, &w.cls_out_b, true));
  }
  if (c.n_dense > 0) {  // EmbeddingGemma's projections after pooling
    LLM_RETURN_IF_ERROR(l.Get("dense_2.weight", Kind::kMatrix, c.n_dense, embd, &w.dense_2));
    LLM_RETURN_IF_ERROR(l.Get("dense_3.weight", Kind::kMatrix, embd, c.n_dense, &w.dense_3));
  }
  LLM_RETURN_IF_ERROR(
      l.Get("rope_freqs.weight", Kind::kNorm, 1, c.rope_dim / 2, &w.rope_freqs, true));
  if (c.has_rope_freqs != !w.rope_freqs.empty()) {
    return InvalidArgument("config.has_rope_freqs disagrees with the file");
  }
  LLM_RETURN_IF_ERROR(
      l.Get("rope_factors_long.weight", Kind::kNorm, 1, c.rope_dim / 2, &w.rope_factors_long, true));
  LLM_RETURN_IF_ERROR(
      l.Get("rope_factors_short.weight", Kind::kNorm, 1, c.rope_dim / 2, &w.rope_factors_short, true));
  if (!c.has_longrope && (!w.rope_factors_long.empty() || !w.rope_factors_short.empty())) {
    return Unsupported("rope_factors_long / rope_factors_short (LongRoPE) are read for phi3 files only");
  }
  if (c.has_longrope && (w.rope_factors_long.empty() || w.rope_factors_short.empty())) {
    return InvalidArgument("config.has_longrope disagrees with the file");
  }

  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[i];
    std::string p = "blk." + std::to_string(i) + ".";
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_norm.weight", Kind::kNorm, 1, embd, &L.attn_norm));
    if (c.fused_qkv) {
      // attn_qkv (Phi-3): the q, k and v rows end to end, (q + 2 kv, n_embd)
      WeightView qkv;
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_qkv.weight", Kind::kMatrix, q + 2 * kv, embd, &qkv));
      L.wq = SubRows(qkv, 0, q);
      L.wk = SubRows(qkv, q, kv);
      L.wv = SubRows(qkv, q + kv, kv);
    } else {
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.weight", Kind::kMatrix, q, embd, &L.wq));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.weight", Kind::kMatrix, kv, embd, &L.wk));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.weight", Kind::kMatrix, kv, embd, &L.wv));
    }
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.weight", Kind::kMatrix, embd, q, &L.wo));
    // gpt-oss stores its pre-FFN norm as post_attention_norm
    const bool gpt_oss = c.arch_kind == ModelArch::kGptOss;
    LLM_RETURN_IF_ERROR(
        l.Get(p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), Kind::kNorm, 1, embd, &L.ffn_norm));
    if (c.out_bias) LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.bias", Kind::kNorm, 1, embd, &L.bo));
    if (c.attn_sinks) LLM_RETURN_IF_ERROR(l.Get(p + "attn_sinks.weight", Kind::kNorm, 1, c.n_head, &L.attn_sinks));
    if (c.expert_bias) {
      const int64_t ne = c.n_expert, fe = c.n_ff_exp;
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate_inp.bias", Kind::kNorm, 1, ne, &L.router_b));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate_exps.bias", Kind::kMatrix, ne, fe, &L.exp_gate_b));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up_exps.bias", Kind::kMatrix, ne, fe, &L.exp_up_b));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down_exps.bias", Kind::kMatrix, ne, embd, &L.exp_down_b));
      for (const WeightView* b : {&L.exp_gate_b, &L.exp_up_b, &L.exp_down_b})
        if (b->type != TensorType::F32) return Unsupported("tensor " + p + "ffn_*_exps.bias must be F32");
    }
    if (c.n_expert > 0) {
      const int64_t ne = c.n_expert, fe = c.n_ff_exp;
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate_inp.weight", Kind::kMatrix, ne, embd, &L.router));
      LLM_RETURN_IF_ERROR(l.GetStack(p + "ffn_gate_exps.weight", ne, fe, embd, &L.exp_gate));
      LLM_RETURN_IF_ERROR(l.GetStack(p + "ffn_up_exps.weight", ne, fe, embd, &L.exp_up));
      LLM_RETURN_IF_ERROR(l.GetStack(p + "ffn_down_exps.weight", ne, embd, fe, &L.exp_down));
      if (c.n_ff_shexp > 0) {
        const int64_t fs = c.n_ff_shexp;
        LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate_inp_shexp.weight", Kind::kNorm, 1, embd, &L.shexp_gate_inp));
        LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate_shexp.weight", Kind::kMatrix, fs, embd, &L.shexp_gate));
        LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up_shexp.weight", Kind::kMatrix, fs, embd, &L.shexp_up));
        LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down_shexp.weight", Kind::kMatrix, embd, fs, &L.shexp_down));
      }
    } else if (c.fused_gate_up) {
      // ffn_up (Phi-3): gate rows then up rows, (2 n_ff, n_embd); llama.cpp's
      // fused SwiGLU takes silu of the first half times the second
      WeightView gu;
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up.weight", Kind::kMatrix, 2 * ff, embd, &gu));
      L.w_gate = SubRows(gu, 0, ff);
      L.w_up = SubRows(gu, ff, ff);
    } else {
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate.weight", Kind::kMatrix, ff, embd, &L.w_gate));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up.weight", Kind::kMatrix, ff, embd, &L.w_up));
    }
    if (c.n_expert == 0) LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down.weight", Kind::kMatrix, embd, ff, &L.w_down));
    if (c.qkv_bias) {
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.bias", Kind::kNorm, 1, q, &L.bq));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.bias", Kind::kNorm, 1, kv, &L.bk));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.bias", Kind::kNorm, 1, kv, &L.bv));
    }
    if (c.qk_norm) {
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_q_norm.weight", Kind::kNorm, 1, c.head_dim, &L.q_norm));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_k_norm.weight", Kind::kNorm, 1, c.head_dim, &L.k_norm));
    }
    if (c.post_norms) {
      LLM_RETURN_IF_ERROR(
          l.Get(p + "post_attention_norm.weight", Kind::kNorm, 1, embd, &L.post_attn_norm));
      LLM_RETURN_IF_ERROR(l.Get(p + "post_ffw_norm.weight", Kind::kNorm, 1, embd, &L.post_ffn_norm));
    }
  }
  // Tensors llama.cpp would apply and these backends do not: refused rather
  // than silently ignored.
  for (const char* name : {"output.bias", "blk.0.attn_qkv.bias", "blk.0.attn_output.bias", "blk.0.ffn_down.bias",
                           "blk.0.ffn_up.bias", "blk.0.ffn_gate.bias", "blk.0.attn_sinks.weight",
                           "blk.0.ffn_gate_inp.bias", "blk.0.ffn_gate_exps.bias"}) {
    const std::string n = name;
    const bool read = (c.out_bias && n == "blk.0.attn_output.bias") ||
                      (c.attn_sinks && n == "blk.0.attn_sinks.weight") ||
                      (c.expert_bias && (n == "blk.0.ffn_gate_inp.bias" || n == "blk.0.ffn_gate_exps.bias"));
    if (!read && file.FindTensor(name) != nullptr) return Unsupported("tensor " + n + " is not supported");
  }
  for (int32_t i = 0; i < c.n_layer && !c.qkv_bias; ++i) {
    for (const char* t : {"attn_q", "attn_k", "attn_v"}) {
      const std::string name = "blk." + std::to_string(i) + "." + t + ".bias";
      if (file.FindTensor(name) != nullptr)
        return ModelFormatError("tensor " + name + " is present but blk.0.attn_q.bias is not (biases on some layers only)");
    }
  }
  w.n_params = l.n_params();
  w.file_mapped = file.file_mapped();
  return w;
}

}  // namespace llm
