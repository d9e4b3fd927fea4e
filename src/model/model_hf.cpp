// Model::FromHfDir: a Hugging Face model directory —
//
//   config.json                      hyper-parameters (hf_config.cpp)
//   model.safetensors                weights, or shards named by
//   model.safetensors.index.json       its weight_map (safetensors.h)
//   tokenizer.json                   vocabulary (tokenizer/vocab_hf.cpp)
//   tokenizer_config.json            bos/eos, add_bos, chat_template
#include <filesystem>
#include <string>

#include "model/model.h"
#include "util/json.h"
#include "util/mmap_file.h"

namespace llm {
namespace {

StatusOr<Json> ReadJson(const std::string& path, bool optional) {
  std::error_code ec;
  if (optional && !std::filesystem::exists(path, ec)) return Json::Null();
  LLM_ASSIGN_OR_RETURN(auto m, MmapFile::Open(path));
  if (m->size() > (64u << 20)) return ModelFormatError(path + " is larger than 64 MiB");
  auto j = ParseJson(std::string_view(static_cast<const char*>(m->data()), m->size()));
  if (!j.ok()) return ModelFormatError(path + ": " + j.status().message());
  return std::move(j).value();
}

// tokenizer_config.json's chat_template: a string, or a list of {"name",
// "template"} from which the "default" one is taken; "" when absent.
StatusOr<std::string> ChatTemplate(const Json& tok_cfg, const std::string& path) {
  const Json* t = tok_cfg.Find("chat_template");
  if (t == nullptr || t->is_null()) return std::string();
  if (t->is_string()) return t->as_string();
  if (t->is_array()) {
    for (const Json& e : t->array()) {
      const Json* name = e.Find("name");
      const Json* tmpl = e.Find("template");
      if (name != nullptr && name->as_string() == "default" && tmpl != nullptr && tmpl->is_string())
        return tmpl->as_string();
    }
  }
  return ModelFormatError(path + ": chat_template is neither a string nor a list with a 'default' template");
}

}  // namespace

StatusOr<std::unique_ptr<Model>> Model::FromHfDir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(cfg_path, ec))
    return Unsupported("'" + dir + "' is a directory without config.json (not a Hugging Face model directory)");
  auto model = std::make_unique<Model>();
  LLM_ASSIGN_OR_RETURN(Json cfg, ReadJson(cfg_path, false));
  LLM_ASSIGN_OR_RETURN(model->config, ModelConfig::FromHfConfig(cfg));
  LLM_ASSIGN_OR_RETURN(model->safetensors, SafetensorsSet::OpenDir(dir));
  LLM_ASSIGN_OR_RETURN(model->weights,
                       ModelWeights::FromSafetensors(*model->safetensors, model->config, &model->owned));

  const std::string tok_path = (fs::path(dir) / "tokenizer.json").string();
  LLM_ASSIGN_OR_RETURN(TokenizerData tok_data, TokenizerDataFromHfJson(tok_path));
  const std::string tok_cfg_path = (fs::path(dir) / "tokenizer_config.json").string();
  LLM_ASSIGN_OR_RETURN(Json tok_cfg, ReadJson(tok_cfg_path, true));
  LLM_ASSIGN_OR_RETURN(model->chat_template, ChatTemplate(tok_cfg, tok_cfg_path));
  // config.json's vocab_size counts the embedding's rows, which HF pads
  // past the tokenizer's last id (Qwen: 151936 rows for 151665 tokens);
  // llama.cpp's converter pads the vocabulary with unused tokens to match.
  const int32_t n_tok = static_cast<int32_t>(tok_data.tokens.size());
  if (n_tok > model->config.n_vocab)
    return ModelFormatError("tokenizer.json has " + std::to_string(n_tok) + " tokens but config.json's vocab_size is " +
                            std::to_string(model->config.n_vocab));
  for (int32_t i = n_tok; i < model->config.n_vocab; ++i) {
    tok_data.tokens.push_back("[PAD" + std::to_string(i) + "]");
    if (!tok_data.scores.empty()) tok_data.scores.push_back(0.0f);
    if (!tok_data.token_types.empty()) tok_data.token_types.push_back(kTokenUnused);
  }
  LLM_ASSIGN_OR_RETURN(model->tokenizer, Tokenizer::Create(std::move(tok_data)));
  model->fingerprint.arch = model->config.arch;
  for (const SafetensorsTensor* t : model->safetensors->All())
    AddFingerprintTensor(&model->fingerprint, t->name, t->type, t->shape, t->data, t->nbytes);
  return model;
}

}  // namespace llm
