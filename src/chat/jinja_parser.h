// Template text -> syntax tree, following jinja2's grammar and operator
// precedence (filters bind tighter than arithmetic: `a + b | trim` trims b).
//
// Supported statements: if/elif/else, for (tuple targets, inline `if`, else,
// loop.*), set (names, tuples, namespace attributes, block form), macro,
// break/continue, and transformers' {% generation %} (rendered in place).
// Anything else (include, extends, block, call, raw...) is a syntax error.
#pragma once

#include <memory>
#include <string_view>

#include "chat/jinja_ast.h"
#include "util/status.h"

namespace llm::jinja {

// Nesting of statements and expressions the parser accepts, so hostile
// templates cannot exhaust the stack (parsing or rendering).
inline constexpr int kMaxParseDepth = 128;

// Errors: LLM_ERR_INVALID_ARGUMENT, "template syntax error (line N): ...".
StatusOr<std::unique_ptr<TemplateAst>> Parse(std::string_view source);

}  // namespace llm::jinja
