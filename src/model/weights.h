// Views of a Llama / Qwen / Gemma 3 model's weight tensors. The bytes stay where the loader put
// them (a memory-mapped GGUF file); these structs only point into them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/tensor_type.h"
#include "util/status.h"

namespace llm {

class SafetensorsSet;
class GgufFile;

// A row-major matrix (rows, cols) of `type`: row r starts at
// data + r * row_bytes. For a linear layer y = W x, rows = out features and
// cols = in features (GGUF dims are {cols, rows}: ne0 is the fastest).
// A 1-D tensor (a norm weight) has rows = 1.
struct WeightView {
  TensorType type = TensorType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  // Optional second copy of the same matrix in a backend's own layout (the
  // CPU backend's row-interleaved quants: backend/cpu/quant_pack.h); owned by
  // that backend, null elsewhere. Readers that do not know it use `data`.
  const void* packed = nullptr;

  bool empty() const { return data == nullptr; }
};

struct LayerWeights {
  WeightView attn_norm;  // (n_embd) F32
  WeightView wq;         // (n_head*head_dim, n_embd)
  WeightView wk;         // (n_head_kv*head_dim, n_embd)
  WeightView wv;         // (n_head_kv*head_dim, n_embd)
  WeightView wo;         // (n_embd, n_head*head_dim)
  WeightView ffn_norm;   // (n_embd) F32
  WeightView w_gate;     // (n_ff, n_embd)   ffn_gate
  WeightView w_up;       // (n_ff, n_embd)   ffn_up
  WeightView w_down;     // (n_embd, n_ff)   ffn_down
  // Mixture of Experts (config.n_expert > 0; w_gate/w_up/w_down empty):
  WeightView router;                 // (n_expert, n_embd)   ffn_gate_inp
  std::vector<WeightView> exp_gate;  // (n_expert) of (n_ff_exp, n_embd)  views into ffn_gate_exps
  std::vector<WeightView> exp_up;    // (n_expert) of (n_ff_exp, n_embd)  views into ffn_up_exps
  std::vector<WeightView> exp_down;  // (n_expert) of (n_embd, n_ff_exp)  views into ffn_down_exps
  WeightView shexp_gate_inp;         // (n_embd)              ffn_gate_inp_shexp (config.n_ff_shexp > 0)
  WeightView shexp_gate;             // (n_ff_shexp, n_embd)  ffn_gate_shexp
  WeightView shexp_up;               // (n_ff_shexp, n_embd)  ffn_up_shexp
  WeightView shexp_down;             // (n_embd, n_ff_shexp)  ffn_down_shexp
  // Qwen2 only (empty() otherwise): config.qkv_bias.
  WeightView bq;              // (n_head*head_dim) F32     attn_q.bias
  WeightView bk;              // (n_head_kv*head_dim) F32  attn_k.bias
  WeightView bv;              // (n_head_kv*head_dim) F32  attn_v.bias
  // Gemma 3 and Qwen3 (empty() for Llama): config.qk_norm; Gemma 3: config.post_norms.
  WeightView q_norm;          // (head_dim) F32  attn_q_norm, shared by every query head
  WeightView k_norm;          // (head_dim) F32  attn_k_norm
  WeightView post_attn_norm;  // (n_embd) F32    post_attention_norm
  WeightView post_ffn_norm;   // (n_embd) F32    post_ffw_norm
  // BERT (config.norm_kind == kLayer): post_attn_norm / post_ffn_norm are
  // attn_output_norm / layer_output_norm, each with its bias; every linear
  // layer has a bias (bq, bk, bv above and these); attn_norm, ffn_norm and
  // w_gate are empty.
  WeightView bo;              // (n_embd) F32  attn_output.bias
  WeightView b_up;            // (n_ff) F32    ffn_up.bias
  WeightView b_down;          // (n_embd) F32  ffn_down.bias
  WeightView post_attn_norm_b;  // (n_embd) F32  attn_output_norm.bias
  WeightView post_ffn_norm_b;   // (n_embd) F32  layer_output_norm.bias
  // gpt-oss (config.attn_sinks, out_bias, expert_bias; bo above is its
  // attn_output.bias, ffn_norm its post_attention_norm):
  WeightView attn_sinks;  // (n_head) F32                 attn_sinks.weight
  WeightView router_b;    // (n_expert) F32               ffn_gate_inp.bias
  WeightView exp_gate_b;  // (n_expert, n_ff_exp) F32     ffn_gate_exps.bias
  WeightView exp_up_b;    // (n_expert, n_ff_exp) F32     ffn_up_exps.bias
  WeightView exp_down_b;  // (n_expert, n_embd) F32       ffn_down_exps.bias
};

struct ModelWeights {
  WeightView token_embd;   // (n_vocab, n_embd)
  WeightView output_norm;  // (n_embd) F32
  WeightView output;       // (n_vocab, n_embd); == token_embd when tied
  std::vector<LayerWeights> layers;  // (n_layer)
  WeightView rope_freqs;   // (rope_dim/2) F32, optional (empty() when absent)
  WeightView rope_factors_long;   // (rope_dim/2) F32, LongRoPE only (config.has_longrope)
  WeightView rope_factors_short;  // (rope_dim/2) F32, LongRoPE only
  // ---- encoders (BERT; empty otherwise)
  WeightView position_embd;  // (n_ctx_train, n_embd)  absolute positions
  WeightView token_types;    // (n_token_types, n_embd)
  WeightView embd_norm;      // (n_embd) F32  token_embd_norm.weight
  WeightView embd_norm_b;    // (n_embd) F32  token_embd_norm.bias
  WeightView cls;            // (n_embd, n_embd)    cls.weight: the classifier head's dense layer (optional)
  WeightView cls_b;          // (n_embd) F32        cls.bias
  WeightView cls_out;        // (n_cls_out, n_embd) cls.output.weight (optional)
  WeightView cls_out_b;      // (n_cls_out) F32     cls.output.bias
  // ---- EmbeddingGemma's projections of the pooled vector (config.n_dense > 0)
  WeightView dense_2;        // (n_dense, n_embd)   dense_2.weight
  WeightView dense_3;        // (n_embd, n_dense)   dense_3.weight
  int64_t n_params = 0;     // elements of the tensors above (a tied output counted once)
  // The matrices' `data` point into a read-only private file mapping
  // (GgufFile::file_mapped): a backend that copies a matrix into its own
  // layout may drop the original's resident pages (MmapFile::ReleasePages).
  bool file_mapped = false;

  // Finds every tensor by its GGUF name (token_embd.weight, blk.N.attn_q.weight,
  // ...), checks its type and shape against `config`.
  static StatusOr<ModelWeights> FromGguf(const GgufFile& file, const ModelConfig& config);
  // Finds every tensor of a Hugging Face checkpoint by its name
  // (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...;
  // weights_hf.cpp). Matrices stay in the mapping; norm weights and biases
  // are converted to F32 into `owned`, which must live as long as the views.
  static StatusOr<ModelWeights> FromSafetensors(const SafetensorsSet& set, const ModelConfig& config,
                                                std::vector<std::vector<float>>* owned);
};

// The `bert` reader behind ModelWeights::FromGguf (weights_bert.cpp).
StatusOr<ModelWeights> BertWeightsFromGguf(const GgufFile& file, const ModelConfig& config);

}  // namespace llm
