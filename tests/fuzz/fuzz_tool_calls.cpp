// Fuzzes the tool-call parser: the first byte picks the format (AUTO,
// GENERIC, HERMES, LLAMA3, MISTRAL), the rest is a model's reply. Parsing
// must end in calls or a status with a message, never a crash or a stack
// overflow; what it returns must serialize to JSON that parses back with the
// same number of calls, each with a name and object arguments.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/tool_calls.h"
#include "fuzz/common.h"
#include "util/json.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = static_cast<ToolFormat>(data[0] % kToolFormatCount);
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto r = ParseToolCalls(format, text);
  if (!r.ok()) {
    LLM_FUZZ_CHECK(!r.status().message().empty(), "an error without a message");
    return 0;
  }
  for (const ToolCall& c : r->calls) {
    LLM_FUZZ_CHECK(!c.name.empty(), "a call without a name");
    LLM_FUZZ_CHECK(c.arguments.is_object(), "arguments that are not an object");
  }
  auto back = ParseJson(ParsedReplyToJson(*r), kMaxToolCallDepth + 8);
  LLM_FUZZ_CHECK(back.ok(), "the result's JSON does not parse");
  const Json* calls = back->Find("tool_calls");
  LLM_FUZZ_CHECK(calls != nullptr && calls->size() == r->calls.size(), "calls lost in serialization");
  return 0;
}
