#include "model/model.h"

#include <filesystem>

#include "model/vocab_gguf.h"

#if defined(LLM_HAVE_EMBEDDED_MODEL)
extern "C" const unsigned char llm_embedded_model_begin[];
extern "C" const unsigned char llm_embedded_model_end[];
#endif

namespace llm {

bool HaveEmbeddedModel() {
#if defined(LLM_HAVE_EMBEDDED_MODEL)
  return true;
#else
  return false;
#endif
}

StatusOr<std::unique_ptr<Model>> Model::FromGguf(std::unique_ptr<GgufFile> file) {
  auto model = std::make_unique<Model>();
  LLM_ASSIGN_OR_RETURN(model->config, ModelConfig::FromGguf(*file));
  LLM_ASSIGN_OR_RETURN(model->weights, ModelWeights::FromGguf(*file, model->config));
  LLM_ASSIGN_OR_RETURN(TokenizerData tok_data, TokenizerDataFromGguf(*file));
  LLM_ASSIGN_OR_RETURN(model->tokenizer, Tokenizer::Create(std::move(tok_data)));
  if (model->tokenizer->n_vocab() != model->config.n_vocab) {
    return ModelFormatError("tokenizer has " + std::to_string(model->tokenizer->n_vocab()) +
                            " tokens but the model's vocabulary is " +
                            std::to_string(model->config.n_vocab));
  }
  model->fingerprint.arch = model->config.arch;
  for (const GgufTensorInfo& t : file->tensors())
    AddFingerprintTensor(&model->fingerprint, t.name, t.type, t.dims, t.data, t.nbytes);
  model->file = std::move(file);
  return model;
}

StatusOr<std::unique_ptr<Model>> Model::Load(const char* path) {
  if (path == nullptr) {
#if defined(LLM_HAVE_EMBEDDED_MODEL)
    LLM_ASSIGN_OR_RETURN(
        auto file, GgufFile::FromMemory(llm_embedded_model_begin,
                                        static_cast<size_t>(llm_embedded_model_end - llm_embedded_model_begin)));
    return FromGguf(std::move(file));
#else
    return Unsupported("no model_path given and this build embeds no default model");
#endif
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return FromHfDir(path);
  }
  LLM_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
  return FromGguf(std::move(file));
}

}  // namespace llm
