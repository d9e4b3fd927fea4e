// Fuzzes the JSON Schema compiler (src/constrain/json_schema.h) through the
// whole constraint path (schema -> grammar -> parsed -> byte program): any
// input either compiles or is refused with a message as INVALID_ARGUMENT or
// UNSUPPORTED, never an internal error (issue 29: the server's 500s); a
// compiled grammar starts with its root rule, every line is one rule, and
// the matcher runs over the input's own bytes within its limits. Seeds in
// corpus/json_schema cover the keywords of issue 29 (not, if/then/else,
// contains, dependent*, unevaluated*, $anchor/$id, multipleOf, patterns with
// nested quantifiers and lengths), and from 50_ on: unevaluated* in
// branches and beside not/if/contains, overlapping oneOf made disjoint by
// negation, maxContains, $dynamicRef, not over combinators; from 56_ on:
// drafts (draft-04 id and boolean exclusives, draft-07 $ref siblings and
// later keywords as annotations, 2019-09 $recursiveRef and array items
// with unevaluatedItems), \p{..} classes, (?s), long counted repetitions
// and maxLength under patterns, uniqueItems over open items.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "constrain/constraint.h"
#include "constrain/json_schema.h"
#include "fuzz/common.h"
#include "llm.h"

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
  auto p = constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, text, {});
  if (!p.ok()) {
    LLM_FUZZ_CHECK(p.status().code() == LLM_ERR_INVALID_ARGUMENT || p.status().code() == LLM_ERR_UNSUPPORTED,
                   "a compiled schema's grammar refused with an unexpected code (internal)");
    return 0;
  }
  constrain::Matcher m(*p);
  (void)m.Matches(text.substr(0, 256));
  return 0;
}
