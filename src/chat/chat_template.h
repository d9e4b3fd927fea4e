// Chat templates: a conversation in, the prompt text a model was trained on
// out, rendered with the model's own Jinja template the way Hugging Face
// transformers' apply_chat_template does (same variables, same environment).
//
// A ChatTemplate is immutable after Create(): Apply may run on any number of
// threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_template.h"
#include "util/json.h"
#include "util/status.h"

namespace llm {

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  // The model's special-token texts; a model without one leaves the variable
  // undefined (as transformers does for a missing special token).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // More variables (a JSON object, or null): a request's
  // chat_template_kwargs ("enable_thinking": false), "date_string". They
  // cannot replace messages, tools, add_generation_prompt or the special
  // tokens' texts (ApplyJson refuses those keys).
  const Json* variables = nullptr;
};

class ChatTemplate {
 public:
  // Errors: INVALID_ARGUMENT (syntax), INVALID_UTF8.
  static StatusOr<std::unique_ptr<ChatTemplate>> Create(std::string_view text);

  // The template's variables: messages (a list of {"role", "content"}
  // dicts), add_generation_prompt, bos_token, eos_token, tools = None,
  // documents = None. Errors: INVALID_ARGUMENT (a template error, or the
  // message of the template's raise_exception).
  StatusOr<std::string> Apply(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& opts) const;

  // The same with the conversation as OpenAI / transformers shape it:
  // `messages` a JSON array of objects (role, content — a string, null or a
  // list of parts — and whatever else they carry: tool_calls, tool_call_id,
  // name, reasoning_content...), passed to the template as json.loads gives
  // them; `tools` a JSON array (the template's `tools`) or nullptr (None).
  // Errors: INVALID_ARGUMENT (a message that is not an object with a string
  // role, tools not a list, a template error).
  StatusOr<std::string> ApplyJson(const Json& messages, const Json* tools, const ChatTemplateOptions& opts) const;

  const jinja::Template& jinja() const { return *template_; }

 private:
  explicit ChatTemplate(std::unique_ptr<jinja::Template> t) : template_(std::move(t)) {}
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace llm
