// LLM_CONSTRAINT_CHOICE: the output is exactly one of a list of strings.
#pragma once

#include <span>
#include <string>

#include "constrain/grammar.h"
#include "util/status.h"

namespace llm::constrain {

// choices: 1..kMaxChoices valid UTF-8 strings (duplicates allowed; the empty
// string allowed). Errors name the offending index.
inline constexpr size_t kMaxChoices = 4096;
StatusOr<Grammar> CompileChoices(std::span<const std::string> choices);

}  // namespace llm::constrain
