// Hyper-parameters of a Llama-family, Qwen2/Qwen3 or Gemma 3 model, read
// from GGUF metadata.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace llm {

class GgufFile;
class Json;

enum class RopeScalingType : int32_t { kNone = 0, kLinear = 1, kYarn = 2, kLlama3 = 3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;                 // context extension factor
  int32_t original_ctx = 0;            // context the model was trained at before scaling
  float low_freq_factor = 1.0f;        // llama3 only
  float high_freq_factor = 4.0f;       // llama3 only
  float beta_fast = 32.0f;             // yarn only: the ramp between interpolated and kept pairs
  float beta_slow = 1.0f;              // yarn only
};

// The transformer variant. Gemma 3 is a Llama block with extras, each a
// field below that a Llama model leaves at its default:
//
//   x = embed(tok) * sqrt(n_embd)
//   per layer:  h = attn(rmsnorm(x))  with q, k RMS-normed per head before RoPE,
//                                      sliding-window on local layers
//               x += rmsnorm(h · Woᵀ)                  (post_attention_norm)
//               x += rmsnorm(ffn_gelu(rmsnorm(x)))     (ffn_norm, post_ffw_norm)
//   logits = rmsnorm(x) · Eᵀ  (tied), soft-capped if the file says so
//
// Qwen2 and Qwen3 are the Llama block with NEOX RoPE and, for Qwen2, biases
// on q/k/v; for Qwen3, Gemma's per-head q/k RMSNorm (qk_norm).
// Gemma 2 is Gemma 3 without the q/k norms, with attention logits
// soft-capped (attn_logit_softcap) and every other layer local.
// Phi-3 is the Llama block with NEOX RoPE over part of each head, q/k/v in
// one tensor and gate/up in one tensor (fused_qkv, fused_gate_up).
//
// Mixture of Experts (n_expert > 0: Mixtral-style `llama`, `qwen3moe`)
// replaces the FFN: a router picks n_expert_used experts per token from the
// softmax of its logits, their weights renormalised to sum to 1, and the
// token's FFN output is the weighted sum of those experts' SwiGLU outputs.
//
// gpt-oss is the Llama block with NEOX RoPE (YaRN on every layer), biases on
// q/k/v/o, layers alternating sliding-window (even) and global (odd), a
// learned per-head attention sink (a logit in each softmax's denominator,
// attn_sinks), and a MoE whose router has a bias and picks the top k of its
// raw logits, weighted by the softmax over those k; its experts have biases
// and a clamped SwiGLU (FfnActivation::kSwigluOai). The pre-FFN norm is
// stored as post_attention_norm.
enum class ModelArch : int32_t {
  kLlama = 0, kGemma3 = 1, kQwen2 = 2, kQwen3 = 3, kGemma2 = 4, kPhi3 = 5, kQwen3Moe = 6, kQwen2Moe = 7,
  kBert = 8, kGptOss = 9, kNomicBert = 10
};

// How an embedding model turns a sequence's hidden states into its output,
// with GGUF's `<arch>.pooling_type` values (llama.cpp's enum):
// none = every token's vector, mean over the tokens, the first (CLS) or the
// last token's vector, rank = the classification head's score(s) over CLS.
enum class Pooling : int32_t { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };

// Which normalisation the model's blocks use: RMSNorm (x * w) or LayerNorm
// with bias ((x - mean) / sd * w + b; BERT).
enum class NormKind : int32_t { kRms = 0, kLayer = 1 };

// Which values RoPE rotates together in a head: adjacent pairs (x[2i],
// x[2i+1]) — GGUF `llama`, whose converter permutes Q/K rows for it — or the
// two halves (x[i], x[i + rope_dim/2]), "NEOX" style (Gemma: unpermuted HF rows).
enum class RopeStyle : int32_t { kAdjacent = 0, kNeox = 1 };

// The FFN's gate activation: silu(g) * u (SwiGLU) or gelu_tanh(g) * u (GeGLU);
// kSwigluOai, gpt-oss's experts (biases added first):
//   g' = min(g, limit), u' = clamp(u, -limit, limit)
//   out = g' * sigmoid(alpha * g') * (u' + 1)      alpha 1.702, limit 7
enum class FfnActivation : int32_t { kSilu = 0, kGeluTanh = 1, kSwigluOai = 2 };
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

struct ModelConfig {
  std::string arch;        // general.architecture: "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "gpt-oss" or "bert"
  ModelArch arch_kind = ModelArch::kLlama;
  std::string name;        // general.name, may be empty
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;      // model dimension
  int32_t n_layer = 0;
  int32_t n_head = 0;      // query heads
  int32_t n_head_kv = 0;   // key/value heads (GQA: n_head % n_head_kv == 0)
  int32_t head_dim = 0;    // n_embd / n_head unless the file says otherwise
  int32_t n_ff = 0;        // MLP hidden dimension
  int32_t rope_dim = 0;    // dimensions rotated per head (= head_dim for llama)
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: logits use token_embd
  // The file carries rope_freqs.weight (rope_dim/2 F32, Llama 3.1 style): the
  // rotation frequency of pair i is divided by rope_freqs[i]. The scaling is
  // baked into that tensor, so rope_scaling.type stays as the metadata says.
  bool has_rope_freqs = false;
  // LongRoPE (Phi-3.5, Phi-4-mini): the file carries rope_factors_long and
  // rope_factors_short.weight (rope_dim/2 F32 each), per-pair divisors like
  // rope_freqs; llama.cpp takes the long ones when a sequence's context
  // (n_ctx / n_seq_max there, our n_ctx) exceeds rope_scaling.original_ctx
  // (default n_ctx_train), else the short ones (RopeFactorsFor, rope_freq.h).
  bool has_longrope = false;
  // rope.scaling.attn_factor (any family, default 1): cos and sin are
  // multiplied by it (ggml_rope_ext's attn_factor, from llama.cpp's
  // hparams.rope_attn_factor); Phi-3's converter writes
  // sqrt(1 + ln(scale) / ln(original context)) with LongRoPE.
  float rope_attn_factor = 1.0f;

  // ---- family extensions (Gemma 3, Qwen); the defaults are the Llama block.
  int32_t n_expert = 0;           // experts per MoE layer; 0 = a dense FFN
  int32_t n_expert_used = 0;      // experts each token is routed to (top-k)
  int32_t n_ff_exp = 0;           // an expert's hidden dimension (qwen3moe: its own key; llama: n_ff)
  bool expert_weights_norm = true;  // chosen weights renormalised to sum 1 (qwen2moe: not)
  // gpt-oss: the top n_expert_used of the router's raw logits (plus its
  // bias), weighted by the softmax over those logits alone.
  bool expert_softmax_topk = false;
  bool expert_bias = false;       // ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias (gpt-oss)
  int32_t n_ff_shexp = 0;         // > 0: a shared expert every token runs, gated by sigmoid(xn·w) (qwen2moe)
  bool fused_qkv = false;         // blk.N.attn_qkv.weight instead of attn_q/k/v (Phi-3; any family's file may)
  bool fused_gate_up = false;     // ffn_up.weight holds gate rows then up rows, no ffn_gate (Phi-3)
  bool qkv_bias = false;          // attn_{q,k,v}.bias added after the projections (Qwen2; any family's file may have them)
  bool out_bias = false;          // attn_output.bias added after the output projection (gpt-oss)
  // attn_sinks.weight (n_head F32, gpt-oss): head h's softmax has an extra
  // logit sinks[h] in its denominator (no value): p_j = e^(s_j - m) /
  // (Σ e^(s_i - m) + e^(sinks[h] - m)), m the max over the s and the sink.
  bool attn_sinks = false;
  RopeStyle rope_style = RopeStyle::kAdjacent;
  // M-RoPE (`qwen2vl`: Qwen2-VL / Qwen2.5-VL's text model), from
  // rope.dimension_sections (t, h, w, e): each token has a position per
  // section (t, h, w; e is always 0), and rotated pair i (NEOX-paired, its
  // frequency theta^(-2i/rope_dim) as without sections) turns by the
  // position of the section that (i mod the sections' sum) falls in:
  //   pairs  [0, t) by t, [t, t+h) by h, [t+h, t+h+w) by w, the rest by e.
  // A text token at position p has (p, p, p). All zero: no M-RoPE.
  std::array<int32_t, 4> mrope_sections{};
  bool mrope() const { return mrope_sections[0] + mrope_sections[1] + mrope_sections[2] + mrope_sections[3] > 0; }
  FfnActivation ffn_act = FfnActivation::kSilu;
  float embd_scale = 1.0f;        // token embeddings are multiplied by this
  float attn_scale = 0.0f;        // q·k scale; 0 means 1/sqrt(head_dim)
  bool qk_norm = false;           // attn_q_norm / attn_k_norm: RMSNorm over each head before RoPE (Gemma 3, Qwen3)
  bool post_norms = false;        // post_attention_norm / post_ffw_norm on each sub-block's output
  // Local (sliding-window) attention: a query at position p of a local layer
  // sees keys p - sliding_window + 1 .. p; 0 = every layer global.
  int32_t sliding_window = 0;
  // With sliding_window > 0, layer il is global when il % swa_pattern ==
  // swa_pattern - 1, else local (Gemma 3: 6, five local then one global);
  // 0 makes every layer local (llama.cpp's meaning of a pattern of 0).
  int32_t swa_pattern = 0;
  float rope_theta_swa = 10000.0f;  // local layers' RoPE base; they use no RoPE scaling
  bool swa_rope_global = false;     // local layers rotate exactly as global ones (gpt-oss: YaRN on all)
  float final_logit_softcap = 0.0f; // > 0: logits = c * tanh(logits / c)
  float attn_logit_softcap = 0.0f;  // > 0: scaled q·k scores = c * tanh(s / c) before the softmax (Gemma 2)

  // ---- encoders (BERT). A BERT block, as llama.cpp runs `bert`:
  //
  //   x = layernorm(tok_embd[t] + pos_embd[p] + type_embd[0])        (token_embd_norm)
  //   per layer:  h = attention(x)  over every token of the sequence (not causal),
  //                                  q/k/v/o with biases, no RoPE
  //               x = layernorm(x + h)                                (attn_output_norm)
  //               x = layernorm(x + gelu(x·Wupᵀ + b)·Wdownᵀ + b)      (layer_output_norm)
  //   output = pool(x)   (no final norm, no vocabulary head)
  // `nomic-bert` (nomic-embed-text v1/v1.5) is the same post-norm block with
  // no position_embd: RoPE (NEOX, rope.freq_base) on q and k, one fused
  // attn_qkv without biases, and a SwiGLU FFN (silu(x·Wgateᵀ) * x·Wupᵀ, then
  // Wdown) without biases (ffn_act kSilu, rope_encoder true).
  bool causal = true;             // false: a token attends to every token of its sequence
  bool is_encoder = false;        // produces vectors (Backend::Encode), not logits
  NormKind norm_kind = NormKind::kRms;
  int32_t n_token_types = 0;      // rows of token_types.weight (0: none)
  bool rope_encoder = false;      // nomic-bert: rotary positions and a gated FFN, no position_embd
  Pooling pooling = Pooling::kNone;  // the file's default pooling (`<arch>.pooling_type`)
  int32_t n_cls_out = 0;          // rows of cls.output.weight: the classifier head's outputs (RANK)
  // Decoder embedding models (Qwen3-Embedding, Qwen3-Reranker): a causal
  // decoder whose file names a pooling (`<arch>.pooling_type`, written from
  // sentence-transformers' pooling config, or rank for a reranker) makes
  // vectors from its final-normed hidden states; it can still generate.
  // Rank on a decoder: the last token's state · cls.output.weightᵀ, then a
  // softmax over the outputs for qwen3 (the reranker's [yes, no] rows of
  // the vocabulary head: the score is P(yes)), as llama.cpp.
  // EmbeddingGemma (`gemma-embedding`): a Gemma 3 decoder with causal =
  // false (every token attends to its whole sequence; local layers to the
  // keys within sliding_window / 2 either side) that only makes embeddings;
  // n_dense > 0: its pooled vector goes through dense_2 (n_embd -> n_dense)
  // then dense_3 (n_dense -> n_embd), no biases (sentence-transformers'
  // Dense modules), as llama.cpp applies them after pooling.
  int32_t n_dense = 0;
  bool MakesEmbeddings() const { return is_encoder || pooling != Pooling::kNone; }

  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t q_dim() const { return n_head * head_dim; }
  bool IsLocalLayer(int32_t il) const {
    return sliding_window > 0 && (swa_pattern == 0 || il % swa_pattern < swa_pattern - 1);
  }
  float AttnScale() const;

  // Reads and validates `llama` (and compatible), `qwen2`, `qwen3` or
  // `gemma3` metadata.
  static StatusOr<ModelConfig> FromGguf(const GgufFile& file);
  // Reads a Hugging Face config.json (Llama, Mistral, Qwen2, Qwen3): the
  // config the GGUF converted from the same directory gives (hf_config.cpp).
  static StatusOr<ModelConfig> FromHfConfig(const Json& config_json);
};

}  // namespace llm
