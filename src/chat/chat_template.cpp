#include "chat/chat_template.h"

namespace llm {

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(std::string_view text) {
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<jinja::Template> t, jinja::Template::Compile(text));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(t)));
}

StatusOr<std::string> ChatTemplate::Apply(const std::vector<ChatMessage>& messages,
                                          const ChatTemplateOptions& opts) const {
  using jinja::Value;
  jinja::List list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Dict d;
    d.Set("role", Value::String(m.role));
    d.Set("content", Value::String(m.content));
    list.push_back(Value::MakeDict(std::move(d)));
  }
  jinja::Dict globals;
  globals.Set("messages", Value::MakeList(std::move(list)));
  globals.Set("tools", Value::None());
  globals.Set("documents", Value::None());
  globals.Set("add_generation_prompt", Value::Bool(opts.add_generation_prompt));
  if (opts.bos_token) globals.Set("bos_token", Value::String(*opts.bos_token));
  if (opts.eos_token) globals.Set("eos_token", Value::String(*opts.eos_token));
  return template_->Render(globals);
}

StatusOr<std::string> ChatTemplate::ApplyJson(const Json& messages, const Json* tools,
                                              const ChatTemplateOptions& opts) const {
  using jinja::Value;
  if (!messages.is_array()) return InvalidArgument("messages must be a JSON array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const Json* role = m.is_object() ? m.Find("role") : nullptr;
    if (role == nullptr || !role->is_string())
      return InvalidArgument("messages[" + std::to_string(i) + "] must be an object with a string \"role\"");
  }
  if (tools != nullptr && !tools->is_array()) return InvalidArgument("tools must be a JSON array");
  jinja::Dict globals;
  globals.Set("messages", Value::FromJson(messages));
  globals.Set("tools", tools != nullptr ? Value::FromJson(*tools) : Value::None());
  globals.Set("documents", Value::None());
  globals.Set("add_generation_prompt", Value::Bool(opts.add_generation_prompt));
  if (opts.bos_token) globals.Set("bos_token", Value::String(*opts.bos_token));
  if (opts.eos_token) globals.Set("eos_token", Value::String(*opts.eos_token));
  if (opts.variables != nullptr && !opts.variables->is_null()) {
    if (!opts.variables->is_object()) return InvalidArgument("the template variables must be a JSON object");
    for (const Json::Member& m : opts.variables->object()) {
      const std::string& name = m.first;
      if (name == "messages" || name == "tools" || name == "add_generation_prompt" || name == "bos_token" ||
          name == "eos_token")
        return InvalidArgument("the template variable \"" + name + "\" is set by the request itself");
      globals.Set(name, Value::FromJson(m.second));
    }
  }
  return template_->Render(globals);
}

}  // namespace llm
