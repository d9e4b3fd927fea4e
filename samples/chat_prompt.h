// Chat prompts over the public C API, shared by llm-chat and llm-server:
// which model to load by default, and how to turn a conversation into the
// prompt text and tokenize flags a request needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm.h"

namespace chat {

// The SmolLM2 chat model that scripts/fetch-models.sh downloads, relative to
// the repository root.
inline constexpr const char* kDefaultChatModel = "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf";

// Looks for kDefaultChatModel under the working directory and under the
// repository that holds the running executable (build*/bin/..). Returns ""
// when it is absent (the caller then uses the built-in model).
std::string FindDefaultModel();

// "SmolLM2-135M-Instruct.Q4_1" for ".../SmolLM2-135M-Instruct.Q4_1.gguf";
// "stories260K" for the built-in model (empty path).
std::string ModelName(const std::string& path);

struct Message {
  std::string role;
  std::string content;
};

// Renders conversations with the model's chat template. Models without one
// (the built-in stories260K is a plain story model) get a plain transcript,
//
//   user: Hello
//   assistant:
//
// and the stop string "\nuser:" so a reply ends where the model starts
// writing the next user turn; `fallback()` says so, and callers tell the user.
// Today's date as the templates that print it want it, as a JSON object:
// {"date_string": "26 Nov 2026" (Llama 3.x), "datetime": "Nov 26 2026"}.
std::string TodayVarsJson();

class Prompter {
 public:
  // Probes ctx for a template. template_text, when not empty, replaces the
  // model's (a Jinja template in the format llm_chat_apply_template takes).
  // On failure returns false with the reason in *error.
  bool Init(llm_ctx* ctx, const std::string& template_text, std::string* error);

  bool fallback() const { return fallback_; }

  // The prompt for `messages` with the assistant-turn opener appended, and
  // the tokenize flags to submit it with: PARSE_SPECIAL always (the template
  // writes the special tokens as text), ADD_SPECIAL unless the rendered text
  // already begins with the BOS token's text. Returns the llm_status of
  // llm_chat_apply_template; on failure *error gets llm_last_error().
  // vars_json, when given, is a JSON object of more template variables
  // (llm_chat_apply_template_vars: chat_template_kwargs, date_string);
  // without it the template gets TodayVarsJson()'s, so that every program
  // here (llm-run --chat, llm-chat, llm-server) renders the same prompt.
  llm_status Render(const std::vector<Message>& messages, std::string* prompt, uint32_t* tokenize_flags,
                    std::string* error, const std::string* vars_json = nullptr) const;

  // The same for a conversation in OpenAI's shape (a JSON array: tool_calls,
  // role "tool" results...) and a JSON array of tools, or nullptr
  // (llm_chat_apply_template_json); not for the fallback transcript.
  llm_status RenderJson(const std::string& messages_json, const std::string* tools_json, std::string* prompt,
                        uint32_t* tokenize_flags, std::string* error, const std::string* vars_json = nullptr) const;

  // The LLM_TOOL_FORMAT_* the template writes tool calls in: GENERIC when
  // it knows no tools (then a caller describes them itself).
  int32_t tool_format() const { return tool_format_; }

  // Stop strings every request should carry (the fallback's "\nuser:").
  const std::vector<const char*>& stops() const { return stops_; }

 private:
  llm_ctx* ctx_ = nullptr;
  std::string template_;  // empty: the model's own
  std::string bos_text_;  // the BOS token rendered as text; "" if none
  bool fallback_ = false;
  int32_t tool_format_ = LLM_TOOL_FORMAT_GENERIC;
  // Sets the flags for a rendered prompt (BOS unless it starts with it).
  uint32_t Flags(const std::string& prompt) const;
  std::vector<const char*> stops_;
};

}  // namespace chat
