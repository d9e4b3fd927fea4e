// The grammar IR every constraint compiles to (issue 20): a context-free
// grammar over Unicode code points. The GBNF parser (gbnf_parser.h), the
// regex compiler (regex_compiler.h), the choice compiler (choice.h) and the
// JSON-Schema compiler (json_schema.h, via GBNF text) all produce one; the
// matcher runs its byte-level lowering (byte_program.h).
//
//   Grammar = rules[]; Rule = name + alternatives; Alternative = elements in
//   sequence; Element = a code-point class (a literal is a one-code-point
//   class) or a reference to a rule. An empty alternative matches "".
//
// Repetition (* + ? {m,n}) is expanded into helper rules by the builder
// below, so the IR itself has only concatenation, alternation and recursion.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace llm::constrain {

// Bounds on the work a hostile grammar can cause; each breach is an
// INVALID_ARGUMENT that names the limit.
inline constexpr int32_t kMaxRules = 20000;         // rules after expansion
inline constexpr int32_t kMaxElements = 500000;     // elements after expansion
inline constexpr int32_t kMaxNesting = 200;         // ( ) nesting depth while parsing
inline constexpr int32_t kMaxRepeat = 10000;        // m and n of {m,n}
inline constexpr int32_t kMaxGrammarBytes = 1 << 20;  // grammar / regex text

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// The INVALID_ARGUMENT for a breach of one of the limits above ("limit: "
// + what), and the test for one: a grammar the JSON-Schema compiler wrote
// that breaks a limit is a schema too large for us (the client's 400),
// while any other error in it is our bug.
Status LimitExceeded(const std::string& what);
bool IsLimitExceeded(const Status& s);
// The limit such a status names, without where in the grammar text it broke.
std::string LimitWhat(const Status& s);

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

struct Element {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind = Kind::kChars;
  int32_t rule = -1;              // kRule: index into Grammar::rules
  std::vector<CodeRange> ranges;  // kChars: sorted, disjoint, non-adjacent, non-empty

  static Element Chars(std::vector<CodeRange> r);  // normalises r
  static Element Char(uint32_t cp) { return Chars({{cp, cp}}); }
  static Element Ref(int32_t rule);
};

using Alternative = std::vector<Element>;

struct Rule {
  std::string name;
  std::vector<Alternative> alts;
  bool defined = false;  // false: referenced but never given a body (an error at Finish)
};

// Where GrammarBuilder::Repeat wrote out a counted repetition X{m,n}: m
// copies of X in `seq_rule`'s only alternative, then (n > m) the chain
// O_{n-m} ::= X O_{n-m-1} | "" ... O_1 ::= X | "". The mask cache
// (mask_cache.h) uses this to treat positions deep inside a long count as
// one position.
struct CountedRepeat {
  int32_t seq_rule = -1;
  int32_t min = 0;
  int32_t body_len = 0;            // elements of X
  std::vector<int32_t> opt_rules;  // opt_rules[k - 1] = O_k
};

struct Grammar {
  std::vector<Rule> rules;
  int32_t root = -1;
  std::vector<CountedRepeat> repeats;
  // The output is JSON whose objects must not repeat a key (json_keys.h):
  // set by CompileConstraint for JSON_OBJECT and for schemas with free keys.
  bool unique_keys = false;
  bool json_layout = false;  // a JSON grammar whose whitespace is bounded by depth (json_layout.h)
};

// Sorts and merges ranges; drops empty ones and clamps to [0, kMaxCodePoint].
std::vector<CodeRange> NormaliseRanges(std::vector<CodeRange> r);
// The complement of normalised ranges within [0, kMaxCodePoint] (surrogates
// excluded: they never appear in valid UTF-8).
std::vector<CodeRange> ComplementRanges(const std::vector<CodeRange>& r);

// Builds a Grammar while enforcing the limits above. Parsers create named
// rules with RuleId(), helper rules with NewHelper(), and repetition with
// Repeat().
class GrammarBuilder {
 public:
  // The id of the rule called `name`, created (undefined) on first use.
  StatusOr<int32_t> RuleId(const std::string& name);
  // A fresh anonymous rule named after `base` ("root#3": no name the
  // grammar text spells can collide with it).
  StatusOr<int32_t> NewHelper(const std::string& base);
  // Adds an alternative to a rule (and marks it defined).
  Status AddAlt(int32_t rule, Alternative alt);
  void MarkDefined(int32_t rule) { g_.rules[static_cast<size_t>(rule)].defined = true; }
  bool IsDefined(int32_t rule) const { return g_.rules[static_cast<size_t>(rule)].defined; }
  // An element matching `body` repeated between min and max times (max < 0:
  // unbounded). X* becomes r ::= X r | "" (right recursion, so the matcher's
  // stacks do not grow with the count); X{m,n} becomes m copies of X then
  // n-m nested optionals X (X (...)?)?, linear in n.
  StatusOr<Element> Repeat(const Alternative& body, int32_t min, int32_t max, const std::string& base);
  // The rules reachable from `root_name` must all be defined; no rule may be
  // left-recursive (directly or through rules that can match ""), which the
  // stack-based matcher could not run.
  StatusOr<Grammar> Finish(const std::string& root_name);

 private:
  Status CountElements(size_t n);
  StatusOr<int32_t> AddRule(std::string name);
  Grammar g_;
  std::unordered_map<std::string, int32_t> names_;
  int64_t n_elements_ = 0;
  int32_t n_helpers_ = 0;
};

}  // namespace llm::constrain
