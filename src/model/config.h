// Hyper-parameters of a Llama-family model, read from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace llm {

class GgufFile;

enum class RopeScalingType : int32_t { kNone = 0, kLinear = 1, kYarn = 2, kLlama3 = 3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;                 // context extension factor
  int32_t original_ctx = 0;            // context the model was trained at before scaling
  float low_freq_factor = 1.0f;        // llama3 only
  float high_freq_factor = 4.0f;       // llama3 only
};

struct ModelConfig {
  std::string arch;        // "llama"
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

  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t q_dim() const { return n_head * head_dim; }

  // Reads and validates `llama` (and compatible) metadata.
  static StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace llm
