// Bounded whitespace in JSON outputs (issue 29). JSON allows any run of
// blanks between tokens, and a sampled model can spend its whole budget on
// newlines and indentation. JSON_OBJECT and JSON_SCHEMA constraints hold the
// layout to what strict structured-output APIs write, by default:
//
//   between two tokens of the value (outside strings) the whitespace is
//   nothing, one space, or one newline followed by at most
//   kIndentPerLevel * d spaces, where d is the number of objects and arrays
//   open at that point (a closing bracket's own line still counts its
//   container). No tabs, no carriage returns, no blank lines.
//
// Compact (`{"a":1}`), spaced (`{"a": 1, "b": 2}`) and indented output
// (`json.dumps(v, indent=2)` or 4) all pass. The grammar's `ws` rule bounds
// a run in length (json_object.cpp, the schema compiler's builtin); this
// lexer, run beside the matcher by ConstraintState, bounds the indentation
// by the depth, which a context-free rule shared by every depth cannot.
//
// LLM_WHITESPACE_FREE (llm_request.constraint_whitespace) restores any
// whitespace: the `ws` rule becomes [ \t\n\r]* and no lexer runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace llm::constrain {

inline constexpr int32_t kIndentPerLevel = 4;

struct LayoutLex {
  int32_t depth = 0;
  uint8_t mode = 0;   // 0: outside strings; 1: in a string; 2: after a backslash in one
  uint8_t run = 0;    // since the last token: 0 no blank, 1 one space, 2 a newline (then `spaces`)
  int32_t spaces = 0;
};

// The lexer over a sequence's accepted tokens, with the state after each
// (rollback is dropping states, as for the matcher).
class JsonLayout {
 public:
  // Steps l over bytes; false at the first blank the rule forbids (l is
  // then unspecified).
  static bool Step(LayoutLex* l, std::string_view bytes);
  bool Allows(std::string_view bytes) const {
    LayoutLex l = lex_.back();
    return Step(&l, bytes);
  }
  bool Accept(std::string_view bytes) {
    LayoutLex l = lex_.back();
    if (!Step(&l, bytes)) return false;
    lex_.push_back(l);
    return true;
  }
  void Truncate(size_t n_tokens) { lex_.resize(n_tokens + 1); }
  const LayoutLex& Current() const { return lex_.back(); }

 private:
  std::vector<LayoutLex> lex_{LayoutLex{}};
};

// `gbnf` (a JSON grammar this library wrote, with one rule `ws`) with that
// rule replaced by free whitespace; INTERNAL when there is no such rule.
StatusOr<std::string> WithFreeWhitespace(std::string_view gbnf);

}  // namespace llm::constrain
