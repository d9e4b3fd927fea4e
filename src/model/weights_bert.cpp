// The tensors of a `bert` GGUF (BERT, BGE, E5, MiniLM, XLM-RoBERTa and its
// cross-encoders) or a `nomic-bert` one (nomic-embed-text: no
// position_embd, a fused attn_qkv, a gated FFN, no biases but maybe
// attn_output's), as llama.cpp's converter names them.
#include <string>

#include "model/gguf.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace llm {

using weights_internal::Kind;
using weights_internal::Loader;

namespace {

// Rows [first, first + n) of a matrix view.
WeightView SliceRows(const WeightView& w, int64_t first, int64_t n) {
  WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + first * w.row_bytes;
  v.rows = n;
  return v;
}

}  // namespace

StatusOr<ModelWeights> BertWeightsFromGguf(const GgufFile& file, const ModelConfig& c) {
  ModelWeights w;
  Loader l(file);
  const int64_t embd = c.n_embd, vocab = c.n_vocab, ff = c.n_ff, q = c.q_dim(), kv = c.kv_dim();

  LLM_RETURN_IF_ERROR(l.Get("token_embd.weight", Kind::kMatrix, vocab, embd, &w.token_embd));
  if (!c.rope_encoder)
    LLM_RETURN_IF_ERROR(l.Get("position_embd.weight", Kind::kMatrix, c.n_ctx_train, embd, &w.position_embd));
  if (c.n_token_types > 0)
    LLM_RETURN_IF_ERROR(l.Get("token_types.weight", Kind::kMatrix, c.n_token_types, embd, &w.token_types));
  LLM_RETURN_IF_ERROR(l.Get("token_embd_norm.weight", Kind::kNorm, 1, embd, &w.embd_norm));
  LLM_RETURN_IF_ERROR(l.Get("token_embd_norm.bias", Kind::kNorm, 1, embd, &w.embd_norm_b));
  // The classifier head (cross-encoders): cls (dense + tanh) is optional
  // before cls.output, as in llama.cpp.
  LLM_RETURN_IF_ERROR(l.Get("cls.weight", Kind::kMatrix, embd, embd, &w.cls, true));
  if (!w.cls.empty()) LLM_RETURN_IF_ERROR(l.Get("cls.bias", Kind::kNorm, 1, embd, &w.cls_b));
  if (c.n_cls_out > 0) {
    LLM_RETURN_IF_ERROR(l.Get("cls.output.weight", Kind::kMatrix, c.n_cls_out, embd, &w.cls_out));
    LLM_RETURN_IF_ERROR(l.Get("cls.output.bias", Kind::kNorm, 1, c.n_cls_out, &w.cls_out_b));
  }

  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    if (c.rope_encoder) {
      // nomic-bert: q, k and v rows end to end in attn_qkv, (q + 2 kv, n_embd);
      // the FFN is silu(gate) * up, then down, none of them with a bias.
      WeightView qkv;
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_qkv.weight", Kind::kMatrix, q + 2 * kv, embd, &qkv));
      L.wq = SliceRows(qkv, 0, q);
      L.wk = SliceRows(qkv, q, kv);
      L.wv = SliceRows(qkv, q + kv, kv);
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.weight", Kind::kMatrix, embd, q, &L.wo));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.bias", Kind::kNorm, 1, embd, &L.bo, true));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_gate.weight", Kind::kMatrix, ff, embd, &L.w_gate));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up.weight", Kind::kMatrix, ff, embd, &L.w_up));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down.weight", Kind::kMatrix, embd, ff, &L.w_down));
      // Biases llama.cpp would load and then not apply (its nomic-bert FFN
      // has none), and MoE layers: refused, never ignored.
      for (const char* extra : {"attn_qkv.bias", "attn_q.weight", "ffn_up.bias", "ffn_down.bias", "ffn_gate.bias",
                                "ffn_gate_inp.weight"})
        if (file.FindTensor(p + extra) != nullptr)
          return Unsupported("tensor " + p + extra + " is not supported in a nomic-bert model");
    } else {
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.weight", Kind::kMatrix, q, embd, &L.wq));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.weight", Kind::kMatrix, kv, embd, &L.wk));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.weight", Kind::kMatrix, kv, embd, &L.wv));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_q.bias", Kind::kNorm, 1, q, &L.bq));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_k.bias", Kind::kNorm, 1, kv, &L.bk));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_v.bias", Kind::kNorm, 1, kv, &L.bv));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.weight", Kind::kMatrix, embd, q, &L.wo));
      LLM_RETURN_IF_ERROR(l.Get(p + "attn_output.bias", Kind::kNorm, 1, embd, &L.bo));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up.weight", Kind::kMatrix, ff, embd, &L.w_up));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_up.bias", Kind::kNorm, 1, ff, &L.b_up));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down.weight", Kind::kMatrix, embd, ff, &L.w_down));
      LLM_RETURN_IF_ERROR(l.Get(p + "ffn_down.bias", Kind::kNorm, 1, embd, &L.b_down));
      // A gated FFN (jina-bert) or q/k norms would be another
      // architecture's tensors: refused, never ignored.
      for (const char* extra : {"ffn_gate.weight", "attn_q_norm.weight", "attn_qkv.weight"})
        if (file.FindTensor(p + extra) != nullptr)
          return Unsupported("tensor " + p + extra + " is not supported in a bert model");
    }
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_output_norm.weight", Kind::kNorm, 1, embd, &L.post_attn_norm));
    LLM_RETURN_IF_ERROR(l.Get(p + "attn_output_norm.bias", Kind::kNorm, 1, embd, &L.post_attn_norm_b));
    LLM_RETURN_IF_ERROR(l.Get(p + "layer_output_norm.weight", Kind::kNorm, 1, embd, &L.post_ffn_norm));
    LLM_RETURN_IF_ERROR(l.Get(p + "layer_output_norm.bias", Kind::kNorm, 1, embd, &L.post_ffn_norm_b));
  }
  w.n_params = l.n_params();
  w.file_mapped = file.file_mapped();
  return w;
}

}  // namespace llm
