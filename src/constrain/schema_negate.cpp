// not and if/then/else for the JSON Schema compiler (schema_compiler.h).
// A grammar cannot take a complement, so ¬S is written as a schema when S
// is made of keywords whose negation is a schema again:
//   false / true / {}            true / false / false
//   type T                       the other types (beside integer alone:
//                                numbers that are not integers, kNonIntegral)
//   required [a, b]              an object without a, or without b
//   minimum v (and the others)   a number < v (other types satisfy it)
//   minLength n (and the others) a string of <= n-1 characters ...
//   const/enum of true/false/null the other values of that finite set
//   const/enum of numbers        other types, or numbers below, between
//                                or above the listed ones
//   const/enum of strings        other types, or another string (kNotStrings)
//   properties {p: S}            an object with p present and ¬S
//   not S / allOf / anyOf        S / anyOf of the negations / allOf of them
// joined by anyOf (¬(a ∧ b) = ¬a ∨ ¬b). Anything else is refused naming
// the keyword. Then
//   not S                  = allOf [rest, ¬S]
//   if S then T else E     = allOf [rest, anyOf [allOf [S, T], allOf [¬S, E]]]
// (the two cases are disjoint: exact); "if" without then/else and
// then/else without "if" change nothing.
#include <algorithm>
#include <cmath>

#include "constrain/schema_compiler.h"

namespace llm::schema {
namespace {

const char* const kAllTypes[] = {"null", "boolean", "object", "array", "string", "number"};

Json Types(const std::vector<std::string>& except) {
  std::vector<Json> out;
  for (const char* t : kAllTypes)
    if (std::find(except.begin(), except.end(), t) == except.end()) out.push_back(Json::String(t));
  return Json::Object({{"type", Json::Array(std::move(out))}});
}

Json AnyOf(std::vector<Json> alts) {
  if (alts.size() == 1) return alts[0];
  return Json::Object({{"anyOf", Json::Array(std::move(alts))}});
}

}  // namespace

StatusOr<Json> Compiler::Negate(const Json& s, const std::string& ptr, int depth) {
  if (depth > 8) return Unsupported("not/if at " + Where(ptr) + ": negation nested too deep");
  if (s.is_bool()) return Json::Bool(!s.as_bool());
  if (!s.is_object()) return InvalidArgument("the schema at " + Where(ptr) + " must be an object or a boolean");
  if (const Json* r = s.Find("$ref"); r && r->is_string()) {
    std::vector<Json::Member> rest;
    for (const auto& m : s.object())
      if (m.first != "$ref") rest.push_back(m);
    LLM_ASSIGN_OR_RETURN(const std::string c, Canonical(r->as_string(), ptr));
    if (recursive_.count(c)) return Unsupported("not/if at " + Where(ptr) + ": a recursive $ref cannot be negated");
    LLM_ASSIGN_OR_RETURN(const Json* target, ResolvePointer(c, ptr));
    LLM_ASSIGN_OR_RETURN(Json nt, Negate(*target, c.substr(1), depth + 1));
    LLM_ASSIGN_OR_RETURN(Json nr, Negate(Json::Object(std::move(rest)), ptr, depth + 1));
    return AnyOf({nt, nr});
  }
  std::vector<Json> alts;
  auto refuse = [&](const std::string& k) {
    return Unsupported("\"" + k + "\" at " + Where(PointerJoin(ptr, k)) +
                       " inside not/if cannot be negated exactly (only type, required, bounds, lengths, counts, "
                       "scalar consts and enums, properties of those, and not/allOf/anyOf of those)");
  };
  // A bound on type T holds for every other type: its negation is a T
  // outside the bound (the keyword k2 with value v).
  auto bound = [&](const char* t, const char* k2, const Json& v) {
    alts.push_back(Json::Object({{"type", Json::String(t)}, {k2, v}}));
  };
  for (const auto& [k, v] : s.object()) {
    if (IsAnnotation(k)) continue;
    if (k == "type") {
      std::vector<std::string> listed;
      if (v.is_string()) listed.push_back(v.as_string());
      for (const auto& e : v.array()) listed.push_back(e.as_string());
      const bool has_int = std::find(listed.begin(), listed.end(), "integer") != listed.end();
      const bool has_num = std::find(listed.begin(), listed.end(), "number") != listed.end();
      if (has_int && !has_num) {  // the other types, and the numbers that are not integers
        listed.push_back("number");
        alts.push_back(Json::Object({{"type", Json::String("number")}, {kNonIntegral, Json::Bool(true)}}));
      }
      alts.push_back(Types(listed));
    } else if (k == "required" && v.is_array()) {
      for (const auto& n : v.array()) {  // (non-objects satisfy required)
        alts.push_back(Json::Object({{"type", Json::String("object")},
                                     {"properties", Json::Object({{n.as_string(), Json::Bool(false)}})},
                                     {"additionalProperties", Json::Bool(true)},
                                     {kNoAnnotations, Json::Bool(true)}}));
      }
    } else if ((k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") && v.is_number()) {
      const char* opposite = k == "minimum" ? "exclusiveMaximum" : k == "maximum" ? "exclusiveMinimum" : k == "exclusiveMinimum" ? "maximum" : "minimum";
      bound("number", opposite, v);
    } else if (k == "minLength" || k == "minItems" || k == "minProperties" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      int64_t n = 0;
      if (!CountValue(v, &n)) return InvalidArgument(k + " at " + Where(ptr) + " must be a non-negative integer");
      const char* t = k.find("Length") != std::string::npos ? "string" : k.find("Items") != std::string::npos ? "array" : "object";
      const bool is_min = k.rfind("min", 0) == 0;
      if (is_min && n == 0) {  // always holds: its negation only other types... none
        alts.push_back(Json::Bool(false));
        continue;
      }
      const std::string other = (is_min ? "max" : "min") + k.substr(3);
      bound(t, other.c_str(), Json::Int(is_min ? n - 1 : n + 1));
    } else if (k == "const" || (k == "enum" && v.is_array())) {
      std::vector<const Json*> vals;
      if (k == "const") vals.push_back(&v);
      else for (const auto& e : v.array()) vals.push_back(&e);
      bool t = false, f = false, null = false;
      std::vector<double> numbers;
      std::vector<Json> strings;
      std::vector<std::string> gone;
      for (const Json* e : vals) {
        if (e->is_bool()) (e->as_bool() ? t : f) = true;
        else if (e->is_null()) null = true;
        else if (e->is_number() && std::isfinite(e->as_double())) numbers.push_back(e->as_double());
        else if (e->is_string()) strings.push_back(*e);
        else return refuse(k);
      }
      if (!strings.empty()) {  // the other strings (kNotStrings, a trie of the listed ones)
        gone.push_back("string");
        alts.push_back(Json::Object({{"type", Json::String("string")}, {kNotStrings, Json::Array(strings)}}));
      }
      if (null) gone.push_back("null");
      if (t || f) gone.push_back("boolean");
      if (!numbers.empty()) gone.push_back("number");
      alts.push_back(Types(gone));
      if (t != f) alts.push_back(Json::Object({{"const", Json::Bool(!t)}}));  // the other boolean
      // The numbers between and around the listed ones: open intervals,
      // each kept where it holds an integer (the number grammar's decimals
      // lie between integers of its range, so an interval without one has
      // nothing the grammar writes: left out, a narrowing).
      std::sort(numbers.begin(), numbers.end());
      for (size_t i = 0; i <= numbers.size() && !numbers.empty(); ++i) {
        std::vector<Json::Member> iv = {{"type", Json::String("number")}};
        if (i > 0) iv.emplace_back("exclusiveMinimum", Json::Number(numbers[i - 1]));
        if (i < numbers.size()) iv.emplace_back("exclusiveMaximum", Json::Number(numbers[i]));
        if (i > 0 && i < numbers.size() && std::floor(numbers[i - 1]) + 1 > std::ceil(numbers[i]) - 1) continue;
        alts.push_back(Json::Object(std::move(iv)));
      }
    } else if (k == "not") {  // ¬¬S = S (whose annotations the outer not drops)
      if (v.is_object()) {
        std::vector<Json::Member> marked = v.object();
        marked.emplace_back(kNoAnnotations, Json::Bool(true));
        alts.push_back(Json::Object(std::move(marked)));
      } else {
        alts.push_back(v);
      }
    } else if (k == "allOf" && v.is_array()) {  // ¬(a ∧ b) = ¬a ∨ ¬b
      for (size_t i = 0; i < v.array().size(); ++i) {
        LLM_ASSIGN_OR_RETURN(Json n, Negate(v.array()[i], PointerJoin(PointerJoin(ptr, "allOf"), i), depth + 1));
        alts.push_back(std::move(n));
      }
    } else if (k == "anyOf" && v.is_array()) {  // ¬(a ∨ b) = ¬a ∧ ¬b
      std::vector<Json> each;
      for (size_t i = 0; i < v.array().size(); ++i) {
        LLM_ASSIGN_OR_RETURN(Json n, Negate(v.array()[i], PointerJoin(PointerJoin(ptr, "anyOf"), i), depth + 1));
        each.push_back(std::move(n));
      }
      alts.push_back(each.size() == 1 ? each[0] : Json::Object({{"allOf", Json::Array(std::move(each))}}));
    } else if (k == "properties" && v.is_object()) {
      for (const auto& [name, sub] : v.object()) {
        LLM_ASSIGN_OR_RETURN(Json ns, Negate(sub, PointerJoin(PointerJoin(ptr, "properties"), name), depth + 1));
        if (ns.is_bool() && !ns.as_bool()) continue;  // S always holds for p: no way to fail it
        alts.push_back(Json::Object({{"type", Json::String("object")},
                                     {"properties", Json::Object({{name, ns}})},
                                     {"required", Json::Array({Json::String(name)})},
                                     {"additionalProperties", Json::Bool(true)},
                                     {kNoAnnotations, Json::Bool(true)}}));
      }
    } else {
      return refuse(k);
    }
  }
  if (alts.empty()) return Json::Bool(false);  // {} (annotations only) holds for everything
  return AnyOf(std::move(alts));
}

StatusOr<Json> Compiler::Conditionals(const Json& s, const std::string& ptr) {
  // A negation names properties (to forbid or contradict them) that a
  // validator does not count as evaluated: its objects carry
  // kNoAnnotations, so unevaluated* beside it still reach them.
  std::vector<Json::Member> rest;
  for (const auto& m : s.object())
    if (m.first != "not" && m.first != "if" && m.first != "then" && m.first != "else") rest.push_back(m);
  std::vector<Json> parts;
  if (const Json* n = s.Find("not")) {
    LLM_ASSIGN_OR_RETURN(Json nn, Negate(*n, PointerJoin(ptr, "not"), 0));
    parts.push_back(std::move(nn));
  }
  const Json* cond = s.Find("if");
  const Json* then = s.Find("then");
  const Json* els = s.Find("else");
  if (cond && (then || els)) {
    static const Json kTrue = Json::Bool(true);
    LLM_ASSIGN_OR_RETURN(Json neg, Negate(*cond, PointerJoin(ptr, "if"), 0));
    std::vector<Json> yes = {*cond, then ? *then : kTrue}, no = {std::move(neg), els ? *els : kTrue};
    parts.push_back(Json::Object({{"anyOf", Json::Array({Json::Object({{"allOf", Json::Array(std::move(yes))}}),
                                                         Json::Object({{"allOf", Json::Array(std::move(no))}})})}}));
  }
  if (parts.empty()) return Json::Object(std::move(rest));
  return WithAllOf(Json::Object(std::move(rest)), std::move(parts));
}

}  // namespace llm::schema
