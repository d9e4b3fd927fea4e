// The JSON Schema compiler's state (json_schema.h is the entry point): the
// rules written so far, $ref targets already given a rule, and the visitor
// that turns one (sub)schema into a grammar expression. Scalars, references
// and combinators are in schema_compiler.cpp (an overlapping oneOf made
// disjoint by negation there too); allOf merges (what each branch
// evaluates: additionalProperties, items, unevaluated*) and dependency
// splits in schema_merge.cpp; not / if and every negation in
// schema_negate.cpp; oneOf's disjointness proofs in schema_oneof.cpp; $ref
// and $dynamicRef resolution in schema_refs.cpp; objects and arrays
// (contains, maxContains, uniqueItems) in schema_object.cpp, their free
// keys under patternProperties / propertyNames in schema_keys.cpp;
// patterns in schema_pattern.cpp (\p{..} tables: unicode_classes.h). A
// document of another draft is first rewritten as this compiler reads it
// (schema_drafts.h, in JsonSchemaToGrammar).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "constrain/schema_pattern.h"
#include "util/json.h"
#include "util/status.h"

namespace llm::schema {

// Names of the shared rules (added to the grammar on first use).
inline constexpr const char* kWs = "ws";
inline constexpr const char* kChar = "char";
inline constexpr const char* kKeyChar = "keychar";
inline constexpr const char* kValue = "value";

// Recursive $refs are unrolled: a reference to a schema that can reach
// itself opens one more level, and at kMaxRecursion open levels it has no
// value left; Visit then returns kNever (an empty expression), and the
// enclosing schema drops what needs it (an anyOf branch, an optional
// property, array items past minItems) or is itself kNever.
inline constexpr int kMaxRecursion = 5;
// A keyword only the compiler writes (the negation of "type": "integer",
// schema_negate.cpp): beside "type": "number", a number that is not an
// integer. (A schema that spells it itself only narrows: sound.)
inline constexpr const char* kNonIntegral = "\x01non-integral";
// Also compiler-only: beside "type": "string", a string that is none of
// the listed ones (the negation of a string const/enum).
inline constexpr const char* kNotStrings = "\x01not-strings";
// Prefixes a "#pointer" from the root that the compiler resolved itself
// ($dynamicRef): Canonical takes it as it is, wherever it stands.
inline constexpr const char* kResolvedRef = "\x01";
// Marks a schema that holds without evaluating anything (a negation's
// output: a failed "if" and "not" give no annotations), so the
// unevaluatedProperties/Items beside it still apply to the names and
// positions it lists (MergeAllOf). An annotation to everything else.
inline constexpr const char* kNoAnnotations = "\x01no-annotations";
inline bool IsNever(const std::string& e) { return e.empty(); }

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  // The whole grammar text, `root` first.
  StatusOr<std::string> Compile();
  // After Compile: some object admits keys the schema does not name.
  bool free_keys() const { return names_.count(kKeyChar) > 0 || names_.count("object-1") > 0 || pattern_keys_; }

  // One schema at JSON pointer `ptr` as an expression; `hint` names the
  // rules it creates.
  StatusOr<std::string> Visit(const Json& s, const std::string& ptr, const std::string& hint);

 private:
  // A rule named after `hint` (made unique) with `body`; returns its name.
  std::string AddRule(const std::string& hint, const std::string& body);
  std::string NewName(const std::string& hint);
  // Ensures a shared rule exists; returns its name.
  std::string Builtin(const std::string& name);

  StatusOr<std::string> Ref(const std::string& ref, const std::string& ptr);
  // $dynamicRef (schema_refs.cpp): the static target, or, when that one
  // bookends with a $dynamicAnchor of the same name, the outermost
  // resource of the dynamic scope (scope_) that has one; as "#pointer".
  StatusOr<std::string> DynamicTarget(const std::string& ref, const std::string& ptr) const;
  // The schema a $ref at pointer `ptr` names: JSON pointers, $anchor (and
  // draft-07 "$id": "#name") and $id-relative URIs inside the document
  // (schema_refs.cpp); anything else is UNSUPPORTED.
  StatusOr<const Json*> Resolve(const std::string& ref, const std::string& ptr) const;
  // A canonical reference ("#" + a JSON pointer from the root).
  StatusOr<const Json*> ResolvePointer(const std::string& ref, const std::string& ptr) const;
  // The reference as "#" + a JSON pointer from the root.
  StatusOr<std::string> Canonical(const std::string& ref, const std::string& ptr) const;
  // Fills ids_ and anchors_ (schema_refs.cpp).
  void IndexIds();
  // The base URI in force at a pointer (the $ids on the way down).
  std::string BaseAt(const std::string& ptr) const;
  StatusOr<Json> MergeAllOf(const Json& s, const std::string& ptr);
  StatusOr<Json> SplitDependencies(const Json& s, const std::string& ptr);
  // not / if-then-else (schema_negate.cpp): s as allOf [rest, ¬not, cases].
  StatusOr<Json> Conditionals(const Json& s, const std::string& ptr);
  // ¬s as a schema, or UNSUPPORTED naming the keyword that has none here.
  StatusOr<Json> Negate(const Json& s, const std::string& ptr, int depth);
  StatusOr<std::string> EnumConst(const Json& s, const std::string& ptr, const std::vector<std::string>& types);
  StatusOr<std::string> Typed(const Json& s, const std::string& ptr, const std::string& hint, const std::string& type);
  StatusOr<std::string> String(const Json& s, const std::string& ptr);
  StatusOr<std::string> Number(const Json& s, const std::string& ptr, bool integer);
  StatusOr<std::string> MultipleOf(const Json& m, std::optional<int64_t> lo, std::optional<int64_t> hi, const std::string& ptr);
  StatusOr<std::string> Object(const Json& s, const std::string& ptr, const std::string& hint);
  StatusOr<std::string> Array(const Json& s, const std::string& ptr, const std::string& hint);
  // patternProperties / propertyNames (schema_keys.cpp).
  Status KeyAutomata(const Json& s, const std::string& ptr, std::vector<CharDfa>* names,
                     std::vector<std::pair<CharDfa, const Json*>>* patterns);
  StatusOr<std::pair<bool, std::vector<const Json*>>> NameRules(const Json& s, const std::string& name, const std::string& ptr);
  StatusOr<std::string> PatternKeys(const Json& s, const std::vector<std::string>& declared, const Json* additional,
                                    const std::string& ptr, const std::string& hint);
  StatusOr<std::string> CountedMembers(const std::vector<std::string>& kv, const std::vector<bool>& required,
                                       const std::string& extra_kv, int64_t min_props, int64_t max_props,
                                       const std::string& ptr, const std::string& hint);
  StatusOr<std::string> UniqueItems(const Json& s, int64_t min_items, int64_t max_items, const std::string& ptr,
                                    const std::string& hint);
  StatusOr<std::string> CountedContains(const Json& s, const Json& contains, int64_t k, int64_t m, int64_t min_items,
                                        int64_t max_items, const std::string& ptr, const std::string& hint);
  StatusOr<std::string> Contains(const Json& s, const Json& contains, int64_t min_items, int64_t max_items,
                                 const std::string& ptr, const std::string& hint);
  // A JSON string that is none of `names` (keys of additional properties).
  std::string KeyNotIn(const std::vector<std::string>& names);
  // Fills recursive_: the $refs whose target can reach the same $ref again.
  void FindRecursiveRefs();

  const Json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body
  std::set<std::string> names_;
  std::map<std::string, int> next_suffix_;  // NewName: base -> the next number to try
  // ("#/...", open recursion levels) -> rule name, or kNever.
  std::map<std::pair<std::string, int>, std::string> ref_rules_;
  std::set<std::string> recursive_;
  std::map<std::string, std::string> ids_;      // absolute URI of a resource ($id) -> its pointer
  std::map<std::string, std::string> anchors_;  // URI "#" anchor -> pointer
  std::map<std::string, std::string> dynamic_anchors_;  // URI "#" $dynamicAnchor -> pointer
  // The resources (base URIs) the visit is inside, outermost first: the
  // dynamic scope of $dynamicRef. Part of the $ref rules' key once the
  // document has a $dynamicRef (a target compiles per scope).
  std::vector<std::string> scope_;
  bool dynamic_ = false;
  std::string root_base_;                       // the root's $id, or ""
  std::map<std::string, std::string> counted_strings_;  // "min,max" -> rule of such strings
  std::map<std::string, std::string> pattern_classes_;  // a long character class's GBNF -> its rule
  size_t pattern_bytes_ = 0;  // grammar text the pattern automata wrote so far
  int recursion_ = 0;  // recursive $refs being compiled (open levels)
  int depth_ = 0;
  int64_t visits_ = 0;  // Visit calls (kMaxVisits)
  bool pattern_keys_ = false;  // PatternKeys wrote free keys
};

// "/a/b" + key with ~ and / escaped (RFC 6901).
std::string PointerJoin(const std::string& ptr, std::string_view key);
std::string PointerJoin(const std::string& ptr, size_t index);
// For messages: the pointer, or "(root)" for "".
std::string Where(const std::string& ptr);

// `s` (an object schema) with `parts` appended to its allOf: s stays the
// merge's first part, whose unevaluatedProperties/Items see every part.
Json WithAllOf(const Json& s, std::vector<Json> parts);

// Keywords that never change validity.
bool IsAnnotation(std::string_view key);

// A count keyword's value (minLength, maxItems, ...): a non-negative
// integer, written as one or not (2020-12: 2.0 is an integer), capped at
// 2^40; false for anything else.
bool CountValue(const Json& v, int64_t* out);

// The target of a "$ref" string, or nullptr.
using RefResolver = std::function<const Json*(const std::string&)>;
// oneOf (schema_oneof.cpp): false when every two branches are provably
// disjoint (no value matches both); otherwise true with the first pair not
// proven so in *first < *second.
// *exhausted: the proof ran out of its work budget (hostile schemas).
bool FindOverlap(const std::vector<const Json*>& branches, const RefResolver& resolve, size_t* first, size_t* second,
                 bool* exhausted);

}  // namespace llm::schema
