// The EBNF dialect of llm_request.constraint (LLM_CONSTRAINT_GRAMMAR),
// compatible with llama.cpp's GBNF; docs/GRAMMAR.md is its specification.
#pragma once

#include <string_view>

#include "constrain/grammar.h"
#include "util/status.h"

namespace llm::constrain {

// Parses grammar text whose start rule is `root`. Errors are
// INVALID_ARGUMENT with "grammar line L:C: ..." naming the position.
StatusOr<Grammar> ParseGrammar(std::string_view text);

}  // namespace llm::constrain
