// Writes a Hugging Face model directory holding the same model as a GGUF
// file from llm-synth: the inverse of llama.cpp's convert_hf_to_gguf.py for
// the families it covers (llama, qwen2, qwen3, phi3, gemma2, gemma3), so
// that converting the directory back gives the GGUF's weights bit for bit:
//
//   config.json                 from the GGUF metadata (LlamaForCausalLM, Qwen2/3ForCausalLM, Phi3ForCausalLM,
//                               Gemma2/3ForCausalLM)
//   model.safetensors           tensors under transformers' names, same dtypes;
//   or model-0000N-of-0000M.safetensors + model.safetensors.index.json (shards > 1)
//   tokenizer.json              the GGUF's byte-level BPE vocabulary (tokenizer.ggml.model "gpt2")
//   tokenizer_config.json       bos/eos tokens, add_bos_token, chat_template
//
// llama.cpp's converter permutes the q/k rows of a `llama` model so that
// RoPE's adjacent pairs (2i, 2i+1) hold what HF's rotate_half pairs (i,
// i + d/2) hold; this writer undoes that permutation, so the directory is
// what the converter would have been given.
#pragma once

#include <string>

#include "model/gguf.h"
#include "util/status.h"

namespace llm::synth {

// rope_scaling_json: config.json's rope_scaling object. A GGUF with
// rope_freqs.weight (Llama 3.1 style) needs it: the converter computed that
// tensor from rope_scaling, which the GGUF no longer holds, and the
// directory carries rope_scaling instead of the tensor.
Status WriteHfDir(const GgufFile& gguf, const std::string& dir, int shards = 1,
                  const std::string& rope_scaling_json = "");

// The rope_scaling object for a shape llm-synth gave Llama 3.1 rope_freqs
// (its llama3 factor and original context, low/high frequency factors 1 and 4).
std::string Llama3RopeScalingJson(float factor, int original_ctx);

}  // namespace llm::synth
