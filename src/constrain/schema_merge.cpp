// allOf merging and dependency case splits for the JSON Schema compiler
// (schema_compiler.h): schemas rewritten into schemas the rest of the
// compiler reads (Visit calls these, then visits what they return).
#include <algorithm>
#include <optional>

#include "constrain/grammar_text.h"
#include "constrain/schema_compiler.h"

namespace llm::schema {

Json WithAllOf(const Json& s, std::vector<Json> parts) {
  std::vector<Json::Member> out;
  std::vector<Json> all;
  for (const auto& m : s.object()) {
    if (m.first == "allOf" && m.second.is_array()) all = m.second.array();
    else out.push_back(m);
  }
  for (auto& p : parts) all.push_back(std::move(p));
  out.emplace_back("allOf", Json::Array(std::move(all)));
  return Json::Object(std::move(out));
}

namespace {

// Two values of one keyword from different allOf branches, as one value
// that means both (nullopt: not merged here). *none: no value satisfies both.
std::optional<Json> MergeKeyword(const std::string& k, const Json& a, const Json& b, bool* none) {
  auto same = [](const Json& x, const Json& y) {
    auto p = gbnf::JsonDump(x), q = gbnf::JsonDump(y);
    return p.ok() && q.ok() && *p == *q;
  };
  if (same(a, b)) return a;
  static const char* const kLower[] = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"};
  static const char* const kUpper[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"};
  if (a.is_number() && b.is_number()) {
    for (const char* l : kLower)
      if (k == l) return a.as_double() >= b.as_double() ? a : b;
    for (const char* u : kUpper)
      if (k == u) return a.as_double() <= b.as_double() ? a : b;
  }
  if (k == "type") {
    auto list = [](const Json& t) {
      std::vector<std::string> out;
      if (t.is_string()) out.push_back(t.as_string());
      for (const auto& e : t.array()) out.push_back(e.as_string());
      return out;
    };
    const auto x = list(a), y = list(b);
    std::vector<Json> both;
    for (const auto& t : x) {
      for (const auto& u : y) {
        std::string m;
        if (t == u) m = t;
        else if ((t == "integer" && u == "number") || (t == "number" && u == "integer")) m = "integer";
        if (!m.empty() && std::none_of(both.begin(), both.end(), [&](const Json& j) { return j.as_string() == m; }))
          both.push_back(Json::String(m));
      }
    }
    if (both.empty()) *none = true;
    return Json::Array(std::move(both));
  }
  if (k == "enum" && a.is_array() && b.is_array()) {
    std::vector<Json> both;
    for (const auto& v : a.array())
      if (std::any_of(b.array().begin(), b.array().end(), [&](const Json& w) { return same(v, w); })) both.push_back(v);
    if (both.empty()) *none = true;
    return Json::Array(std::move(both));
  }
  if (k == "const" || k == "format") {  // two different values
    if (k == "const") *none = true;
    return k == "const" ? std::optional<Json>(a) : std::nullopt;
  }
  // Keywords whose value is a schema: both schemas hold.
  static const char* const kSchemas[] = {"items", "contains", "propertyNames", "additionalItems"};
  for (const char* sk : kSchemas)
    if (k == sk && !a.is_array() && !b.is_array()) return Json::Object({{"allOf", Json::Array({a, b})}});
  if (k == "required") return std::nullopt;  // (merged by the caller)
  return std::nullopt;
}

}  // namespace

// allOf as one schema: branches (and the schema around them) merged
// keyword by keyword, $refs resolved, nested allOf flattened; a keyword
// given twice keeps the tighter bound, the common types or enum values,
// or both schemas (properties, items: allOf of the two); what cannot be
// merged exactly is refused naming the keyword.
StatusOr<Json> Compiler::MergeAllOf(const Json& s, const std::string& ptr) {
  const Json* all = s.Find("allOf");
  if (!all->is_array() || all->array().empty())
    return InvalidArgument("allOf at " + Where(ptr) + " must be a non-empty array");
  std::vector<Json::Member> merged;
  std::vector<std::string> required;
  std::vector<Json::Member> properties;
  // additionalProperties applies to every name its own schema's properties
  // do not list, and items to every position its own prefixItems do not
  // cover: which part brought them decides whether a merge is exact.
  std::vector<size_t> closed_parts, property_parts, items_parts, prefix_parts;
  bool none = false;
  size_t part_index = 0;
  auto add = [&](const Json& part, const std::string& where) -> Status {
    // A branch whose properties only forbid names (false) does not change
    // what another branch's additionalProperties forbids.
    if (const Json* pr = part.Find("properties"); pr && pr->is_object() &&
        std::any_of(pr->object().begin(), pr->object().end(), [](const Json::Member& m) { return !(m.second.is_bool() && !m.second.as_bool()); }))
      property_parts.push_back(part_index);
    if (const Json* ap = part.Find("additionalProperties"); ap && !(ap->is_bool() && ap->as_bool())) closed_parts.push_back(part_index);
    if (const Json* it = part.Find("items"); it && !(it->is_bool() && it->as_bool())) items_parts.push_back(part_index);
    if (part.Find("prefixItems")) prefix_parts.push_back(part_index);
    // unevaluatedProperties/Items see what their own schema evaluates: in a
    // branch, merging would let the other branches' properties escape them.
    for (const char* u : {"unevaluatedProperties", "unevaluatedItems"})
      if (part_index > 0 && part.Find(u))
        return Unsupported(std::string(u) + " at " + Where(PointerJoin(where, u)) + " inside an allOf/$ref branch is not supported");
    for (const auto& member : part.object()) {
      const std::string& k = member.first;  // (a named reference: lambdas below capture it)
      const Json& v = member.second;
      if (k == "allOf" || k == "$ref" || IsAnnotation(k)) continue;
      if (k == "properties") {
        if (!v.is_object()) return InvalidArgument("properties at " + Where(where) + " must be an object");
        for (const auto& m : v.object()) {
          auto same = std::find_if(properties.begin(), properties.end(), [&](const Json::Member& p) { return p.first == m.first; });
          if (same == properties.end()) {
            properties.push_back(m);
            continue;
          }
          auto a = gbnf::JsonDump(same->second), b = gbnf::JsonDump(m.second);
          if (!a.ok() || !b.ok() || *a != *b) same->second = Json::Object({{"allOf", Json::Array({same->second, m.second})}});
        }
        continue;
      }
      if (k == "required") {
        if (!v.is_array()) return InvalidArgument("required at " + Where(where) + " must be an array");
        for (const auto& r : v.array())
          if (r.is_string() && std::find(required.begin(), required.end(), r.as_string()) == required.end())
            required.push_back(r.as_string());
        continue;
      }
      auto same = std::find_if(merged.begin(), merged.end(), [&](const Json::Member& m) { return m.first == k; });
      if (same == merged.end()) {
        merged.emplace_back(k, v);
        continue;
      }
      auto both = MergeKeyword(k, same->second, v, &none);
      if (!both) return Unsupported("allOf at " + Where(ptr) + ": \"" + k + "\" differs between branches and cannot be merged");
      same->second = std::move(*both);
    }
    return Status::Ok();
  };
  // The parts: the schema itself, then each branch; a branch's own $ref
  // and allOf are parts too (flattened, bounded).
  std::vector<std::pair<const Json*, std::string>> todo = {{&s, ptr}};
  for (size_t n = 0; n < todo.size(); ++n) {
    if (n > 256) return InvalidArgument("allOf at " + Where(ptr) + ": more than 256 schemas to merge (the limit)");
    const Json* part = todo[n].first;
    const std::string where = todo[n].second;
    if (part->is_bool()) {
      if (!part->as_bool()) return Json::Bool(false);  // nothing validates
      continue;
    }
    if (!part->is_object()) return InvalidArgument("the schema at " + Where(where) + " must be an object or a boolean");
    if (const Json* r = part->Find("$ref")) {
      if (!r->is_string()) return InvalidArgument("$ref at " + Where(where) + " must be a string");
      LLM_ASSIGN_OR_RETURN(const std::string c, Canonical(r->as_string(), where));
      if (recursive_.count(c)) return Unsupported("allOf at " + Where(where) + ": a recursive $ref cannot be merged");
      LLM_ASSIGN_OR_RETURN(const Json* target, ResolvePointer(c, where));
      todo.insert(todo.begin() + static_cast<std::ptrdiff_t>(n) + 1, {target, c.substr(1)});
    }
    if (const Json* sub = part->Find("allOf"); sub && n > 0) {  // (right after the part: properties keep their order)
      if (!sub->is_array()) return InvalidArgument("allOf at " + Where(where) + " must be an array");
      for (size_t i = sub->array().size(); i-- > 0;)
        todo.insert(todo.begin() + static_cast<std::ptrdiff_t>(n) + 1, {&sub->array()[i], PointerJoin(PointerJoin(where, "allOf"), i)});
    }
    if (n == 0)
      for (size_t i = 0; i < all->array().size(); ++i) todo.emplace_back(&all->array()[i], PointerJoin(PointerJoin(ptr, "allOf"), i));
    part_index = n;
    LLM_RETURN_IF_ERROR(add(*part, where));
  }
  if (none) return Json::Bool(false);
  // additionalProperties sees only its own schema's properties: merged with
  // another branch's properties it would stop applying to them.
  for (size_t c : closed_parts)
    for (size_t q : property_parts)
      if (q != c || closed_parts.size() > 1)
        return Unsupported("allOf at " + Where(ptr) + ": additionalProperties with properties from several branches");
  // items beside another branch's prefixItems: the tuple positions must
  // satisfy items too (items then applies past the tuple as before).
  for (size_t i : items_parts) {
    for (size_t q : prefix_parts) {
      if (q == i) continue;
      if (items_parts.size() > 1 || prefix_parts.size() > 1)
        return Unsupported("allOf at " + Where(ptr) + ": items and prefixItems from several branches");
      auto it = std::find_if(merged.begin(), merged.end(), [](const Json::Member& m) { return m.first == "items"; });
      auto pf = std::find_if(merged.begin(), merged.end(), [](const Json::Member& m) { return m.first == "prefixItems"; });
      if (it == merged.end() || pf == merged.end() || !pf->second.is_array() || it->second.is_array())
        return Unsupported("allOf at " + Where(ptr) + ": items and prefixItems from several branches");
      std::vector<Json> both;
      for (const Json& p : pf->second.array()) both.push_back(Json::Object({{"allOf", Json::Array({p, it->second})}}));
      pf->second = Json::Array(std::move(both));
    }
  }
  if (!properties.empty()) merged.emplace_back("properties", Json::Object(std::move(properties)));
  if (!required.empty()) {
    std::vector<Json> r;
    for (auto& name : required) r.push_back(Json::String(name));
    merged.emplace_back("required", Json::Array(std::move(r)));
  }
  return Json::Object(std::move(merged));
}

// dependentRequired / dependentSchemas (draft-07's dependencies: an array
// is the first, a schema the second) as a case split on the first
// trigger property t (the rest stay for the next level):
//   anyOf [ allOf [rest, {properties: {t: false}}],                 t absent
//           allOf [rest, {required: [t, ...names]}, schema] ]      t present
// The two cases are disjoint, each exact; at most kMaxTriggers triggers
// (2^k object variants).
StatusOr<Json> Compiler::SplitDependencies(const Json& s, const std::string& ptr) {
  constexpr size_t kMaxTriggers = 4;
  size_t n_triggers = 0;
  std::string kw;
  const Json* first = nullptr;
  std::string trigger;
  for (const char* k : {"dependentRequired", "dependentSchemas", "dependencies"}) {
    const Json* d = s.Find(k);
    if (!d) continue;
    if (!d->is_object()) return InvalidArgument(std::string(k) + " at " + Where(ptr) + " must be an object");
    n_triggers += d->size();
    if (!first && d->size() > 0) {
      first = &d->object()[0].second;
      trigger = d->object()[0].first;
      kw = k;
    }
  }
  if (n_triggers > kMaxTriggers)
    return InvalidArgument("dependentRequired/dependentSchemas/dependencies at " + Where(ptr) + ": more than " +
                       std::to_string(kMaxTriggers) + " trigger properties (each doubles the object's grammar)");
  // The schema without the first trigger (and without empty keywords).
  std::vector<Json::Member> rest;
  for (const auto& m : s.object()) {
    if (m.first != kw) {
      if ((m.first == "dependentRequired" || m.first == "dependentSchemas" || m.first == "dependencies") && m.second.size() == 0) continue;
      rest.push_back(m);
      continue;
    }
    std::vector<Json::Member> left(m.second.object().begin() + 1, m.second.object().end());
    if (!left.empty()) rest.emplace_back(m.first, Json::Object(std::move(left)));
  }
  // Free keys stay free in both cases: the compiler reads an absent
  // additionalProperties as false once properties are named (json_schema.h),
  // and the split names the trigger.
  if (!s.Find("properties") && !s.Find("additionalProperties") && !s.Find("patternProperties"))
    rest.emplace_back("additionalProperties", Json::Bool(true));
  Json base = Json::Object(std::move(rest));
  if (!first) return base;
  const std::string where = PointerJoin(PointerJoin(ptr, kw), trigger);
  std::vector<Json> present = {base};
  std::vector<Json> names = {Json::String(trigger)};
  const bool as_names = kw == "dependentRequired" || (kw == "dependencies" && first->is_array());
  if (as_names) {
    if (!first->is_array()) return InvalidArgument(kw + " at " + Where(where) + " must be an array of names");
    for (const auto& n : first->array()) {
      if (!n.is_string()) return InvalidArgument(kw + " at " + Where(where) + " must be an array of names");
      names.push_back(n);
    }
  } else {
    present.push_back(*first);
  }
  present.push_back(Json::Object({{"required", Json::Array(std::move(names))}}));
  present.erase(present.begin());
  Json absent = WithAllOf(base, {Json::Object({{"properties", Json::Object({{trigger, Json::Bool(false)}})}})});
  return Json::Object({{"anyOf", Json::Array({std::move(absent), WithAllOf(base, std::move(present))})}});
}

}  // namespace llm::schema
