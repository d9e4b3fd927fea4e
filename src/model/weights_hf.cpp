// ModelWeights::FromSafetensors: the tensors of a Hugging Face Llama /
// Mistral / Qwen2 / Qwen3 / Phi-3 / Gemma 2 / Gemma 3 checkpoint, under the names transformers gives
// them, as the same views the GGUF path builds.
//
//   model.embed_tokens.weight                      token_embd    (vocab, embd)
//   model.norm.weight                              output_norm   (embd)
//   lm_head.weight                                 output        (vocab, embd), absent when tied
//   model.layers.N.input_layernorm.weight          attn_norm     (embd)
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight wq wk wv wo   HF [out, in] = (rows, cols)
//   model.layers.N.self_attn.{q,k,v}_proj.bias     bq bk bv      (Qwen2, attention_bias)
//   model.layers.N.self_attn.{q,k}_norm.weight     q_norm k_norm (head_dim, Qwen3)
//   model.layers.N.post_attention_layernorm.weight ffn_norm      (embd)
//   model.layers.N.mlp.{gate,up,down}_proj.weight  w_gate w_up w_down
//   model.layers.N.self_attn.qkv_proj.weight       wq wk wv      (Phi-3: q, k, v rows end to end)
//   model.layers.N.mlp.gate_up_proj.weight         w_gate w_up   (Phi-3: gate rows, then up rows)
//   Gemma 2 and 3: post_attention_layernorm is post_attn_norm, pre_feedforward_layernorm
//   ffn_norm and post_feedforward_layernorm post_ffn_norm; every norm + 1.
//
// Unlike llama.cpp's `llama` GGUF, q/k rows are not permuted: the config
// says NEOX RoPE instead (hf_config.cpp). Every tensor of the checkpoint
// must be one of these: an unknown one is refused, never ignored.
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>

#include "model/safetensors.h"
#include "model/weights.h"
#include "util/fp16.h"

namespace llm {
namespace {

std::string Shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class HfLoader {
 public:
  HfLoader(const SafetensorsSet& set, std::vector<std::vector<float>>* owned) : set_(set), owned_(owned) {}

  // A matrix (rows, cols), HF shape [rows, cols], viewed in place.
  Status Matrix(const std::string& name, int64_t rows, int64_t cols, WeightView* out) {
    LLM_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name, {rows, cols}));
    out->type = t->type;
    out->data = t->data;
    // The format does not align tensors (its writer pads only the header),
    // and the backends read elements through typed pointers: a misaligned
    // tensor is copied once into aligned memory rather than read in place.
    const size_t elem = t->type == TensorType::F32 ? 4 : 2;
    if (reinterpret_cast<uintptr_t>(t->data) % elem != 0) {
      std::vector<float>& copy = owned_->emplace_back((t->nbytes + 3) / 4);
      std::memcpy(copy.data(), t->data, t->nbytes);
      out->data = copy.data();
    }
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = TensorRowBytes(t->type, cols);
    return Status::Ok();
  }

  // A vector (norm weight, bias) of n values, converted to F32: the
  // backends read norms and biases as F32, and HF stores them as BF16.
  // `add` is added to each value (Gemma's norms are stored minus 1).
  Status Vector(const std::string& name, int64_t n, WeightView* out, float add = 0.0f) {
    LLM_ASSIGN_OR_RETURN(const SafetensorsTensor* t, Find(name, {n}));
    std::vector<float>& v = owned_->emplace_back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      // memcpy: the tensor may be misaligned (see Matrix)
      const char* src = static_cast<const char*>(t->data);
      if (t->type == TensorType::F32) {
        std::memcpy(&v[i], src + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        v[i] = t->type == TensorType::BF16 ? Bf16ToF32(h) : F16ToF32(h);
      }
      v[i] += add;
    }
    out->type = TensorType::F32;
    out->data = v.data();
    out->rows = 1;
    out->cols = n;
    out->row_bytes = static_cast<size_t>(n) * 4;
    return Status::Ok();
  }

  bool Has(const std::string& name) const { return set_.Find(name) != nullptr; }
  const std::unordered_set<std::string>& used() const { return used_; }
  int64_t n_params() const { return n_params_; }

 private:
  StatusOr<const SafetensorsTensor*> Find(const std::string& name, const std::vector<int64_t>& want) {
    const SafetensorsTensor* t = set_.Find(name);
    if (t == nullptr) return ModelFormatError("missing tensor " + name);
    if (t->shape != want)
      return ModelFormatError("tensor " + name + " has shape " + Shape(t->shape) + ", expected " + Shape(want) +
                              " from config.json");
    used_.insert(name);
    n_params_ += t->n_elements();
    return t;
  }

  const SafetensorsSet& set_;
  std::vector<std::vector<float>>* owned_;
  std::unordered_set<std::string> used_;
  int64_t n_params_ = 0;
};

// Rows [first, first + n) of a matrix view: a fused tensor's part.
WeightView SubRows(const WeightView& w, int64_t first, int64_t n) {
  WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + first * w.row_bytes;
  v.rows = n;
  return v;
}

}  // namespace

StatusOr<ModelWeights> ModelWeights::FromSafetensors(const SafetensorsSet& set, const ModelConfig& c,
                                                     std::vector<std::vector<float>>* owned) {
  const bool gemma2 = c.arch_kind == ModelArch::kGemma2 || c.arch_kind == ModelArch::kGemma3;  // the same layout
  if (c.n_expert > 0 || (c.post_norms && !gemma2))
    return Unsupported("this model layout is not supported from safetensors");
  // Gemma's RMSNorm multiplies by 1 + w; llama.cpp's converter stores w + 1.
  const float norm_add = gemma2 ? 1.0f : 0.0f;
  ModelWeights w;
  HfLoader l(set, owned);
  const int64_t embd = c.n_embd, vocab = c.n_vocab, ff = c.n_ff, q = c.q_dim(), kv = c.kv_dim();
  LLM_RETURN_IF_ERROR(l.Matrix("model.embed_tokens.weight", vocab, embd, &w.token_embd));
  LLM_RETURN_IF_ERROR(l.Vector("model.norm.weight", embd, &w.output_norm, norm_add));
  if (c.tied_embeddings) {
    // Some tied checkpoints still carry lm_head.weight (a copy): the config
    // decides, as in transformers, and the copy is left unread.
    w.output = w.token_embd;
  } else {
    LLM_RETURN_IF_ERROR(l.Matrix("lm_head.weight", vocab, embd, &w.output));
  }
  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LLM_RETURN_IF_ERROR(l.Vector(p + "input_layernorm.weight", embd, &L.attn_norm, norm_add));
    if (c.fused_qkv) {
      WeightView qkv;
      LLM_RETURN_IF_ERROR(l.Matrix(p + "self_attn.qkv_proj.weight", q + 2 * kv, embd, &qkv));
      L.wq = SubRows(qkv, 0, q);
      L.wk = SubRows(qkv, q, kv);
      L.wv = SubRows(qkv, q + kv, kv);
    } else {
      LLM_RETURN_IF_ERROR(l.Matrix(p + "self_attn.q_proj.weight", q, embd, &L.wq));
      LLM_RETURN_IF_ERROR(l.Matrix(p + "self_attn.k_proj.weight", kv, embd, &L.wk));
      LLM_RETURN_IF_ERROR(l.Matrix(p + "self_attn.v_proj.weight", kv, embd, &L.wv));
    }
    LLM_RETURN_IF_ERROR(l.Matrix(p + "self_attn.o_proj.weight", embd, q, &L.wo));
    if (c.qkv_bias) {
      LLM_RETURN_IF_ERROR(l.Vector(p + "self_attn.q_proj.bias", q, &L.bq));
      LLM_RETURN_IF_ERROR(l.Vector(p + "self_attn.k_proj.bias", kv, &L.bk));
      LLM_RETURN_IF_ERROR(l.Vector(p + "self_attn.v_proj.bias", kv, &L.bv));
    }
    if (c.qk_norm) {
      LLM_RETURN_IF_ERROR(l.Vector(p + "self_attn.q_norm.weight", c.head_dim, &L.q_norm, norm_add));
      LLM_RETURN_IF_ERROR(l.Vector(p + "self_attn.k_norm.weight", c.head_dim, &L.k_norm, norm_add));
    }
    if (gemma2) {
      // Gemma 2 names its four norms after their place around each sub-block.
      LLM_RETURN_IF_ERROR(l.Vector(p + "post_attention_layernorm.weight", embd, &L.post_attn_norm, norm_add));
      LLM_RETURN_IF_ERROR(l.Vector(p + "pre_feedforward_layernorm.weight", embd, &L.ffn_norm, norm_add));
      LLM_RETURN_IF_ERROR(l.Vector(p + "post_feedforward_layernorm.weight", embd, &L.post_ffn_norm, norm_add));
    } else {
      LLM_RETURN_IF_ERROR(l.Vector(p + "post_attention_layernorm.weight", embd, &L.ffn_norm));
    }
    if (c.fused_gate_up) {
      WeightView gu;
      LLM_RETURN_IF_ERROR(l.Matrix(p + "mlp.gate_up_proj.weight", 2 * ff, embd, &gu));
      L.w_gate = SubRows(gu, 0, ff);
      L.w_up = SubRows(gu, ff, ff);
    } else {
      LLM_RETURN_IF_ERROR(l.Matrix(p + "mlp.gate_proj.weight", ff, embd, &L.w_gate));
      LLM_RETURN_IF_ERROR(l.Matrix(p + "mlp.up_proj.weight", ff, embd, &L.w_up));
    }
    LLM_RETURN_IF_ERROR(l.Matrix(p + "mlp.down_proj.weight", embd, ff, &L.w_down));
  }
  for (const SafetensorsTensor* t : set.All()) {
    // rotary_emb.inv_freq: a buffer older exports saved, recomputed from the config.
    if (l.used().count(t->name) || (c.tied_embeddings && t->name == "lm_head.weight") ||
        t->name.ends_with("rotary_emb.inv_freq"))
      continue;
    return Unsupported("tensor " + t->name + " is not used by a " + c.arch +
                       " model here (an unsupported variant, or a layer beyond num_hidden_layers)");
  }
  w.n_params = l.n_params();
  return w;
}

}  // namespace llm
