// Jinja template text -> tokens, with the whitespace rules of Hugging Face's
// chat-template environment (trim_blocks, lstrip_blocks, keep_trailing_newline
// off) applied here, so the parser sees data exactly as jinja2 would emit it:
//
//   - newlines (\r\n, \r, \n) become \n; one trailing newline is dropped;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`,
//     `-#}` all whitespace after it;
//   - lstrip_blocks: spaces and tabs between a line start and `{%` / `{#` go
//     (unless the tag is `{%+`);
//   - trim_blocks: one newline right after `%}` / `#}` goes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace llm::jinja {

enum class Tok {
  kData,        // literal text between tags
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifiers and keywords (if, in, not, true...)
  kString,      // text = the unescaped value
  kInt,
  kFloat,
  kOp,          // text = the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Errors (unterminated tag, comment or string, bad character, a number out
// of range): LLM_ERR_INVALID_ARGUMENT with the line number.
StatusOr<std::vector<Token>> Lex(std::string_view source);

}  // namespace llm::jinja
