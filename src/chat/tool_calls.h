// Tool calls in a model's output: the formats chat models write them in,
// parsed into {name, arguments} pairs and the text around them.
//
// Parsing is a pure function of the text (no model, no state), so it works on
// a finished reply and on streamed text alike (call it on what has arrived).
// Hostile text (truncated or deeply nested JSON, invalid UTF-8) gets a status
// with a message, never a crash: JSON nesting is bounded (kMaxToolCallDepth).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace llm {

// The values of llm.h's LLM_TOOL_FORMAT_*.
enum class ToolFormat : int32_t {
  kAuto = 0,     // each of the below, told apart by its marker
  kGeneric = 1,  // the whole reply is JSON: {"tool_calls": [...]}, {"tool_call": {...}},
                 // {"name", "arguments"} or a list of those
  kHermes = 2,   // Qwen2.5, Qwen3, Hermes: <tool_call>{json}</tool_call>, one or more
  kLlama3 = 3,   // Llama 3.x: [<|python_tag|>]{"name", "parameters"}, ';'-separated
  kMistral = 4,  // [TOOL_CALLS][{"name", "arguments"}, ...] or [TOOL_CALLS]name[ARGS]{...}
};
inline constexpr int32_t kToolFormatCount = 5;

// Arguments nested deeper than this are refused (real tools nest a few levels).
inline constexpr int kMaxToolCallDepth = 64;

struct ToolCall {
  std::string name;
  Json arguments;  // always an object
  std::string id;  // as the model wrote it (Mistral), else ""
};

struct ParsedReply {
  std::string content;  // the text outside the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
};

// Parses `text` in `format`. Text without a call is all content (OK, no
// calls). Errors: INVALID_UTF8; INVALID_ARGUMENT when a call's marker is
// there but what follows is not a well-formed call (truncated JSON, no name,
// arguments not an object, nesting over kMaxToolCallDepth), with the byte
// offset in the message.
StatusOr<ParsedReply> ParseToolCalls(ToolFormat format, std::string_view text);

// The format a model with this chat template (and architecture) writes its
// calls in: the template's own markers decide; GENERIC when it has none.
ToolFormat DetectToolFormat(std::string_view chat_template, std::string_view arch);

// {"content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]} as
// compact JSON (an "id" member where the model wrote one).
std::string ParsedReplyToJson(const ParsedReply& reply);

// Compact JSON text of a Json value (numbers as integers when they are
// integers, else with 17 significant digits: the value round-trips).
std::string JsonToText(const Json& j);

}  // namespace llm
