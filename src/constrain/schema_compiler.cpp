#include "constrain/schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>

#include "constrain/byte_program.h"
#include "constrain/gbnf_parser.h"
#include "constrain/grammar.h"
#include "constrain/grammar_text.h"
#include "constrain/matcher.h"
#include "constrain/json_schema.h"
#include "constrain/schema_drafts.h"
#include "constrain/schema_pattern.h"

namespace llm {
namespace schema {
namespace {

// Nesting of schemas inside schemas, chains of distinct $refs included (a
// reference already compiled is a rule name, so recursion stops there): far
// above real schemas, far below what would exhaust the stack.
constexpr int kMaxDepth = 64;
// Longest counted string repetition written out (maxLength above it is
// narrowed to it: still sound).
constexpr int64_t kMaxCountedLength = 4096;
// The compiler's total work: subschemas visited, rules written.
constexpr int64_t kMaxVisits = 100000;
constexpr size_t kMaxCompiledRules = 40000;
// oneOf whose branches overlap is compiled as branch k and the negations of
// the others: k^2 negations, so only for a few branches.
constexpr size_t kMaxNegatedOneOf = 8;

const char* const kUnsupported[] = {"$recursiveRef"};

// "Any JSON value" (schema true / {} / free additionalProperties values) is
// bounded so that a sampled value always ends: containers nest at most
// kAnyDepth deep and hold at most kAnyCount members/items, strings (keys
// included) at most kAnyString characters. value-N may hold containers N
// deep; "value" is value-kAnyDepth, value-0 a scalar.
constexpr int kAnyDepth = 2;
constexpr int kAnyCount = 8;
constexpr int kAnyString = 64;

const std::map<std::string, std::string>& Builtins() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> b = {
        // (the depth's bound on indentation is json_layout.h's, at run time)
        {"ws", "( \" \" | \"\\n\" \" \"{0,40} )?"},
        // One character of a JSON string; \u escapes are left out so that a
        // counted repetition counts characters exactly (a surrogate pair would
        // be two escapes for one character).
        {"char", "[^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" [\"\\\\/bfnrt]"},
        {"keychar", "[^\"\\\\\\x00-\\x1F\\x7F]"},
        {"string", "\"\\\"\" char* \"\\\"\""},
        {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
        {"number", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [+\\x2D]? [0-9]{1,2} )?"},
        {"boolean", "\"true\" | \"false\""},
        {"null", "\"null\""},
    };
    const std::string n = std::to_string(kAnyCount - 1);
    b["any-string"] = "\"\\\"\" char{0," + std::to_string(kAnyString) + "} \"\\\"\"";
    b["value-0"] = "any-string | number | boolean | null";
    for (int d = 1; d <= kAnyDepth; ++d) {
      const std::string v = "value-" + std::to_string(d - 1), k = std::to_string(d);
      b["object-" + k] = "\"{\" ws ( any-string ws \":\" ws " + v + " ( ws \",\" ws any-string ws \":\" ws " + v + " ){0," + n + "} ws )? \"}\"";
      b["array-" + k] = "\"[\" ws ( " + v + " ( ws \",\" ws " + v + " ){0," + n + "} ws )? \"]\"";
      b[d == kAnyDepth ? std::string("value") : "value-" + k] = "object-" + k + " | array-" + k + " | " + v;
    }
    return b;
  }();
  return m;
}

// The rules a builtin refers to.
std::vector<std::string> BuiltinDeps(const std::string& name) {
  if (name == "string" || name == "any-string") return {"char"};
  if (name == "value-0") return {"any-string", "number", "boolean", "null"};
  auto level = [&](const std::string& prefix) { return std::stoi(name.substr(prefix.size())); };
  if (name.rfind("object-", 0) == 0 || name.rfind("array-", 0) == 0) {
    const int d = level(name[0] == 'o' ? "object-" : "array-");
    return {"ws", "any-string", "value-" + std::to_string(d - 1)};
  }
  if (name == "value" || name.rfind("value-", 0) == 0) {
    const int d = name == "value" ? kAnyDepth : level("value-");
    const std::string k = std::to_string(d);
    return {"object-" + k, "array-" + k, "value-" + std::to_string(d - 1)};
  }
  return {};
}

std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

bool IsWhole(double d) { return std::isfinite(d) && std::floor(d) == d; }

// Whether `v` is of JSON Schema type `t`.
bool HasType(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_bool();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number() && IsWhole(v.as_double());
  return false;
}

}  // namespace

std::string PointerJoin(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string PointerJoin(const std::string& ptr, size_t index) { return ptr + "/" + std::to_string(index); }

std::string Where(const std::string& ptr) { return ptr.empty() ? std::string("(root)") : ptr; }

bool CountValue(const Json& v, int64_t* out) {
  if (v.is_int()) {
    if (v.as_int() < 0) return false;
    *out = std::min<int64_t>(v.as_int(), int64_t{1} << 40);
    return true;
  }
  const double d = v.as_double();
  if (!v.is_number() || !IsWhole(d) || d < 0) return false;
  *out = d >= 0x1p40 ? int64_t{1} << 40 : static_cast<int64_t>(d);
  return true;
}

// The keywords that can change validity, in any draft (draft-04 to
// 2020-12; "nullable" is OpenAPI's). Everything else is an annotation:
// title, $comment, readOnly, vendor extensions, typos; JSON Schema says an
// unknown keyword is ignored.
bool IsAnnotation(std::string_view k) {
  static const char* const kValidating[] = {
      "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
      "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "contains",
      "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
      "dependentSchemas", "dependencies", "properties", "patternProperties", "additionalProperties",
      "propertyNames", "items", "prefixItems", "additionalItems", "unevaluatedItems", "unevaluatedProperties",
      "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "nullable"};
  for (const char* a : kValidating)
    if (k == a) return false;
  return k != kNonIntegral && k != kNotStrings;
}

std::string Compiler::NewName(const std::string& hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
    if (ok) base += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    else if (!base.empty() && base.back() != '-') base += '-';
    if (base.size() >= 48) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  // Numbered from where the last name of this base stopped (a pattern's
  // automaton names thousands of rules alike: no quadratic search).
  int& next = next_suffix_[base];
  for (int i = std::max(next, 2); names_.count(name) || Builtins().count(name); ++i) {
    name = base + "-" + std::to_string(i);
    next = i + 1;
  }
  names_.insert(name);
  return name;
}

std::string Compiler::AddRule(const std::string& hint, const std::string& body) {
  std::string name = NewName(hint);
  rules_.emplace_back(name, body);
  return name;
}

std::string Compiler::Builtin(const std::string& name) {
  if (names_.count(name)) return name;
  names_.insert(name);
  rules_.emplace_back(name, Builtins().at(name));
  for (const auto& d : BuiltinDeps(name)) Builtin(d);
  return name;
}

StatusOr<std::string> Compiler::Compile() {
  names_.insert("root");
  IndexIds();
  FindRecursiveRefs();
  scope_.push_back(root_base_);
  // The root is the first level of a recursion through "#".
  if (recursive_.count("#")) recursion_ = 1;
  LLM_ASSIGN_OR_RETURN(std::string body, Visit(root_, "", "root"));
  if (IsNever(body)) {
    if (!recursive_.empty())
      return InvalidArgument("no value satisfies the schema: its recursion has no finite value (every value needs another level; give the recursive $ref a null, optional or empty-array way out), or a false subschema, an empty enum or a contradiction leaves nothing");
    return InvalidArgument("no value satisfies the schema (a false subschema, an empty enum, or a const/enum its type rejects, leaves nothing)");
  }
  std::string out = "root ::= " + body + "\n";
  for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
  return out;
}

StatusOr<const Json*> Compiler::Resolve(const std::string& ref, const std::string& ptr) const {
  LLM_ASSIGN_OR_RETURN(const std::string canonical, Canonical(ref, ptr));
  return ResolvePointer(canonical, ptr);
}

StatusOr<const Json*> Compiler::ResolvePointer(const std::string& ref, const std::string& ptr) const {
  const Json* cur = &root_;
  size_t pos = 1;
  while (pos < ref.size()) {
    if (ref[pos] != '/') return InvalidArgument("$ref \"" + ref + "\" at " + Where(ptr) + " is not a JSON pointer");
    size_t end = ref.find('/', pos + 1);
    if (end == std::string::npos) end = ref.size();
    std::string token;
    for (size_t i = pos + 1; i < end; ++i) {
      if (ref[i] == '~' && i + 1 < end && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
        token += ref[i + 1] == '0' ? '~' : '/';
        ++i;
      } else if (ref[i] == '%' && i + 2 < end && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
        token += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        token += ref[i];
      }
    }
    const Json* next = nullptr;
    if (cur->is_object()) {
      next = cur->Find(token);
      // A keyword the document's draft ignores is renamed (schema_drafts.h).
      if (next == nullptr) next = cur->Find(kIgnoredPrefix + token);
    } else if (cur->is_array() && !token.empty() && token.size() < 10 &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t i = std::stoul(token);
      if (i < cur->array().size()) next = &cur->array()[i];
    }
    if (next == nullptr) return InvalidArgument("$ref \"" + ref + "\" at " + Where(ptr) + " points nowhere");
    cur = next;
    pos = end;
  }
  return cur;
}

namespace {

// Every "$ref" string in `s` (at pointer `ptr`) with where it stands, not
// looking into $defs/definitions (those only matter through a $ref to them).
void CollectRefs(const Json& s, const std::string& ptr, std::vector<std::pair<std::string, std::string>>* out, int depth) {
  if (depth > 128) return;
  if (s.is_array()) {
    for (size_t i = 0; i < s.array().size(); ++i) CollectRefs(s.array()[i], PointerJoin(ptr, i), out, depth + 1);
  } else if (s.is_object()) {
    for (const auto& [k, v] : s.object()) {
      if (k == "$ref" && v.is_string()) out->emplace_back(v.as_string(), ptr);
      else if (k == "$dynamicRef" && v.is_string()) out->emplace_back("\x02" + v.as_string(), ptr);  // (every target it may take)
      else if (k != "$defs" && k != "definitions" && k != "enum" && k != "const") CollectRefs(v, PointerJoin(ptr, k), out, depth + 1);
    }
  }
}

}  // namespace

void Compiler::FindRecursiveRefs() {
  // The reference graph over canonical references ("#/pointer"): each $ref
  // to the $refs inside its target.
  std::map<std::string, std::vector<std::string>> edges;
  std::vector<std::pair<std::string, std::string>> found;
  auto canonical = [&](std::vector<std::pair<std::string, std::string>>& refs) {
    std::vector<std::string> out;
    for (const auto& [r, at] : refs) {
      const bool dynamic = !r.empty() && r[0] == '\x02';
      auto c = Canonical(dynamic ? r.substr(1) : r, at);
      if (c.ok()) out.push_back(*c);
      // A $dynamicRef may land on any $dynamicAnchor of its name.
      const size_t hash = r.find('#');
      if (!dynamic || hash == std::string::npos || hash + 1 >= r.size() || r[hash + 1] == '/') continue;
      const std::string suffix = r.substr(hash);
      for (const auto& [uri, target] : dynamic_anchors_)
        if (uri.size() >= suffix.size() && uri.compare(uri.size() - suffix.size(), suffix.size(), suffix) == 0)
          out.push_back("#" + target);
    }
    refs.clear();
    return out;
  };
  CollectRefs(root_, "", &found, 0);
  if (const Json* defs = root_.is_object() ? root_.Find("$defs") : nullptr) CollectRefs(*defs, "/$defs", &found, 0);
  if (const Json* defs = root_.is_object() ? root_.Find("definitions") : nullptr) CollectRefs(*defs, "/definitions", &found, 0);
  std::vector<std::string> todo = canonical(found);
  while (!todo.empty() && edges.size() < 4096) {
    std::string r = todo.back();
    todo.pop_back();
    if (edges.count(r)) continue;
    auto target = ResolvePointer(r, "");
    if (target.ok()) CollectRefs(**target, r.substr(1), &found, 0);
    auto& out = edges[r];
    out = canonical(found);
    for (const auto& t : out) todo.push_back(t);
  }
  for (const auto& [r, next] : edges) {
    std::set<std::string> seen;
    std::vector<std::string> stack(next.begin(), next.end());
    while (!stack.empty()) {
      std::string x = stack.back();
      stack.pop_back();
      if (x == r) {
        recursive_.insert(r);
        break;
      }
      if (!seen.insert(x).second) continue;
      auto it = edges.find(x);
      if (it != edges.end()) stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
  }
}

StatusOr<std::string> Compiler::Ref(const std::string& ref_in, const std::string& ptr) {
  // Every spelling of a target ("#foo", "item.json", "#/$defs/item") is
  // its canonical "#/pointer": one rule, one recursion count.
  LLM_ASSIGN_OR_RETURN(const std::string ref, Canonical(ref_in, ptr));
  const bool recursive = recursive_.count(ref) > 0;
  // A non-recursive target compiles the same at any level unless it reaches
  // a recursive one; keying every $ref by the level keeps that simple (at
  // most kMaxRecursion + 1 copies).
  std::pair<std::string, int> key(ref, recursion_);
  const std::string base = dynamic_ ? BaseAt(ref.substr(1)) : std::string();
  if (dynamic_)
    for (const auto& r : scope_) key.first += "\x01" + r;
  auto it = ref_rules_.find(key);
  if (it != ref_rules_.end()) return it->second;
  if (recursive && recursion_ >= kMaxRecursion) {
    ref_rules_[key] = "";
    return std::string();
  }
  if (rules_.size() > 20000)
    return Unsupported("$ref \"" + ref + "\" at " + Where(ptr) + ": the schema is too large once its recursion is unrolled");
  LLM_ASSIGN_OR_RETURN(const Json* target, ResolvePointer(ref, ptr));
  std::string hint = ref.size() > 1 ? ref.substr(ref.rfind('/') + 1) : "root";
  if (recursive) hint += "-" + std::to_string(recursion_);
  recursion_ += recursive ? 1 : 0;
  const bool entered = dynamic_ && scope_.back() != base;  // a $ref into another resource
  if (entered) scope_.push_back(base);
  auto body = Visit(*target, ref.substr(1), hint);
  if (entered) scope_.pop_back();
  recursion_ -= recursive ? 1 : 0;
  if (!body.ok()) return body.status();
  if (IsNever(*body)) {
    ref_rules_[key] = "";
    return std::string();
  }
  std::string name = NewName(hint);
  ref_rules_[key] = name;
  rules_.emplace_back(name, *body);
  return name;
}

StatusOr<std::string> Compiler::Visit(const Json& s, const std::string& ptr, const std::string& hint) {
  // false: no value (an enclosing schema drops the branch, property or
  // items that need it, like a recursion out of levels).
  if (s.is_bool()) return s.as_bool() ? Builtin(kValue) : std::string();
  if (!s.is_object()) return InvalidArgument("the schema at " + Where(ptr) + " must be an object or a boolean");
  // Case splits (dependencies, if/then/else) and merges copy subschemas:
  // bound the total work, so a hostile schema is refused in bounded time.
  if (++visits_ > kMaxVisits || rules_.size() > kMaxCompiledRules)
    return InvalidArgument("the schema at " + Where(ptr) + " expands past the compiler's limits (" +
                           std::to_string(kMaxVisits) + " subschemas or " + std::to_string(kMaxCompiledRules) +
                           " rules once case splits and merges are written out)");
  if (++depth_ > kMaxDepth) {
    --depth_;
    return Unsupported("the schema at " + Where(ptr) + " nests deeper than 64 levels");
  }
  struct DepthGuard {
    int* d;
    ~DepthGuard() { --*d; }
  } guard{&depth_};

  // A schema with its own $id is a resource of the dynamic scope.
  bool entered = false;
  if (dynamic_ && (s.Find("$id") || s.Find("id"))) {
    const std::string base = BaseAt(ptr);
    entered = scope_.back() != base;
    if (entered) scope_.push_back(base);
  }
  struct ScopeGuard {
    std::vector<std::string>* scope;
    bool entered;
    ~ScopeGuard() {
      if (entered) scope->pop_back();
    }
  } scope_guard{&scope_, entered};
  if (const Json* dref = s.Find("$dynamicRef")) {
    // Resolved against the scope (schema_refs.cpp), then an ordinary
    // $ref to its target. Only where the schema stands in the document
    // (not a copy a merge made): its base URI and scope are known there.
    if (!dref->is_string()) return InvalidArgument("$dynamicRef at " + Where(ptr) + " must be a string");
    auto here = ResolvePointer("#" + ptr, ptr);
    if (!here.ok() || *here != &s)
      return Unsupported("$dynamicRef at " + Where(ptr) + " inside a merged allOf/anyOf/if branch is not supported");
    LLM_ASSIGN_OR_RETURN(const std::string target, DynamicTarget(dref->as_string(), ptr));
    std::vector<Json::Member> rest;
    for (const auto& m : s.object())
      if (m.first != "$dynamicRef") rest.push_back(m);
    bool alone = std::all_of(rest.begin(), rest.end(), [](const Json::Member& m) { return IsAnnotation(m.first); });
    if (alone) return Ref(target, "");
    if (s.Find("$ref")) return Unsupported("$dynamicRef beside $ref at " + Where(ptr) + " is not supported");
    // Beside other keywords: allOf [them, the target] (its pointer is from the root).
    rest.emplace_back("$ref", Json::String(kResolvedRef + target));
    return Visit(Json::Object(std::move(rest)), ptr, hint);
  }
  bool validating_siblings = false;  // beside $ref / anyOf: anything but annotations
  for (const auto& [k, v] : s.object()) {
    for (const char* u : kUnsupported)
      if (k == u) return Unsupported("keyword \"" + k + "\" at " + Where(PointerJoin(ptr, k)) + " is not supported");
    if (!IsAnnotation(k) && k != "$ref" && k != "anyOf" && k != "oneOf" && k != "allOf") validating_siblings = true;
  }
  if (s.Find("not") || s.Find("if") || s.Find("then") || s.Find("else")) {
    LLM_ASSIGN_OR_RETURN(Json split, Conditionals(s, ptr));
    return Visit(split, ptr, hint);
  }
  if (s.Find("allOf")) {
    LLM_ASSIGN_OR_RETURN(Json merged, MergeAllOf(s, ptr));
    return Visit(merged, ptr, hint);
  }
  // The keywords beside $ref or anyOf/oneOf: they hold too (intersection).
  auto siblings = [&](std::initializer_list<const char*> drop) {
    std::vector<Json::Member> rest;
    for (const auto& m : s.object())
      if (!IsAnnotation(m.first) && std::none_of(drop.begin(), drop.end(), [&](const char* d) { return m.first == d; }))
        rest.push_back(m);
    return Json::Object(std::move(rest));
  };
  if (const Json* ref = s.Find("$ref")) {
    if (!ref->is_string()) return InvalidArgument("$ref at " + Where(ptr) + " must be a string");
    if (!validating_siblings && !s.Find("anyOf") && !s.Find("oneOf")) return Ref(ref->as_string(), ptr);
    // {"$ref": R, k: v...} is allOf [R, {k: v...}] (2019-09 and later; what
    // draft-07 authors mean too, and stricter than draft-07's "ignore the
    // siblings", so sound under both readings).
    if (auto c = Canonical(ref->as_string(), ptr); c.ok() && recursive_.count(*c))
      return Unsupported("$ref \"" + ref->as_string() + "\" at " + Where(ptr) +
                         " beside validating keywords: a recursive reference cannot be merged with them");
    return Visit(WithAllOf(siblings({"$ref"}), {Json::Object({{"$ref", *ref}})}), ptr, hint);
  }
  for (const char* comb : {"anyOf", "oneOf"}) {
    const Json* alts = s.Find(comb);
    if (!alts) continue;
    const std::string p = PointerJoin(ptr, comb);
    if (!alts->is_array() || alts->array().empty()) return InvalidArgument(std::string(comb) + " at " + Where(ptr) + " must be a non-empty array");
    // anyOf beside oneOf: each anyOf branch holds with the oneOf (kept in
    // the siblings, compiled in the branch's own visit).
    const bool with_one_of = std::string_view(comb) == "anyOf" && s.Find("oneOf");
    // Siblings hold in every branch: each branch is merged with them
    // (allOf [branch, siblings]: MergeAllOf), and that is what is compiled
    // and, for oneOf, proven disjoint.
    std::vector<Json> merged;
    std::vector<const Json*> branches;
    for (size_t i = 0; i < alts->array().size(); ++i) {
      const Json& branch = alts->array()[i];
      if (!validating_siblings && !with_one_of) {
        branches.push_back(&branch);
        continue;
      }
      const Json both = WithAllOf(with_one_of ? siblings({"anyOf"}) : siblings({"anyOf", "oneOf"}), {branch});
      LLM_ASSIGN_OR_RETURN(Json m, MergeAllOf(both, PointerJoin(p, i)));
      merged.push_back(std::move(m));
    }
    for (const Json& m : merged) branches.push_back(&m);
    if (std::string_view(comb) == "oneOf") {
      // The grammar is anyOf's: exact only when no value matches two branches.
      size_t i = 0, j = 0;
      bool exhausted = false;
      auto resolve = [&](const std::string& r) -> const Json* {
        auto t = Resolve(r, ptr);
        return t.ok() ? *t : nullptr;
      };
      if (FindOverlap(branches, resolve, &i, &j, &exhausted) && exhausted)
        return InvalidArgument("oneOf at " + Where(ptr) + ": too many branches to prove disjoint (the limit: 200000 steps)");
      if (i != j) {
        // Made disjoint: branch k and none of the others (exact where
        // every branch has a negation, schema_negate.cpp). The others are
        // negated as written: the siblings hold in branch k already.
        auto refused = [&](const std::string& why) {
          return Unsupported("oneOf at " + Where(ptr) + ": branches " + std::to_string(i) + " and " + std::to_string(j) +
                             " are not provably disjoint and cannot be made so (" + why +
                             "; oneOf needs exactly one branch to match; give them different types, const/enum values "
                             "or ranges, or a required property whose values differ; or use anyOf)");
        };
        if (branches.size() > kMaxNegatedOneOf)
          return refused("more than " + std::to_string(kMaxNegatedOneOf) + " branches to negate");
        std::vector<Json> negated;
        for (size_t o = 0; o < branches.size(); ++o) {
          auto n = Negate(alts->array()[o], PointerJoin(p, o), 0);
          if (!n.ok()) return n.status().code() == LLM_ERR_UNSUPPORTED ? refused(n.status().message()) : n.status();
          negated.push_back(std::move(*n));
        }
        std::vector<std::string> out;
        for (size_t k = 0; k < branches.size(); ++k) {
          std::vector<Json> parts = {*branches[k]};
          for (size_t o = 0; o < branches.size(); ++o)
            if (o != k) parts.push_back(negated[o]);
          auto e = Visit(Json::Object({{"allOf", Json::Array(std::move(parts))}}), PointerJoin(p, k),
                         hint + "-" + std::to_string(k));
          if (!e.ok()) return e.status().code() == LLM_ERR_UNSUPPORTED ? refused(e.status().message()) : e.status();
          if (!IsNever(*e)) out.push_back(*e);
        }
        return out.empty() ? std::string() : Alternatives(out);
      }
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < branches.size(); ++i) {
      LLM_ASSIGN_OR_RETURN(std::string e, Visit(*branches[i], PointerJoin(p, i), hint + "-" + std::to_string(i)));
      if (!IsNever(e)) out.push_back(e);
    }
    return out.empty() ? std::string() : Alternatives(out);
  }

  if (s.Find("unevaluatedProperties") || s.Find("unevaluatedItems")) {
    // By now allOf/$ref/anyOf/not/if are merged away: what this schema
    // evaluates is its own properties (items), so unevaluatedProperties
    // (Items) is additionalProperties (items past prefixItems), or nothing
    // when those are already given.
    // dependentSchemas: split first (SplitDependencies): the dependent
    // schema evaluates in the case where it applies, like an allOf part.
    if (s.Find("dependentRequired") || s.Find("dependentSchemas") || s.Find("dependencies")) {
      LLM_ASSIGN_OR_RETURN(Json split, SplitDependencies(s, ptr));
      return Visit(split, ptr, hint);
    }
    // contains evaluates the items it matches: past the tuple an item
    // matches contains or unevaluatedItems (contains still counts its hits).
    const Json* contains = s.Find("contains");
    const Json* uitems = s.Find("unevaluatedItems");
    if (contains && uitems && (s.Find("items") || s.Find("additionalItems")))
      contains = nullptr;  // every item evaluated already: unevaluatedItems is moot
    std::vector<Json::Member> out;
    for (const auto& m : s.object()) {
      if (m.first == "unevaluatedProperties") {
        if (!s.Find("additionalProperties")) out.emplace_back("additionalProperties", m.second);
      } else if (m.first == "unevaluatedItems") {
        const Json* items = s.Find("items");
        if (!items && contains) out.emplace_back("items", Json::Object({{"anyOf", Json::Array({*contains, m.second})}}));
        else if (!items) out.emplace_back("items", m.second);
        else if (items->is_array() && !s.Find("additionalItems")) out.emplace_back("additionalItems", m.second);
      } else {
        out.push_back(m);
      }
    }
    return Visit(Json::Object(std::move(out)), ptr, hint);
  }
  if (s.Find("dependentRequired") || s.Find("dependentSchemas") || s.Find("dependencies")) {
    LLM_ASSIGN_OR_RETURN(Json split, SplitDependencies(s, ptr));
    return Visit(split, ptr, hint);
  }

  // The types this schema admits.
  std::vector<std::string> types;
  if (const Json* t = s.Find("type")) {
    if (t->is_string()) {
      types.push_back(t->as_string());
    } else if (t->is_array() && !t->array().empty()) {
      for (const auto& e : t->array()) {
        if (!e.is_string()) return InvalidArgument("type at " + Where(ptr) + " must be a string or an array of strings");
        types.push_back(e.as_string());
      }
    } else {
      return InvalidArgument("type at " + Where(ptr) + " must be a string or an array of strings");
    }
    for (const auto& t2 : types) {
      static const char* const kTypes[] = {"null", "boolean", "object", "array", "number", "integer", "string"};
      if (std::none_of(std::begin(kTypes), std::end(kTypes), [&](const char* k) { return t2 == k; }))
        return InvalidArgument("type at " + Where(ptr) + ": unknown type \"" + t2 + "\"");
    }
  }
  if (s.Find("enum") || s.Find("const")) return EnumConst(s, ptr, types);
  if (types.empty()) {
    // No type: the keywords present say which types they constrain; values of
    // the others would pass, but keeping to the constrained types is sound.
    auto has = [&](std::initializer_list<const char*> ks) {
      return std::any_of(ks.begin(), ks.end(), [&](const char* k) { return s.Find(k) != nullptr; });
    };
    if (has({"properties", "required", "additionalProperties", "minProperties", "maxProperties", "patternProperties",
             "propertyNames"}))
      types.push_back("object");
    const Json* unique = s.Find("uniqueItems");
    if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains"}) || (unique && unique->as_bool()))
      types.push_back("array");
    if (has({"pattern", "format", "minLength", "maxLength"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) types.push_back("number");
    if (types.empty()) return Builtin(kValue);
  }
  if (const Json* n = s.Find("nullable"); n && n->as_bool() &&
      std::find(types.begin(), types.end(), "null") == types.end()) {
    types.push_back("null");
  }
  std::vector<std::string> alts;
  for (const auto& t : types) {
    // "number" already admits every integer.
    if (t == "integer" && std::find(types.begin(), types.end(), "number") != types.end()) continue;
    LLM_ASSIGN_OR_RETURN(std::string e, Typed(s, ptr, types.size() > 1 ? hint + "-" + t : hint, t));
    if (!IsNever(e)) alts.push_back(e);
  }
  return alts.empty() ? std::string() : Alternatives(alts);
}

StatusOr<std::string> Compiler::EnumConst(const Json& s, const std::string& ptr, const std::vector<std::string>& types) {
  // Other validating keywords hold too: a value stays when the grammar of
  // the rest of the schema accepts its text (sound: that grammar never
  // accepts an invalid value; it may drop a valid one it narrows away,
  // e.g. an object whose keys are not in schema order).
  std::vector<Json::Member> rest;
  for (const auto& m : s.object())
    if (m.first != "enum" && m.first != "const" && m.first != "type" && !IsAnnotation(m.first)) rest.push_back(m);
  std::unique_ptr<constrain::Matcher> check;
  if (!rest.empty()) {
    // Every type, each under the keywords that apply to it (an untyped
    // schema would narrow to the types its keywords name: minLength beside
    // enum [7, "ab"] must keep 7).
    std::vector<Json> all_types;
    for (const char* t : {"null", "boolean", "object", "array", "number", "string"}) all_types.push_back(Json::String(t));
    rest.emplace_back("type", Json::Array(std::move(all_types)));
    Compiler sub(root_);
    sub.recursive_ = recursive_;
    sub.depth_ = depth_;
    auto body = sub.Visit(Json::Object(std::move(rest)), ptr, "root");
    if (!body.ok()) return body.status();
    if (IsNever(*body)) return std::string();
    std::string text = "root ::= " + *body + "\n";
    for (const auto& [name, rule] : sub.rules_) text += name + " ::= " + rule + "\n";
    auto g = constrain::ParseGrammar(text);
    if (!g.ok()) return InvalidArgument("the keywords beside enum/const at " + Where(ptr) + ": " + g.status().message());
    auto program = constrain::LowerToBytes(*g);
    if (!program.ok()) return InvalidArgument("the keywords beside enum/const at " + Where(ptr) + ": " + program.status().message());
    check = std::make_unique<constrain::Matcher>(*program);
  }
  std::vector<const Json*> values;
  if (const Json* c = s.Find("const")) values.push_back(c);
  if (const Json* e = s.Find("enum")) {
    if (!e->is_array()) return InvalidArgument("enum at " + Where(ptr) + " must be an array");
    if (const Json* c = s.Find("const")) {  // both: the enum's values equal to the const
      auto a = gbnf::JsonDump(*c);
      values.clear();
      for (const auto& v : e->array()) {
        auto b = gbnf::JsonDump(v);
        if (a.ok() && b.ok() && (*a == *b || (v.is_number() && c->is_number() && v.as_double() == c->as_double())))
          values.push_back(&v);
      }
    } else {
      for (const auto& v : e->array()) values.push_back(&v);
    }
  }
  std::vector<std::string> alts;
  for (const Json* v : values) {
    if (!types.empty() && std::none_of(types.begin(), types.end(), [&](const std::string& t) { return HasType(*v, t); }))
      continue;  // `type` rejects this value
    auto text = gbnf::JsonDump(*v);
    if (!text.ok()) return InvalidArgument(text.status().message() + " at " + Where(ptr));
    if (check && !check->Matches(*text)) continue;  // the other keywords reject it
    alts.push_back(gbnf::Literal(*text));
  }
  if (alts.empty()) return std::string();  // no valid value: like false
  return Alternatives(alts);
}

StatusOr<std::string> Compiler::Typed(const Json& s, const std::string& ptr, const std::string& hint, const std::string& t) {
  if (t == "null") return Builtin("null");
  if (t == "boolean") return Builtin("boolean");
  if (t == "string") return String(s, ptr);
  if (t == "integer") return Number(s, ptr, true);
  if (t == "number") return Number(s, ptr, false);
  if (t == "object") return Object(s, ptr, hint);
  return Array(s, ptr, hint);
}

StatusOr<std::string> Compiler::String(const Json& s, const std::string& ptr) {
  auto count = [&](const char* k, int64_t* out) -> Status {
    const Json* v = s.Find(k);
    if (!v) return Status::Ok();
    if (!CountValue(*v, out)) return InvalidArgument(std::string(k) + " at " + Where(ptr) + " must be a non-negative integer");
    return Status::Ok();
  };
  int64_t min_len = 0, max_len = -1;
  LLM_RETURN_IF_ERROR(count("minLength", &min_len));
  LLM_RETURN_IF_ERROR(count("maxLength", &max_len));
  const bool lengths = s.Find("minLength") || s.Find("maxLength");
  const Json* format = s.Find("format");
  std::optional<std::string> format_body;
  if (format && format->is_string()) format_body = gbnf::FormatBody(format->as_string());
  const Json* pattern = s.Find("pattern");
  if (const Json* none = s.Find(kNotStrings)) {  // (written by Negate: an array of strings)
    if (format || pattern || lengths)
      return Unsupported("a string const/enum negated (not/if/oneOf) beside pattern/format/minLength/maxLength at " +
                         Where(ptr) + " is not supported");
    std::vector<std::string> names;
    for (const Json& n : none->array()) names.push_back(n.as_string());
    return KeyNotIn(names);
  }
  if (format_body && (pattern || lengths))
    return Unsupported("format \"" + format->as_string() + "\" beside pattern/minLength/maxLength at " + Where(ptr) + " is not supported");
  if (format_body) return "\"\\\"\" " + *format_body + " \"\\\"\"";
  if (pattern) {
    if (!pattern->is_string()) return InvalidArgument("pattern at " + Where(ptr) + " must be a string");
    if (max_len >= 0 && max_len < min_len) return std::string();  // no string: like false
    const std::string any = Builtin(kChar);
    const std::string where = Where(PointerJoin(ptr, "pattern"));
    auto a = CompilePattern(pattern->as_string(), min_len, max_len, any, where);
    if (!a.ok()) {
      const std::string m = a.status().message();
      return Status(a.status().code(), m.find(where) == std::string::npos ? m + " (at " + where + ")" : m);
    }
    if (a->states.empty()) return std::string();  // no string matches within the lengths
    // One rule per automaton state, all named before any is written.
    std::vector<std::string> names;
    for (size_t i = 0; i < a->states.size(); ++i) names.push_back(NewName("pattern"));
    for (size_t i = 0; i < a->states.size(); ++i) {
      const auto& st = a->states[i];
      std::string body = st.tail;
      if (body.empty()) {
        std::vector<std::string> alts;
        for (const auto& e : st.edges) {
          // A long class (\p{L}: hundreds of ranges) is written once, as a
          // rule every state that steps on it names: a counted pattern has
          // a state per count, and the text would otherwise repeat in each.
          std::string chars = e.chars;
          if (chars.size() > 64) {
            auto [it, fresh] = pattern_classes_.emplace(chars, std::string());
            if (fresh) it->second = AddRule("pattern-class", chars);
            chars = it->second;
          }
          alts.push_back(chars + " " + names[static_cast<size_t>(e.to)]);
        }
        if (st.accept) alts.push_back("\"\"");
        body = alts.size() == 1 ? alts[0] : Alternatives(alts);
      }
      pattern_bytes_ += body.size();
      rules_.emplace_back(names[i], body);
    }
    // Many counted patterns add up (a length counter per string): stop at
    // the grammar's size limit here, before writing and parsing megabytes.
    if (pattern_bytes_ > static_cast<size_t>(constrain::kMaxGrammarBytes))
      return InvalidArgument("pattern at " + where + ": the schema is too large to compile: its pattern automata pass " +
                             std::to_string(constrain::kMaxGrammarBytes) +
                             " bytes of grammar (a grammar limit; long maxLength beside patterns add up)");
    return "\"\\\"\" " + names[0] + " \"\\\"\"";
  }
  if (!lengths) return Builtin("string");
  if (max_len >= 0 && max_len < min_len) return std::string();  // no string: like false
  if (min_len > kMaxCountedLength)
    return InvalidArgument("minLength " + std::to_string(min_len) + " at " + Where(ptr) + " is above the limit of " +
                           std::to_string(kMaxCountedLength) + " characters");
  const int64_t hi = max_len < 0 ? -1 : std::min(max_len, kMaxCountedLength);
  if (hi == 0) return std::string("\"\\\"\\\"\"");
  // One rule per count: a schema with many fields of the same maxLength
  // pays for the written-out copies once.
  const std::string key = std::to_string(min_len) + "," + std::to_string(hi);
  if (auto it = counted_strings_.find(key); it != counted_strings_.end()) return it->second;
  const std::string c = Builtin(kChar);
  std::string rep;
  if (hi < 0) rep = min_len == 0 ? c + "*" : c + "{" + std::to_string(min_len) + ",}";
  else rep = c + "{" + std::to_string(min_len) + (hi == min_len ? "" : "," + std::to_string(hi)) + "}";
  const std::string name = AddRule("string-" + std::to_string(min_len) + "-" + (hi < 0 ? std::string("n") : std::to_string(hi)),
                                   "\"\\\"\" " + rep + " \"\\\"\"");
  counted_strings_[key] = name;
  return name;
}

// multipleOf m = p/q (q a power of ten): an integer n is a multiple iff
// n is a multiple of step = p / gcd(p, q). Numbers are narrowed to those
// integers (sound: each is a multiple of m). The integers of a bounded
// range are listed when there are at most 256; without bounds (or with
// minimum 0 and no maximum) a remainder automaton over the decimal digits:
// state r after the digits so far, r' = (10 r + d) mod step, accepting at
// 0 (step <= 1000).
StatusOr<std::string> Compiler::MultipleOf(const Json& m, std::optional<int64_t> lo, std::optional<int64_t> hi,
                                           const std::string& ptr) {
  const std::string where = Where(PointerJoin(ptr, "multipleOf"));
  if (!m.is_number() || !(m.as_double() > 0)) return InvalidArgument("multipleOf at " + where + " must be a number above 0");
  int64_t p = 0, q = 1;
  if (m.is_int()) {
    p = m.as_int();
  } else {
    const double v = m.as_double();
    for (int d = 0; d <= 12 && p == 0; ++d, q *= 10) {
      const double x = v * static_cast<double>(q);
      if (x < 9e15 && std::fabs(x - std::round(x)) < 1e-9 * std::max(1.0, x)) p = static_cast<int64_t>(std::llround(x));
      if (p != 0) break;
    }
    if (p == 0)
      return Unsupported("multipleOf " + std::to_string(v) + " at " + where +
                         " is not supported (only integers below 9e15 and decimals of at most 12 places)");
  }
  const int64_t step = p / std::gcd(p, q);
  if (lo && hi) {
    if (*lo > *hi) return std::string();
    const int64_t first = *lo >= 0 ? (*lo + step - 1) / step * step : -((-*lo) / step * step);
    std::vector<std::string> alts;
    for (int64_t n = first; n <= *hi && alts.size() <= 256; n += step) alts.push_back(gbnf::Literal(std::to_string(n)));
    if (alts.size() > 256)
      return InvalidArgument("multipleOf at " + where + ": a range holding more than 256 multiples (the limit)");
    if (alts.empty()) return std::string();  // no multiple in range
    return Alternatives(alts);
  }
  if (hi || (lo && *lo != 0 && *lo != 1))
    return Unsupported("multipleOf at " + where + " beside a maximum, or a minimum other than 0, is not supported");
  if (step == 1) return lo ? gbnf::IntRange(lo, hi) : StatusOr<std::string>(Builtin("integer"));
  if (step > 1000) return InvalidArgument("multipleOf at " + where + ": the step " + std::to_string(step) + " is above the limit of 1000");
  const bool positive = lo.has_value();  // minimum 0 (or 1): no sign, and 0 only for minimum 0
  std::vector<std::string> names;
  for (int64_t r = 0; r < step; ++r) names.push_back(NewName("multiple-of-" + std::to_string(step) + "-r" + std::to_string(r)));
  auto digits = [&](int64_t r, int first_digit) {
    std::map<int64_t, std::string> by_target;
    for (int d = first_digit; d <= 9; ++d) by_target[(10 * r + d) % step] += static_cast<char>('0' + d);
    std::vector<std::string> alts;
    for (const auto& [t, ds] : by_target) alts.push_back("[" + ds + "] " + names[static_cast<size_t>(t)]);
    return alts;
  };
  for (int64_t r = 0; r < step; ++r) {
    std::vector<std::string> alts = digits(r, 0);
    if (r == 0) alts.push_back("\"\"");
    rules_.emplace_back(names[static_cast<size_t>(r)], Alternatives(alts));
  }
  std::vector<std::string> start = digits(0, 1);  // a first digit 1-9 from remainder 0
  std::string nonzero = Alternatives(start);
  if (positive) return *lo == 0 ? "( \"0\" | " + nonzero + " )" : nonzero;
  return "( \"0\" | \"-\"? " + nonzero + " )";
}

StatusOr<std::string> Compiler::Number(const Json& s, const std::string& ptr, bool integer) {
  // Each bound as the integer range it leaves: L <= x <= H for the integers
  // of the range; exclusive bounds step past themselves.
  std::optional<int64_t> lo, hi;
  auto clamp = [](double d) { return static_cast<int64_t>(std::max(-1e18, std::min(1e18, d))); };
  const Json* emin = s.Find("exclusiveMinimum");
  const Json* emax = s.Find("exclusiveMaximum");
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    const Json* v = s.Find(k);
    if (v && !v->is_number() && !v->is_bool())
      return InvalidArgument(std::string(k) + " at " + Where(ptr) + " must be a number");
  }
  auto tighten_lo = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
  auto tighten_hi = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
  // Draft 4: exclusiveMinimum/Maximum are booleans modifying minimum/maximum.
  const bool emin_flag = emin && emin->is_bool() && emin->as_bool();
  const bool emax_flag = emax && emax->is_bool() && emax->as_bool();
  if (const Json* v = s.Find("minimum"); v && v->is_number()) {
    const double d = v->as_double();
    tighten_lo(clamp(emin_flag ? std::floor(d) + 1 : std::ceil(d)));
  }
  if (const Json* v = s.Find("maximum"); v && v->is_number()) {
    const double d = v->as_double();
    tighten_hi(clamp(emax_flag ? std::ceil(d) - 1 : std::floor(d)));
  }
  if (emin && emin->is_number()) tighten_lo(clamp(std::floor(emin->as_double()) + 1));
  if (emax && emax->is_number()) tighten_hi(clamp(std::ceil(emax->as_double()) - 1));
  // Not an integer (¬integer): the decimals below, with a last digit that
  // is not 0; exponents left out (a narrowing).
  const bool fraction = s.Find(kNonIntegral) != nullptr;
  if (fraction && (integer || s.Find("multipleOf"))) return std::string();  // (multiples are narrowed to integers)
  if (const Json* m = s.Find("multipleOf")) return MultipleOf(*m, lo, hi, ptr);
  if (!lo && !hi && fraction) return std::string("\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) \".\" [0-9]{0,14} [1-9]");
  if (!lo && !hi) return Builtin(integer ? "integer" : "number");
  // Bounds no number meets (a case split or oneOf branch left empty): no value.
  double rlo = -HUGE_VAL, rhi = HUGE_VAL;
  bool rlo_open = false, rhi_open = false;
  for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    const Json* v = s.Find(k);
    if (!v || !v->is_number()) continue;
    const double d = v->as_double();
    const std::string_view name = k;
    const bool lower = name == "minimum" || name == "exclusiveMinimum";
    const bool open = name.starts_with("exclusive") || (lower ? emin_flag : emax_flag);
    if (lower && (d > rlo || (d == rlo && open))) rlo = d, rlo_open = open;
    if (!lower && (d < rhi || (d == rhi && open))) rhi = d, rhi_open = open;
  }
  if (rlo > rhi || (rlo == rhi && (rlo_open || rhi_open))) return std::string();
  if (lo && hi && *lo > *hi)
    return (integer ? StatusOr<std::string>(std::string())  // no integer in range: no value
                    : Unsupported("a number range without an integer in it at " + Where(ptr) + " is not supported"));
  LLM_ASSIGN_OR_RETURN(std::string ints, gbnf::IntRange(lo, hi));
  if (integer) return ints;
  // Decimals k.f lie strictly between k and k+1 (k >= 0) or between -(m+1)
  // and -m (k = -m < 0, and "-0.f" in (-1, 0)): keep those whose whole
  // interval lies within [lo, hi].
  const std::string frac = fraction ? "\".\" [0-9]{0,14} [1-9]" : "\".\" [0-9]{1,15}";
  std::vector<std::string> alts;
  if (!fraction) alts.push_back(ints);
  const int64_t plo = lo ? std::max<int64_t>(*lo, 0) : 0;
  if (!hi || plo <= *hi - 1) {
    std::optional<int64_t> phi;
    if (hi) phi = *hi - 1;
    LLM_ASSIGN_OR_RETURN(std::string k, gbnf::IntRange(plo, phi));
    alts.push_back(k + " " + frac);
  }
  const int64_t mlo = hi ? std::max<int64_t>(1, -*hi) : 1;
  if (!lo || mlo <= -*lo - 1) {
    std::optional<int64_t> mhi;
    if (lo) mhi = -*lo - 1;
    LLM_ASSIGN_OR_RETURN(std::string m, gbnf::IntRange(mlo, mhi));
    alts.push_back("\"-\" " + m + " " + frac);
  }
  if ((!lo || *lo <= -1) && (!hi || *hi >= 0)) alts.push_back("\"-0\" " + frac);
  return alts.empty() ? std::string() : Alternatives(alts);
}

}  // namespace schema

StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema_json, bool* free_keys) {
  auto parsed = ParseJson(schema_json, 128);
  if (!parsed.ok()) return InvalidArgument("JSON Schema: " + parsed.status().message());
  auto draft = schema::DraftOf(*parsed);
  if (!draft.ok()) return Status(draft.status().code(), "JSON Schema: " + draft.status().message());
  const Json doc = schema::ReadAsDraft(*parsed, *draft);
  schema::Compiler c(doc);
  auto g = c.Compile();
  if (!g.ok()) return Status(g.status().code(), "JSON Schema: " + g.status().message());
  if (free_keys) *free_keys = c.free_keys();
  return g;
}

}  // namespace llm
