// LLM_CONSTRAINT_JSON_OBJECT: any JSON object (RFC 8259), as a built-in
// GBNF grammar, with whitespace between tokens bounded so that a model
// cannot stall in an endless run of spaces.
#pragma once

#include <string_view>

namespace llm::constrain {

// The grammar text (docs/GRAMMAR.md dialect), root rule `root`.
std::string_view JsonObjectGrammar();

}  // namespace llm::constrain
