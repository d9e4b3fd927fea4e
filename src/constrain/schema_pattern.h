// JSON Schema `pattern` (an ECMA-262 / Python `re` regular expression) as a
// GBNF expression for the *body* of a JSON string: what the model writes
// between the quotes, JSON escapes included.
//
// Supported: literals, escapes (\d \w \s and negations, \n \t \xHH \uHHHH,
// escaped punctuation), `.`, classes with ranges and negation, groups
// ((...), (?:...), named), alternation, quantifiers (* + ? {n} {n,} {n,m},
// lazy forms read as greedy), and ^ / $ at the start / end of a top-level
// alternative. A pattern is searched, not matched (jsonschema uses
// re.search), so an unanchored side gets any characters.
//
// Sound, not complete: the expression never matches a string the pattern
// rejects, but open repetitions (* + {n,}) and unanchored ends stop 128
// past their minimum, classes lose their control characters but \t \n \r,
// \d \w \s mean their ASCII sets, and `.` (any character but newline) the
// same. Backreferences, lookaround, word boundaries, inline flags and
// anchors inside a pattern are errors (LLM_ERR_UNSUPPORTED), like syntax
// errors (LLM_ERR_INVALID_ARGUMENT), each naming the byte offset.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace llm {

// `any_char` is the name of a rule matching one JSON string character
// (escapes included), used for the unanchored ends.
StatusOr<std::string> PatternToStringBody(std::string_view pattern, std::string_view any_char);

}  // namespace llm
