// Fuzzes the JSON Schema compiler (src/constrain/json_schema.h): any input
// either compiles or fails with a message; a compiled grammar starts with
// its root rule and every line is one rule definition.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "constrain/json_schema.h"
#include "fuzz/common.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = JsonSchemaToGrammar(text);
  if (!g.ok()) {
    LLM_FUZZ_CHECK(!g.status().message().empty(), "schema error without a message");
    LLM_FUZZ_CHECK(g.status().code() == LLM_ERR_INVALID_ARGUMENT || g.status().code() == LLM_ERR_UNSUPPORTED,
                   "schema error with an unexpected code");
    return 0;
  }
  const std::string& s = *g;
  LLM_FUZZ_CHECK(s.rfind("root ::= ", 0) == 0, "grammar does not start with the root rule");
  size_t line = 0;
  while (line < s.size()) {
    size_t end = s.find('\n', line);
    LLM_FUZZ_CHECK(end != std::string::npos, "grammar does not end with a newline");
    LLM_FUZZ_CHECK(s.substr(line, end - line).find(" ::= ") != std::string::npos, "a line that is not a rule");
    line = end + 1;
  }
  return 0;
}
