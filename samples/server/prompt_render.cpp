#include "prompt_render.h"

#include "openai_response.h"
#include "openai_tools.h"

namespace server {

bool RenderChatPrompt(const chat::Prompter& prompter, Generation* g, ApiError* err) {
  if (g->prompts.empty()) g->prompts.resize(1);
  std::string message;
  llm_status s;
  json vars = json::parse(chat::TodayVarsJson());  // today's date, under the request's kwargs
  for (const auto& item : g->template_vars.items()) vars[item.key()] = item.value();
  const std::string vars_json = Dump(vars);
  // Pictures: the messages' content items reach the template, which writes
  // the model's image marker for each {"type": "image"} (image_url.h).
  if (!g->images.empty() ||
      ((g->tools.active() || g->tool_history) && prompter.tool_format() != LLM_TOOL_FORMAT_GENERIC)) {
    // A template that knows tools (Qwen, Hermes, Llama 3.1, Mistral)
    // renders them, the earlier calls and their results itself; the model
    // then writes calls in its own format, which the reply parser reads
    // (LLM_TOOL_FORMAT_AUTO).
    const std::string tools = g->tools.active() ? Dump(ToolsForTemplate(g->tools)) : std::string();
    s = prompter.RenderJson(Dump(g->raw_messages), g->tools.active() ? &tools : nullptr, &g->prompts[0].text,
                            &g->prompts[0].flags, &message, &vars_json);
  } else {
    if (g->tools.active()) AddToolsSystemPrompt(g->tools, &g->messages);
    s = prompter.Render(g->messages, &g->prompts[0].text, &g->prompts[0].flags, &message, &vars_json);
  }
  if (s != LLM_OK) {
    *err = StatusError(s, "chat template: " + message);
    err->param = "messages";
    return false;
  }
  return true;
}

}  // namespace server
