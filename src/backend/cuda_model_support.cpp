// Which model features the CUDA backend runs: one list, read by the CUDA
// backend's Create and by the context builder (AUTO falls back to the CPU,
// an explicit CUDA request is refused with this message). Compiled in every
// build, CUDA or not.
#include "backend/backend.h"

namespace llm {

Status CudaSupportsModel(const ModelConfig& c) {
  // gpt-oss's clamped SwiGLU runs in its experts (cuda_moe.cpp) only, not in
  // a dense FFN; its output bias is added before any post-attention norm,
  // which no family the CPU runs combines with it.
  if (c.ffn_act == FfnActivation::kSwigluOai && c.n_expert == 0)
    return Unsupported("the CUDA backend runs the clamped SwiGLU (gpt-oss) in experts only, not in a dense FFN ('" +
                       c.arch + "')");
  if (c.out_bias && c.post_norms)
    return Unsupported("the CUDA backend does not run an attention output bias together with post-norms ('" + c.arch +
                       "')");
  // The per-sequence-context choice of LongRoPE factors (RopeFactorsFor) is
  // the CPU backend's alone so far.
  if (c.has_longrope)
    return Unsupported("the CUDA backend does not run LongRoPE (rope_factors_long/short, '" + c.arch + "')");
  // M-RoPE (qwen2vl): a position triple per token, sections of each head
  // turned by different positions; the CUDA RoPE kernels take one position.
  if (c.mrope())
    return Unsupported("the CUDA backend does not run M-RoPE (rope.dimension_sections, '" + c.arch +
                       "': Qwen2-VL / Qwen2.5-VL text) yet");
  // Encoders (BERT) run through Backend::Encode, the CPU's alone so far.
  if (c.is_encoder)
    return Unsupported("the CUDA backend does not run encoder (embedding) models yet ('" + c.arch + "')");
  // A decoder embedding model (a pooling in its file) needs Backend::Encode too.
  if (c.MakesEmbeddings())
    return Unsupported("the CUDA backend does not make embeddings yet (the '" + c.arch +
                       "' file names a pooling: an embedding model)");
  switch (c.arch_kind) {
    case ModelArch::kLlama:   // Llama, Mistral (explicit head_dim, sliding window), Mixtral (experts)
    case ModelArch::kGemma3:  // q/k norms, post-norms, local layers, GeGLU, embedding scale
    case ModelArch::kGemma2:  // soft-caps, alternating sliding windows, post-norms
    case ModelArch::kQwen2:   // q/k/v biases, YaRN
    case ModelArch::kQwen3:   // per-head q/k norms
    case ModelArch::kPhi3:    // fused QKV and gate/up (split into views at load), partial rotary
    case ModelArch::kQwen2Moe:  // experts (cuda_moe.cpp), weights not renormalised, a gated shared expert
    case ModelArch::kQwen3Moe:  // experts, per-head q/k norms
    case ModelArch::kGptOss:    // sinks, q/k/v/o biases, biased router and clamped-SwiGLU experts, YaRN everywhere
      break;
    default:
      return Unsupported("the CUDA backend does not run the '" + c.arch + "' architecture");
  }
  return Status::Ok();
}

}  // namespace llm
