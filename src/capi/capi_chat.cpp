// llm_chat_apply_template: the model's (or the caller's) Jinja chat template
// rendered by src/chat/.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "engine/reasoning_parser.h"
#include "llm.h"
#include "util/json.h"
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

// The model's own chat template: the GGUF key, a Hugging Face directory's
// tokenizer_config.json, or the library's copy for its architecture.
llm::StatusOr<std::string> ModelTemplate(const llm::Model& model) {
  if (model.file && model.file->Has("tokenizer.chat_template")) {
    auto s = model.file->GetString("tokenizer.chat_template");
    if (!s.ok()) return s.status();
    return std::string(*s);
  }
  if (!model.chat_template.empty()) return model.chat_template;
  if (auto builtin = llm::BuiltinChatTemplate(model.config.arch)) return std::string(*builtin);
  return llm::Status(LLM_ERR_UNSUPPORTED,
                     "the model has no chat template (GGUF key tokenizer.chat_template); pass one as tmpl");
}

// The template a call renders: the caller's, else the model's own.
llm::StatusOr<std::string> TemplateText(const llm::Model& model, const char* tmpl) {
  if (tmpl != nullptr) return std::string(tmpl);
  return ModelTemplate(model);
}

llm::ChatTemplateOptions TemplateOptions(const llm::Model& model, int32_t add_generation_prompt) {
  llm::ChatTemplateOptions opts;
  opts.add_generation_prompt = add_generation_prompt == 1;
  opts.bos_token = SpecialText(*model.tokenizer, model.tokenizer->bos());
  opts.eos_token = SpecialText(*model.tokenizer, model.tokenizer->eos());
  return opts;
}

// Copies a result into the caller's buffer (*n_out: its size, also when the
// buffer is too small).
llm_status CopyOut(const std::string& s, char* out, size_t capacity, size_t* n_out) {
  *n_out = s.size();
  if (s.size() > capacity) return Fail(LLM_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(s.size()) + " bytes");
  if (!s.empty()) std::memcpy(out, s.data(), s.size());
  return Ok();
}

}  // namespace

namespace llm::capi {

llm_status ToReasoning(const llm_request& r, const Model& model, RequestSpec* spec) {
  if (r.reserved5 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved5 must be 0");
  if (r.reasoning_format < 0 || r.reasoning_format >= kReasoningFormatCount)
    return Fail(LLM_ERR_INVALID_ARGUMENT,
                "reasoning_format " + std::to_string(r.reasoning_format) + " is not an LLM_REASONING_* value");
  auto format = static_cast<ReasoningFormat>(r.reasoning_format);
  if (format == ReasoningFormat::kNone || spec->task != LLM_TASK_GENERATE) return LLM_OK;
  if (format == ReasoningFormat::kAuto) {
    auto tmpl = ModelTemplate(model);
    format = ResolveReasoningFormat(format, tmpl.ok() ? std::string_view(*tmpl) : std::string_view());
  }
  spec->reasoning = format;
  if (format == ReasoningFormat::kDeepSeek && !spec->prompt.empty()) {
    // The prompt's last tokens as text: does the template open the thinking?
    const size_t n = std::min<size_t>(spec->prompt.size(), 8);
    const std::string tail = model.tokenizer->Decode(
        std::span<const int32_t>(spec->prompt.data() + spec->prompt.size() - n, n), /*render_special=*/true, false);
    spec->reasoning_open = PromptOpensThinking(tail);
    // Thinking turned off in the prompt: all answer, a constraint on all of it.
    if (PromptClosesThinking(tail)) spec->reasoning = ReasoningFormat::kNone;
  }
  return LLM_OK;
}

// The arguments llm_chat_apply_template and its v2 check alike.
static llm_status CheckChatArgs(bool messages_null, size_t n_messages, const char* out, size_t capacity,
                                int32_t add_generation_prompt) {
  if (n_messages > 0 && messages_null) return Fail(LLM_ERR_NULL_ARGUMENT, "messages is NULL but n_messages > 0");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (add_generation_prompt != 0 && add_generation_prompt != 1)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "add_generation_prompt must be 0 or 1");
  return LLM_OK;
}

}  // namespace llm::capi

extern "C" {

LLM_API llm_status llm_chat_apply_template(llm_ctx* ctx, const char* tmpl, const llm_chat_message* messages,
                                           size_t n_messages, int32_t add_generation_prompt, char* out,
                                           size_t capacity, size_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  if (llm_status st = llm::capi::CheckChatArgs(messages == nullptr, n_messages, out, capacity, add_generation_prompt);
      st != LLM_OK)
    return st;
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
    auto text = TemplateText(model, tmpl);
    if (!text.ok()) return Fail(text.status());
    // Compiling per call keeps the context free of template state; chat
    // templates compile in microseconds next to the prompt's prefill.
    auto compiled = llm::ChatTemplate::Create(*text);
    if (!compiled.ok()) return Fail(compiled.status());
    auto rendered = (*compiled)->Apply(msgs, TemplateOptions(model, add_generation_prompt));
    if (!rendered.ok()) return Fail(rendered.status());
    return CopyOut(*rendered, out, capacity, n_out);
  });
}

LLM_API llm_status llm_chat_apply_template_json(llm_ctx* ctx, const char* tmpl, const char* messages_json,
                                                const char* tools_json, int32_t add_generation_prompt, char* out,
                                                size_t capacity, size_t* n_out) {
  return llm_chat_apply_template_vars(ctx, tmpl, messages_json, tools_json, nullptr, add_generation_prompt, out,
                                      capacity, n_out);
}

LLM_API llm_status llm_chat_apply_template_vars(llm_ctx* ctx, const char* tmpl, const char* messages_json,
                                                const char* tools_json, const char* vars_json,
                                                int32_t add_generation_prompt, char* out, size_t capacity,
                                                size_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(messages_json);
  LLM_CHECK_ARG(n_out);
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (add_generation_prompt != 0 && add_generation_prompt != 1)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "add_generation_prompt must be 0 or 1");
  return Guard([&]() -> llm_status {
    // Well inside the template engine's value depth (jinja::kMaxValueDepth).
    constexpr int kMaxDepth = 32;
    auto parse = [](const char* name, const char* text) -> llm::StatusOr<llm::Json> {
      if (!llm::IsValidUtf8(text)) return llm::Status(LLM_ERR_INVALID_UTF8, std::string(name) + " is not valid UTF-8");
      auto j = llm::ParseJson(text, kMaxDepth);
      if (!j.ok()) return llm::Status(j.status().code(), std::string(name) + ": " + j.status().message());
      return j;
    };
    auto messages = parse("messages_json", messages_json);
    if (!messages.ok()) return Fail(messages.status());
    std::optional<llm::Json> tools, vars;
    if (tools_json != nullptr) {
      auto t = parse("tools_json", tools_json);
      if (!t.ok()) return Fail(t.status());
      tools = std::move(*t);
    }
    if (vars_json != nullptr) {
      auto v = parse("vars_json", vars_json);
      if (!v.ok()) return Fail(v.status());
      if (!v->is_object()) return Fail(LLM_ERR_INVALID_ARGUMENT, "vars_json must be a JSON object");
      vars = std::move(*v);
    }
    const llm::Model& model = ctx->engine->model();
    auto text = TemplateText(model, tmpl);
    if (!text.ok()) return Fail(text.status());
    auto compiled = llm::ChatTemplate::Create(*text);
    if (!compiled.ok()) return Fail(compiled.status());
    llm::ChatTemplateOptions opts = TemplateOptions(model, add_generation_prompt);
    opts.variables = vars ? &*vars : nullptr;
    auto rendered = (*compiled)->ApplyJson(*messages, tools ? &*tools : nullptr, opts);
    if (!rendered.ok()) return Fail(rendered.status());
    return CopyOut(*rendered, out, capacity, n_out);
  });
}

LLM_API llm_status llm_chat_apply_template_v2(llm_ctx* ctx, const char* tmpl, const llm_chat_message_v2* messages,
                                              size_t n_messages, int32_t add_generation_prompt, char* out,
                                              size_t capacity, size_t* n_out) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(n_out);
  if (llm_status st = llm::capi::CheckChatArgs(messages == nullptr, n_messages, out, capacity, add_generation_prompt);
      st != LLM_OK)
    return st;
  return Guard([&]() -> llm_status {
    // The messages as transformers hands them to a processor's template:
    // content a list of {"type": "text", "text"} and {"type": "image"} items.
    std::vector<llm::Json> msgs;
    msgs.reserve(n_messages);
    for (size_t i = 0; i < n_messages; ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      const llm_chat_message_v2& m = messages[i];
      if (m.struct_size < sizeof(llm_chat_message_v2) || m.struct_size > sizeof(llm_chat_message_v2))
        return Fail(LLM_ERR_STRUCT_SIZE, at + ".struct_size is " + std::to_string(m.struct_size) +
                                             "; set it to sizeof(llm_chat_message_v2)");
      if (m.role == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".role is NULL");
      if (!llm::IsValidUtf8(m.role)) return Fail(LLM_ERR_INVALID_UTF8, at + ".role is not valid UTF-8");
      if (m.n_parts < 0) return Fail(LLM_ERR_INVALID_ARGUMENT, at + ".n_parts is negative");
      if (m.n_parts > 0 && m.parts == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, at + ".parts is NULL but n_parts > 0");
      std::vector<llm::Json> items;
      for (int32_t k = 0; k < m.n_parts; ++k) {
        const std::string pat = at + ".parts[" + std::to_string(k) + "]";
        const llm_content_part& p = m.parts[k];
        if (llm_status s = CheckPartHeader(p, pat); s != LLM_OK) return s;
        if (p.kind == LLM_CONTENT_TEXT) {
          if (!llm::IsValidUtf8(p.text)) return Fail(LLM_ERR_INVALID_UTF8, pat + ".text is not valid UTF-8");
          items.push_back(llm::Json::Object({{"type", llm::Json::String("text")}, {"text", llm::Json::String(p.text)}}));
        } else {
          items.push_back(llm::Json::Object({{"type", llm::Json::String("image")}}));
        }
      }
      msgs.push_back(llm::Json::Object(
          {{"role", llm::Json::String(m.role)}, {"content", llm::Json::Array(std::move(items))}}));
    }
    const llm::Model& model = ctx->engine->model();
    auto text = TemplateText(model, tmpl);
    if (!text.ok()) return Fail(text.status());
    auto compiled = llm::ChatTemplate::Create(*text);
    if (!compiled.ok()) return Fail(compiled.status());
    auto rendered = (*compiled)->ApplyJson(llm::Json::Array(std::move(msgs)), nullptr,
                                           TemplateOptions(model, add_generation_prompt));
    if (!rendered.ok()) return Fail(rendered.status());
    return CopyOut(*rendered, out, capacity, n_out);
  });
}

LLM_API llm_status llm_chat_tool_format(llm_ctx* ctx, const char* tmpl, int32_t* out_format) {
  LLM_CHECK_ARG(ctx);
  LLM_CHECK_ARG(out_format);
  return Guard([&]() -> llm_status {
    const llm::Model& model = ctx->engine->model();
    std::string text;  // stays empty without any template: GENERIC, which needs none
    if (auto t = TemplateText(model, tmpl); t.ok()) text = std::move(*t);
    *out_format = static_cast<int32_t>(llm::DetectToolFormat(text, model.config.arch));
    return Ok();
  });
}

LLM_API llm_status llm_chat_parse_tool_calls(int32_t format, const char* text, size_t text_len, char* out,
                                             size_t capacity, size_t* n_out) {
  LLM_CHECK_ARG(n_out);
  if (text_len > 0 && text == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "text is NULL but text_len > 0");
  if (capacity > 0 && out == nullptr) return Fail(LLM_ERR_NULL_ARGUMENT, "out is NULL but capacity > 0");
  if (format < 0 || format >= llm::kToolFormatCount)
    return Fail(LLM_ERR_INVALID_ARGUMENT, "unknown tool-call format " + std::to_string(format));
  return Guard([&]() -> llm_status {
    auto parsed = llm::ParseToolCalls(static_cast<llm::ToolFormat>(format),
                                      std::string_view(text_len > 0 ? text : "", text_len));
    if (!parsed.ok()) return Fail(parsed.status());
    return CopyOut(llm::ParsedReplyToJson(*parsed), out, capacity, n_out);
  });
}

}  // extern "C"
