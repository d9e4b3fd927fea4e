// Model: everything loaded from one model file — the mapping, the
// hyper-parameters, views of the weights, and the tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/fingerprint.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace llm {

struct Model {
  std::unique_ptr<GgufFile> file;  // owns the mapping the weights point into (GGUF)
  std::unique_ptr<SafetensorsSet> safetensors;  // or these mappings (a Hugging Face directory)
  std::vector<std::vector<float>> owned;        // F32 copies of an HF model's norms and biases
  std::string chat_template;  // an HF directory's tokenizer_config.json chat_template; GGUF: in `file`
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  // What identifies these weights to a KV stream (model/fingerprint.h),
  // computed at load, before a backend may drop the mapping's pages.
  ModelFingerprint fingerprint;

  // Loads a GGUF file, or a Hugging Face directory (config.json,
  // *.safetensors, tokenizer.json); path == nullptr loads the model embedded
  // in the library (UNSUPPORTED if this build has none).
  static StatusOr<std::unique_ptr<Model>> Load(const char* path);
  static StatusOr<std::unique_ptr<Model>> FromGguf(std::unique_ptr<GgufFile> file);
  static StatusOr<std::unique_ptr<Model>> FromHfDir(const std::string& dir);  // model_hf.cpp
};

// True when this library carries a built-in model.
bool HaveEmbeddedModel();

}  // namespace llm
