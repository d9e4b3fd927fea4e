// llm_chat_apply_template: the model's (or the caller's) Jinja chat template
// rendered by src/chat/.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "llm.h"
#include "util/utf8.h"

namespace {

using namespace llm::capi;  // NOLINT: the shims' own helpers

// The text of a special token, as the template's bos_token / eos_token.
std::optional<std::string> SpecialText(const llm::Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.n_vocab()) return std::nullopt;
  std::string s;
  tok.AppendPiece(id, /*render_special=*/true, &s);
  return s;
}

}  // namespace

extern "C" {

LLM_API llm_status llm_chat_apply_template(llm_ctx* ctx, const char* tmpl, const llm_chat_message* messages,
                                           size_t n_messages, int32_t add_generation_prompt, char* out,
                                           size_t capacity, size_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  if (n_messages > 0 && messages == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "messages is NULL but n_messages > 0");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (add_generation_prompt != 0 && add_generation_prompt != 1)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "add_generation_prompt must be 0 or 1");
  return Guard([&]() -> llm_status {
    std::vector<llm::ChatMessage> msgs;
    msgs.reserve(n_messages);
    for (size_t i = 0; i < n_messages; ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (messages[i].role == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".role is NULL");
      if (messages[i].content == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".content is NULL");
      llm::ChatMessage m{messages[i].role, messages[i].content};
      if (!llm::IsValidUtf8(m.role)) return Fail(LLM_ERR_INVALID_UTF8, at + ".role is not valid UTF-8");
      if (!llm::IsValidUtf8(m.content)) return Fail(LLM_ERR_INVALID_UTF8, at + ".content is not valid UTF-8");
      msgs.push_back(std::move(m));
    }

    const llm::Model& model = ctx->engine->model();
    std::string text;
    if (tmpl != nullptr) {
      text = tmpl;
    } else if (model.file && model.file->Has("tokenizer.chat_template")) {
      auto s = model.file->GetString("tokenizer.chat_template");
      if (!s.ok()) return Fail(s.status());
      text = std::string(*s);
    } else if (!model.chat_template.empty()) {
      text = model.chat_template;  // a Hugging Face directory's tokenizer_config.json
    } else if (auto builtin = llm::BuiltinChatTemplate(model.config.arch)) {
      text = std::string(*builtin);  // e.g. Gemma 3 GGUFs without a template
    } else {
      return Fail(LLM_ERR_UNSUPPORTED,
                  "the model has no chat template (GGUF key tokenizer.chat_template); pass one as tmpl");
    }
    // Compiling per call keeps the context free of template state; chat
    // templates compile in microseconds next to the prompt's prefill.
    auto compiled = llm::ChatTemplate::Create(text);
    if (!compiled.ok()) return Fail(compiled.status());

    llm::ChatTemplateOptions opts;
    opts.add_generation_prompt = add_generation_prompt == 1;
    opts.bos_token = SpecialText(*model.tokenizer, model.tokenizer->bos());
    opts.eos_token = SpecialText(*model.tokenizer, model.tokenizer->eos());
    auto rendered = (*compiled)->Apply(msgs, opts);
    if (!rendered.ok()) return Fail(rendered.status());

    *n_out = rendered->size();
    if (rendered->size() > capacity)
      return Fail(LLM_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(rendered->size()) + " bytes");
    if (!rendered->empty()) std::memcpy(out, rendered->data(), rendered->size());
    return Ok();
  });
}

}  // extern "C"
