// Regular expressions (LLM_CONSTRAINT_REGEX) compiled to the grammar IR. The
// whole output must match (anchors are implicit). The subset (docs/GRAMMAR.md):
// literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ and escaped
// metacharacters), classes [a-z] [^...] with \d \w \s \D \W \S inside and
// outside them, `.` (any code point but \n, as in Python and PCRE), groups
// ( ), (?: ) and named (?P<n> ) / (?<n> ), alternation |, quantifiers
// * + ? {m} {m,} {m,n} (a lazy `?` suffix is accepted and means the same
// set of strings), and ^ $ at the ends of the pattern. Backreferences and
// lookaround are rejected (not regular / not supported).
#pragma once

#include <string_view>

#include "constrain/grammar.h"
#include "util/status.h"

namespace llm::constrain {

// Errors are INVALID_ARGUMENT with "regex offset N: ..." (byte offset).
StatusOr<Grammar> CompileRegex(std::string_view pattern);

}  // namespace llm::constrain
