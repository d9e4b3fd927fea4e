// JSON Schema `pattern` (an ECMA-262 / Python `re` regular expression) as
// a deterministic automaton over the characters of a JSON string body,
// intersected with minLength/maxLength, for the schema compiler to write
// as grammar rules (one per state: `s ::= [a-z] s1 | "\\n" s2 | ""`).
//
// Supported: literals, escapes (\d \w \s and negations, \n \t \xHH \uHHHH,
// escaped punctuation), `.`, classes with ranges and negation, groups
// ((...), (?:...), named), alternation, quantifiers (* + ? {n} {n,} {n,m},
// lazy forms read as greedy), and ^ / $ at the start / end of a top-level
// alternative. A pattern is searched, not matched (jsonschema uses
// re.search), so an unanchored side gets any characters.
//
// The pattern becomes a Thompson NFA and then a DFA, whose states with no
// way to an accepting state are dropped: the grammar is unambiguous (one
// matcher stack whatever the nesting of quantifiers) and every prefix it
// admits can be completed, so end-of-sequence is allowed only once the
// string is whole. Lengths count characters (an escape is one): the DFA
// is multiplied by a counter only when the pattern's own lengths do not
// already lie within the bounds.
//
// Sound, not complete: the automaton never accepts a string the pattern
// rejects, but the free end of an unanchored pattern (any characters once
// it has matched) stops 128 characters on, classes lose their control
// characters but \t \n \r (and '/' is written raw, never as \/), and
// \d \w \s mean their ASCII sets, `.` any character but newline.
// Backreferences, lookaround, word boundaries, inline flags and anchors
// inside a pattern are errors (LLM_ERR_UNSUPPORTED), like syntax errors
// (LLM_ERR_INVALID_ARGUMENT), each naming the byte offset; a pattern whose
// automata pass the limits in schema_pattern.cpp (100000 NFA states, 4000
// DFA states, 20000 with the length counter) is LLM_ERR_INVALID_ARGUMENT.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace llm {

struct PatternAutomaton {
  struct Edge {
    std::string chars;  // GBNF for one JSON string character of a set
    int32_t to;         // state index
  };
  struct State {
    std::vector<Edge> edges;
    bool accept = false;  // the string may end here
    std::string tail;     // non-empty: the state is just this expression (any_char{lo,hi})
  };
  std::vector<State> states;  // states[0] is the start; empty: no string qualifies
};

// A pattern's DFA over code points (search semantics, as above), for
// keys (patternProperties, propertyNames): states that cannot accept have
// no edges; empty when no string matches. Edges' sets are disjoint.
struct CharDfa {
  struct Edge {
    std::vector<std::pair<uint32_t, uint32_t>> chars;  // code point ranges, writable in a JSON string
    int32_t to;
  };
  std::vector<std::vector<Edge>> edges;  // (states) state 0 is the start
  std::vector<bool> accept;
  // The state after cp from q, or -1.
  int32_t Run(int32_t q, uint32_t cp) const;
};
StatusOr<CharDfa> PatternToDfa(std::string_view pattern, const std::string& where);
// One JSON string character of the set, as a grammar expression.
std::string CharsExpr(const std::vector<std::pair<uint32_t, uint32_t>>& set);

// min_len 0 / max_len -1: no bound. `any_char` names a rule matching one
// JSON string character (escapes included); `where` locates messages.
StatusOr<PatternAutomaton> CompilePattern(std::string_view pattern, int64_t min_len, int64_t max_len,
                                          std::string_view any_char, const std::string& where);

}  // namespace llm
