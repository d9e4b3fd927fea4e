// OpenAI function calling on top of the C API: `tools` / `tool_choice` /
// `parallel_tool_calls` validated, the tools described to the model, a forced
// call turned into a JSON-Schema constraint, and the model's reply split into
// `tool_calls` with llm_chat_parse_tool_calls.
//
// How a call reaches the model and back:
//  - auto: the tools and the calling convention (a JSON object
//    {"name", "arguments"}, the generic format) are described in a system
//    message; the reply is parsed with LLM_TOOL_FORMAT_AUTO, so a model that
//    writes its own markers (<tool_call>, [TOOL_CALLS], <|python_tag|>) is
//    understood too. A reply that is not a well-formed call of a known tool
//    is plain content.
//  - required / a named function: the same description, and the output is
//    constrained by a JSON Schema (LLM_CONSTRAINT_JSON_SCHEMA) whose only
//    valid texts are calls of the allowed tools with arguments valid against
//    their `parameters` (a list of calls with parallel_tool_calls), so the
//    call is always well formed, whatever the model's size.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../chat_prompt.h"

namespace server {

using nlohmann::json;
struct ApiError;  // openai_request.h

struct ToolSpec {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<json> tools;  // each {"name", "description"?, "parameters"?}, validated
  Choice choice = Choice::kAuto;
  std::string named;        // kNamed: the function
  bool parallel = true;     // parallel_tool_calls

  // True when replies are parsed for calls (tools given, choice not none).
  bool active() const { return !tools.empty() && choice != Choice::kNone; }
  bool forced() const { return active() && (choice == Choice::kRequired || choice == Choice::kNamed); }
};

// Reads tools, tool_choice and parallel_tool_calls (and the deprecated
// functions / function_call). False with *err (param named) on a bad request.
bool ParseTools(const json& body, ToolSpec* spec, ApiError* err);

// The system text that tells the model its tools and how to call them.
std::string ToolsSystemPrompt(const ToolSpec& spec);

// Adds ToolsSystemPrompt to the first message when it is a system one, else
// as a new system message in front (for templates that know no tools).
void AddToolsSystemPrompt(const ToolSpec& spec, std::vector<chat::Message>* messages);

// The tools as a template's `tools` list ([{"type": "function", "function": {...}}]).
json ToolsForTemplate(const ToolSpec& spec);

// An assistant message's tool_calls as templates expect them (transformers'
// shape): arguments an object, not JSON text. The input is validated by
// ToolCallsAsText.
json ToolCallsForTemplate(const json& tool_calls);

// The JSON Schema a forced call's output must match (spec.forced()).
json ForcedCallSchema(const ToolSpec& spec);

// An assistant message's earlier `tool_calls` (OpenAI shape) as the text the
// model would have written for them (the generic form the prompt teaches).
bool ToolCallsAsText(const json& tool_calls, std::string* text, std::string* problem);

// A reply split into OpenAI `tool_calls` ({"id", "type": "function",
// "function": {"name", "arguments": "<JSON text>"}}) and content. Returns
// false when the reply holds no valid call (then it is all content).
struct ReplyCalls {
  std::string content;
  std::vector<json> calls;
};
bool ExtractToolCalls(const ToolSpec& spec, const std::string& text, ReplyCalls* out);

}  // namespace server
