// Synthetic models of the supported families (llama, qwen2, qwen3, gemma2,
// phi3, qwen3moe, Mixtral-style llama): a GGUF
// file of a named shape with random weights (fixed seed: the same file for
// the same arguments on any machine and any thread count), with the tensor
// names and metadata llama.cpp's converter writes for the family, so llmrt
// and other GGUF runtimes load it. For benchmarks at real model sizes
// without downloading weights, and for the families' tests against
// llama.cpp (tools/family_reference.py) on tiny shapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.h"
#include "model/tensor_type.h"
#include "util/status.h"

namespace llm::synth {

struct SynthShape {
  std::string name;
  int32_t n_vocab = 0;      // used when no vocabulary file is given
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;
  // Llama 3.1 frequency scaling, written as rope_freqs.weight (as llama.cpp's
  // converter does); 0 = none.
  float llama3_factor = 0.0f;
  int32_t llama3_original_ctx = 8192;
  // The family, as general.architecture and llama.cpp's tensor conventions:
  // "llama"; "qwen2" (q/k/v biases, NEOX RoPE); "qwen3" (per-head q/k
  // RMSNorm, NEOX RoPE); "gemma2" (post-norms, soft-caps, alternating
  // sliding-window layers); "phi3" (fused attn_qkv and gate+up, partial
  // rotary); "qwen3moe" (qwen3 with experts; a llama shape with n_expert is
  // Mixtral-style).
  std::string arch = "llama";
  int32_t sliding_window = 0;  // > 0: written as attention.sliding_window (Mistral, Gemma 2, Phi-3)
  int32_t rope_dim = 0;        // rotated dimensions per head; 0 = head_dim (Phi-3: partial)
  int32_t n_expert = 0;        // > 0: Mixture of Experts (llama: Mixtral; qwen3moe)
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;        // qwen3moe's expert_feed_forward_length
  float yarn_factor = 0.0f;    // > 0: rope.scaling.type yarn with this factor (Qwen2.5 long context)
  int32_t yarn_original_ctx = 0;
  int32_t n_ff_shexp = 0;      // qwen2moe's shared expert
  // > 0: Phi-3.5-style LongRoPE as its converter writes it: rope_factors_long
  // and rope_factors_short.weight, rope.scaling.original_context_length this
  // value and rope.scaling.attn_factor sqrt(1 + ln(n_ctx / it) / ln(it)).
  int32_t longrope_original_ctx = 0;
  // gpt-oss: its experts in the --type of the other matrices instead of
  // MXFP4 (the architecture's test without the activation quantization an
  // MXFP4 matmul brings).
  bool plain_experts = false;
  // "bert" (synth_bert.cpp): the pooling_type written (llama.cpp's values:
  // 1 mean, 2 cls, 4 rank) and, > 0, a classifier head of this many outputs
  // (cls.weight + cls.output.weight: a cross-encoder / reranker).
  int32_t pooling = 1;
  int32_t n_cls_out = 0;
  int32_t n_token_types = 2;     // rows of token_types.weight (XLM-RoBERTa: 1)
  bool vocab_required = false;   // the vocabulary comes from --vocab-from (XLM-RoBERTa's Unigram)
  // > 0: a decoder embedding model (the other families): `<arch>.pooling_type`
  // this value (3 last: Qwen3-Embedding, whose tokenizer also appends
  // <|endoftext|>; 4 rank: Qwen3-Reranker, with n_cls_out rows of
  // cls.output.weight and the labels "yes", "no").
  int32_t decoder_pooling = 0;
  // > 0: attention.sliding_window_pattern written (Gemma 3's period; absent,
  // readers take 6).
  int32_t swa_pattern = 0;
  // > 0: `gemma-embedding`'s dense_2 (n_embd -> n_dense) and dense_3
  // (n_dense -> n_embd) projections and their feat_in / feat_out keys.
  int32_t n_dense = 0;
};

// "tiny", "llama-3.2-1b", "llama-3.1-8b", ...; nullptr for an unknown name.
const SynthShape* FindSynthShape(std::string_view name);
std::vector<std::string> SynthShapeNames();

struct SynthOptions {
  TensorType type = TensorType::BF16;  // of the 2-D weights: F32, F16 or BF16 (norms are F32)
  // llama family only: the 2-D weights in llama.cpp's Q4_K_M mix of Q4_K and
  // Q6_K blocks instead of `type` (synth_quant.h), for GPU benchmarks.
  bool q4_k_m = false;
  // llama family only: the 2-D weights in the low-bit mix of IQ4_XS, IQ4_NL,
  // Q3_K, Q2_K and Q6_K blocks (synth_quant.h, LowBitType), for the low-bit
  // types' tests.
  bool low_bit = false;
  // llama family only: the lattice mix of IQ3_XXS, IQ3_S, IQ2_XS, IQ2_S,
  // IQ2_XXS and Q6_K blocks (synth_quant.h, IQMixType).
  bool iq_mix = false;
  uint64_t seed = 1234;
  float stddev = 0.02f;                // weights ~ N(0, stddev); norms = 1
  float norm_std = 0.0f;               // norms ~ 1 + N(0, norm_std), so a norm weight read wrongly shows
  float bias_std = 0.5f;               // biases ~ N(0, bias_std) (qwen2's q/k/v)
  bool drop_rope_freqs = false;        // leave rope_freqs.weight out (every other tensor unchanged)
  bool bpe_vocab = false;              // any family: Qwen's byte-level BPE vocabulary (300 tokens), which
                                       // a Hugging Face tokenizer.json can express (WriteHfDir)
  const GgufFile* vocab = nullptr;     // copy tokenizer.* from here; null: a synthetic SentencePiece vocabulary
  // Qwen's byte-level vocabulary only: "<think>" and "</think>" as
  // user-defined tokens (as Qwen3's are) in place of its last two merges,
  // for the reasoning tests (issue 32). The vocabulary size is unchanged.
  bool think_tokens = false;
  // Likewise harmony's (gpt-oss's) control tokens <|start|>, <|channel|>,
  // <|message|> and <|end|>, in place of four more merges.
  bool harmony_tokens = false;
  std::string chat_template;           // tokenizer.chat_template when not empty (the family's real template,
                                       // so the tools render what the real model's file would make them render)
  int threads = 0;                     // 0 = hardware concurrency
};

// Parameter count of the shape (a tied output counted once).
int64_t SynthParams(const SynthShape& shape, int32_t n_vocab);

Status WriteSynthModel(const SynthShape& shape, const SynthOptions& options, const std::string& path);

// The `bert` family (synth_bert.cpp): absolute positions, token types,
// LayerNorms with biases, biases on every linear layer, a WordPiece vocabulary
// ([PAD] [UNK] [CLS] [SEP] [MASK], letters, continuations, words "w<i>") or
// the tokenizer of --vocab-from (XLM-RoBERTa's Unigram); and `nomic-bert`
// (RoPE, fused attn_qkv, SwiGLU, no biases).
Status WriteSynthBert(const SynthShape& shape, const SynthOptions& options, const std::string& path);

// The random streams and encodings WriteSynthModel uses, for the family
// writers beside it: n values ~ N(0, sd) from `key`; a tensor name's key;
// F32 -> F32/F16/BF16 bytes.
void SynthNormals(uint64_t key, int64_t n, float sd, float* out);
uint64_t SynthNameKey(const std::string& name);
void SynthEncode(TensorType t, const float* src, int64_t n, char* dst);

}  // namespace llm::synth
