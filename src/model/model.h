// Model: everything loaded from one model file — the mapping, the
// hyper-parameters, views of the weights, and the tokenizer.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace llm {

struct Model {
  std::unique_ptr<GgufFile> file;  // owns the mapping the weights point into
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;

  // Loads a GGUF file; path == nullptr loads the model embedded in the
  // library (UNSUPPORTED if this build has none).
  static StatusOr<std::unique_ptr<Model>> Load(const char* path);
  static StatusOr<std::unique_ptr<Model>> FromGguf(std::unique_ptr<GgufFile> file);
};

// True when this library carries a built-in model.
bool HaveEmbeddedModel();

}  // namespace llm
