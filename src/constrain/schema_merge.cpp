// allOf merging and dependency case splits for the JSON Schema compiler
// (schema_compiler.h): schemas rewritten into schemas the rest of the
// compiler reads (Visit calls these, then visits what they return).
#include <algorithm>
#include <cmath>
#include <numeric>
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
  if (k == "multipleOf" && a.is_number() && b.is_number() && a.as_double() > 0 && b.as_double() > 0) {
    // Both hold: their least common multiple (integers), or the one the
    // other divides.
    if (a.is_int() && b.is_int()) {
      const int64_t l = std::lcm(a.as_int(), b.as_int());
      if (l > 0 && l <= (int64_t{1} << 50)) return Json::Int(l);
    }
    auto divides = [](double x, double y) { const double r = y / x; return std::fabs(r - std::round(r)) < 1e-12 * std::max(1.0, r); };
    if (divides(a.as_double(), b.as_double())) return b;
    if (divides(b.as_double(), a.as_double())) return a;
    return std::nullopt;
  }
  if (k == kNotStrings && a.is_array() && b.is_array()) {  // none of either list
    std::vector<Json> both = a.array();
    for (const Json& v : b.array()) both.push_back(v);
    return Json::Array(std::move(both));
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

namespace {

// What one allOf part says about object members and array items, kept
// apart from its other keywords: these do not merge keyword by keyword,
// because additionalProperties (items past a tuple) applies to the names
// (positions) its own schema does not evaluate.
struct Part {
  int parent = -1;                  // the part whose $ref/allOf brought it (-1: the schema itself)
  std::vector<Json::Member> props;  // properties
  const Json* additional = nullptr; // additionalProperties
  const Json* unevaluated_props = nullptr;  // unevaluatedProperties (a branch's)
  const Json* tuple = nullptr;      // prefixItems, or draft-07 items as an array
  const Json* tail = nullptr;       // items past the tuple (items, or additionalItems beside an items array)
  const Json* unevaluated_items = nullptr;  // unevaluatedItems (a branch's)
  bool patterns = false;            // patternProperties
  bool quiet = false;               // kNoAnnotations here or above: lists no evaluated names
  bool varies = false;              // anyOf/oneOf/not/if/dependent*/contains: what it evaluates depends on the value
};

bool IsTrue(const Json* j) { return j && j->is_bool() && j->as_bool(); }

Json AllOfOf(std::vector<Json> schemas) {
  std::erase_if(schemas, [](const Json& j) { return j.is_bool() && j.as_bool(); });
  if (schemas.empty()) return Json::Bool(true);
  if (schemas.size() == 1) return std::move(schemas[0]);
  return Json::Object({{"allOf", Json::Array(std::move(schemas))}});
}

}  // namespace

// allOf as one schema: branches (and the schema around them) merged
// keyword by keyword, $refs resolved, nested allOf flattened; a keyword
// given twice keeps the tighter bound, the common types or enum values,
// or both schemas (allOf of the two); what cannot be merged exactly is
// refused naming the keyword.
//
// Members and items are merged by what each part evaluates. A part's
// additionalProperties A applies to the names its own properties do not
// list, so a name n listed by other parts gets allOf [their schemas, A],
// and names no part lists get allOf of every A. A branch's
// unevaluatedProperties is the same with the names its own subtree (its
// $ref and allOf parts) lists; the schema's own unevaluatedProperties
// stays, and Visit reads it once everything is merged. Items alike: a
// position gets the tuple schemas of the parts whose tuples reach it and
// the tails (items, or a branch's unevaluatedItems) of those whose do not.
StatusOr<Json> Compiler::MergeAllOf(const Json& s, const std::string& ptr) {
  const Json* all = s.Find("allOf");
  if (!all->is_array() || all->array().empty())
    return InvalidArgument("allOf at " + Where(ptr) + " must be a non-empty array");
  std::vector<Json::Member> merged;
  std::vector<std::string> required;
  std::vector<Part> parts;
  bool none = false;
  auto add = [&](const Json& part, const std::string& where, Part* info) -> Status {
    const bool branch = info->parent >= 0;
    for (const auto& member : part.object()) {
      const std::string& k = member.first;  // (a named reference: lambdas below capture it)
      const Json& v = member.second;
      if (k == "allOf" || k == "$ref" || IsAnnotation(k)) continue;
      if (k == "properties") {
        if (!v.is_object()) return InvalidArgument("properties at " + Where(where) + " must be an object");
        info->props = v.object();
        continue;
      }
      if (k == "additionalProperties") {
        info->additional = &v;
        continue;
      }
      if (k == "prefixItems" || (k == "items" && v.is_array())) {
        if (!v.is_array()) return InvalidArgument(k + " at " + Where(where) + " must be an array");
        if (info->tuple) return InvalidArgument("items at " + Where(where) + " is an array beside prefixItems");
        info->tuple = &v;
        continue;
      }
      if (k == "items") {
        info->tail = &v;
        continue;
      }
      if (k == "additionalItems") continue;  // (read below: it counts only beside an items array)
      if (branch && k == "unevaluatedProperties") {
        info->unevaluated_props = &v;
        continue;
      }
      if (branch && k == "unevaluatedItems") {
        info->unevaluated_items = &v;
        continue;
      }
      if (k == "patternProperties") info->patterns = true;
      if (k == "anyOf" || k == "oneOf" || k == "not" || k == "if" || k == "then" || k == "else" ||
          k == "dependentSchemas" || k == "dependentRequired" || k == "dependencies" || k == "contains")
        info->varies = true;
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
    if (const Json* it = part.Find("items"); it && it->is_array()) {  // draft-07 tuple: additionalItems, or any items, after it
      static const Json kTrue = Json::Bool(true);
      const Json* ai = part.Find("additionalItems");
      info->tail = ai ? ai : &kTrue;
    }
    return Status::Ok();
  };
  // The parts: the schema itself, then each branch; a branch's own $ref
  // and allOf are parts too (flattened, bounded), right after it, so
  // properties keep their order.
  struct Todo {
    const Json* schema;
    std::string where;
    int parent;
  };
  std::vector<Todo> todo = {{&s, ptr, -1}};
  for (size_t n = 0; n < todo.size(); ++n) {
    if (n > 256) return InvalidArgument("allOf at " + Where(ptr) + ": more than 256 schemas to merge (the limit)");
    const Json* part = todo[n].schema;
    const std::string where = todo[n].where;
    const int id = static_cast<int>(parts.size());
    parts.push_back(Part{});
    parts.back().parent = todo[n].parent;
    parts.back().quiet = (todo[n].parent >= 0 && parts[static_cast<size_t>(todo[n].parent)].quiet) ||
                         (part->is_object() && part->Find(kNoAnnotations));
    if (part->is_bool()) {
      if (!part->as_bool()) return Json::Bool(false);  // nothing validates
      continue;
    }
    if (!part->is_object()) return InvalidArgument("the schema at " + Where(where) + " must be an object or a boolean");
    std::vector<Todo> children;
    if (const Json* r = part->Find("$ref")) {
      if (!r->is_string()) return InvalidArgument("$ref at " + Where(where) + " must be a string");
      LLM_ASSIGN_OR_RETURN(const std::string c, Canonical(r->as_string(), where));
      if (recursive_.count(c)) return Unsupported("allOf at " + Where(where) + ": a recursive $ref cannot be merged");
      LLM_ASSIGN_OR_RETURN(const Json* target, ResolvePointer(c, where));
      children.push_back({target, c.substr(1), id});
    }
    if (const Json* sub = part->Find("allOf"); sub && n > 0) {
      if (!sub->is_array()) return InvalidArgument("allOf at " + Where(where) + " must be an array");
      for (size_t i = 0; i < sub->array().size(); ++i)
        children.push_back({&sub->array()[i], PointerJoin(PointerJoin(where, "allOf"), i), id});
    }
    todo.insert(todo.begin() + static_cast<std::ptrdiff_t>(n) + 1, children.begin(), children.end());
    if (n == 0)
      for (size_t i = 0; i < all->array().size(); ++i) todo.push_back({&all->array()[i], PointerJoin(PointerJoin(ptr, "allOf"), i), 0});
    LLM_RETURN_IF_ERROR(add(*part, where, &parts.back()));
  }
  if (none) return Json::Bool(false);
  auto within = [&](size_t q, size_t p) {  // part q is p or lies in p's subtree
    for (int a = static_cast<int>(q); a >= 0; a = parts[static_cast<size_t>(a)].parent)
      if (a == static_cast<int>(p)) return true;
    return false;
  };

  // ---- members. (names evaluated, schema of the others) per part.
  struct Closed {
    std::vector<std::string> names;
    Json schema;
    bool quiet;
  };
  std::vector<Closed> closed;
  bool any_patterns = false;
  for (const Part& p : parts) any_patterns = any_patterns || p.patterns;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    Closed c;
    c.quiet = part.quiet;
    if (part.additional) {
      for (const auto& m : part.props) c.names.push_back(m.first);
      c.schema = *part.additional;
    } else if (part.unevaluated_props) {
      // What the branch's subtree evaluates: its properties, or every name
      // once some part in it has additionalProperties or its own
      // unevaluatedProperties.
      bool everything = false;
      for (size_t q = p; q < parts.size(); ++q) {
        if (!within(q, p)) continue;
        if (parts[q].varies || parts[q].patterns)
          return Unsupported("unevaluatedProperties at " + Where(PointerJoin(todo[p].where, "unevaluatedProperties")) +
                             " inside an allOf/$ref branch beside anyOf/oneOf/not/if/dependentSchemas/patternProperties"
                             " (what they evaluate varies) is not supported");
        if (parts[q].quiet && !part.quiet) continue;
        everything = everything || parts[q].additional || (q != p && parts[q].unevaluated_props);
        for (const auto& m : parts[q].props) c.names.push_back(m.first);
      }
      if (everything) continue;
      c.schema = *part.unevaluated_props;
    } else {
      continue;
    }
    // patternProperties apply beside additionalProperties only in their
    // own schema: exact when that part is the only one naming members.
    bool alone = part.additional != nullptr;
    for (size_t q = 0; q < parts.size(); ++q) alone = alone && (q == p || (parts[q].props.empty() && !parts[q].patterns));
    if (any_patterns && !IsTrue(&c.schema) && !alone)
      return Unsupported("allOf at " + Where(ptr) + ": additionalProperties/unevaluatedProperties beside " +
                         "patternProperties from several branches is not supported");
    closed.push_back(std::move(c));
  }
  std::vector<Json::Member> properties;
  for (const Part& p : parts) {
    for (const auto& m : p.props) {
      auto same = std::find_if(properties.begin(), properties.end(), [&](const Json::Member& q) { return q.first == m.first; });
      if (same == properties.end()) {
        properties.push_back(m);
        continue;
      }
      auto a = gbnf::JsonDump(same->second), b = gbnf::JsonDump(m.second);
      if (!a.ok() || !b.ok() || *a != *b) same->second = Json::Object({{"allOf", Json::Array({same->second, m.second})}});
    }
  }
  // The schema's own unevaluatedProperties (Visit reads it once merged)
  // applies as well to the names only quiet parts list.
  const Json* own_unevaluated = s.Find("unevaluatedProperties");
  if (std::any_of(closed.begin(), closed.end(), [](const Closed& c) { return !c.quiet; })) own_unevaluated = nullptr;
  for (auto& member : properties) {
    const std::string& name = member.first;  // (not a structured binding: lambdas capture it, clang 14)
    Json& schema = member.second;
    std::vector<Json> both = {schema};
    for (const Closed& c : closed)
      if (std::find(c.names.begin(), c.names.end(), name) == c.names.end()) both.push_back(c.schema);
    if (own_unevaluated &&
        std::none_of(parts.begin(), parts.end(), [&](const Part& p) {
          return !p.quiet && std::any_of(p.props.begin(), p.props.end(), [&](const Json::Member& m) { return m.first == name; });
        }))
      both.push_back(*own_unevaluated);
    schema = both.size() == 1 ? both[0] : AllOfOf(std::move(both));
  }
  if (!closed.empty()) {
    std::vector<Json> rest;
    for (const Closed& c : closed) rest.push_back(c.schema);
    if (own_unevaluated) rest.push_back(*own_unevaluated);
    merged.emplace_back("additionalProperties", AllOfOf(std::move(rest)));
  }

  // ---- items. Each part as (tuple, tail); a branch's unevaluatedItems is
  // a tail past the longest tuple of its subtree.
  struct Items {
    std::vector<Json> tuple;
    const Json* tail;
    bool quiet;
  };
  std::vector<Items> items;
  bool any_tuple = false;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    if (part.tuple || part.tail) {
      items.push_back({part.tuple ? part.tuple->array() : std::vector<Json>{}, part.tail, part.quiet});
      any_tuple = any_tuple || part.tuple;
    }
    if (!part.unevaluated_items) continue;
    size_t evaluated = 0;
    bool everything = false;
    for (size_t q = p; q < parts.size(); ++q) {
      if (!within(q, p)) continue;
      if (parts[q].quiet && !part.quiet) continue;
      if (parts[q].varies)
        return Unsupported("unevaluatedItems at " + Where(PointerJoin(todo[p].where, "unevaluatedItems")) +
                           " inside an allOf/$ref branch beside anyOf/oneOf/not/if/contains (what they evaluate varies)"
                           " is not supported");
      everything = everything || parts[q].tail || (q != p && parts[q].unevaluated_items);
      if (parts[q].tuple) evaluated = std::max(evaluated, parts[q].tuple->array().size());
    }
    if (everything) continue;
    items.push_back({std::vector<Json>(evaluated, Json::Bool(true)), part.unevaluated_items, part.quiet});
    any_tuple = any_tuple || evaluated > 0;
  }
  if (!items.empty()) {
    size_t length = 0, evaluated = 0;
    const Json* own_unevaluated_items = s.Find("unevaluatedItems");
    for (const Items& it : items) {
      length = std::max(length, it.tuple.size());
      if (!it.quiet) evaluated = std::max(evaluated, it.tuple.size());
      if (!it.quiet && it.tail) own_unevaluated_items = nullptr;  // every position evaluated
    }
    std::vector<Json> tuple;
    for (size_t i = 0; i < length; ++i) {
      std::vector<Json> at;
      for (const Items& it : items) {
        if (i < it.tuple.size()) at.push_back(it.tuple[i]);
        else if (it.tail) at.push_back(*it.tail);
      }
      if (own_unevaluated_items && i >= evaluated) at.push_back(*own_unevaluated_items);
      tuple.push_back(AllOfOf(std::move(at)));
    }
    std::vector<Json> tails;
    bool has_tail = false;
    for (const Items& it : items)
      if (it.tail) {
        tails.push_back(*it.tail);
        has_tail = true;
      }
    if (has_tail && own_unevaluated_items) tails.push_back(*own_unevaluated_items);
    if (any_tuple) merged.emplace_back("prefixItems", Json::Array(std::move(tuple)));
    if (has_tail) merged.emplace_back("items", AllOfOf(std::move(tails)));
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
  // (Not beside unevaluatedProperties, which it would make moot: that one
  // becomes additionalProperties once the cases are merged.)
  if (!s.Find("properties") && !s.Find("additionalProperties") && !s.Find("patternProperties") &&
      !s.Find("unevaluatedProperties"))
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
