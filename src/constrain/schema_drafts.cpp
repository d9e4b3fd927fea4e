// Draft-specific reading of a JSON Schema document (schema_drafts.h).
#include "constrain/schema_drafts.h"

#include "constrain/schema_compiler.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace llm::schema {
namespace {

// The validating keywords a draft does not have (so, in a document of that
// draft, annotations). The compiler's full list is IsAnnotation's.
bool Unknown(Draft d, std::string_view k) {
  static const char* const k04[] = {"const", "contains", "minContains", "maxContains", "propertyNames",
                                    "dependentRequired", "dependentSchemas", "prefixItems", "unevaluatedItems",
                                    "unevaluatedProperties", "if", "then", "else", "$dynamicRef", "$recursiveRef",
                                    "$anchor", "$dynamicAnchor", "$recursiveAnchor"};
  static const char* const k06[] = {"minContains", "maxContains", "dependentRequired", "dependentSchemas",
                                    "prefixItems", "unevaluatedItems", "unevaluatedProperties", "if", "then",
                                    "else", "$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor",
                                    "$recursiveAnchor"};
  static const char* const k07[] = {"minContains", "maxContains", "dependentRequired", "dependentSchemas",
                                    "prefixItems", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef",
                                    "$recursiveRef", "$anchor", "$dynamicAnchor", "$recursiveAnchor"};
  static const char* const k2019[] = {"dependencies", "prefixItems", "$dynamicRef", "$dynamicAnchor"};
  static const char* const k2020[] = {"dependencies", "$recursiveRef", "$recursiveAnchor"};
  auto in = [&](const auto& list) { return std::any_of(std::begin(list), std::end(list), [&](const char* x) { return k == x; }); };
  switch (d) {
    case Draft::k04: return in(k04);
    case Draft::k06: return in(k06);
    case Draft::k07: return in(k07);
    case Draft::k2019: return in(k2019);
    case Draft::k2020: return in(k2020);
    case Draft::kUnspecified: return false;
  }
  return false;
}

// Keywords whose value is a schema, an array of schemas, or a map of them
// (in any draft): where ReadAsDraft looks for more schemas.
enum class Holds { kNone, kSchema, kSchemas, kMap };
Holds HoldsOf(std::string_view k, const Json& v) {
  static const char* const kOne[] = {"additionalProperties", "additionalItems", "contains", "propertyNames", "not",
                                     "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"};
  static const char* const kMany[] = {"allOf", "anyOf", "oneOf", "prefixItems"};
  static const char* const kMaps[] = {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas",
                                      "dependencies"};
  auto in = [&](const auto& list) { return std::any_of(std::begin(list), std::end(list), [&](const char* x) { return k == x; }); };
  if (k == "items") return v.is_array() ? Holds::kSchemas : Holds::kSchema;
  if (in(kOne)) return Holds::kSchema;
  if (in(kMany) && v.is_array()) return Holds::kSchemas;
  if (in(kMaps) && v.is_object()) return Holds::kMap;
  return Holds::kNone;
}

bool IsValidating(std::string_view k) { return !IsAnnotation(k); }

struct Reader {
  Draft draft;
  int depth = 0;

  // `s` at a schema position; `recursive_resource`: the resource it is in
  // has "$recursiveAnchor": true (2019-09).
  Json Schema(const Json& s, bool recursive_resource) {
    if (!s.is_object() || depth > 160) return s;
    ++depth;
    // A new resource ($id; draft-04 id) starts a new "$recursiveAnchor" scope.
    const Json* id = s.Find(draft == Draft::k04 ? "id" : "$id");
    const Json* ra = s.Find("$recursiveAnchor");
    const bool reads_recursive = draft == Draft::k2019 || draft == Draft::kUnspecified;
    if (id && id->is_string() && !id->as_string().empty() && id->as_string()[0] != '#')
      recursive_resource = false;
    if (reads_recursive && ra && ra->is_bool()) recursive_resource = ra->as_bool() || (recursive_resource && !id);
    const bool legacy_ref = (draft == Draft::k04 || draft == Draft::k06 || draft == Draft::k07) && s.Find("$ref");
    const Json* items = s.Find("items");
    std::vector<Json::Member> out;
    for (const auto& [k, v] : s.object()) {
      std::string key = k;
      bool ignored = Unknown(draft, k);
      if (k == "additionalItems" && draft == Draft::k2020 && !(items && items->is_array())) ignored = true;
      if (legacy_ref && k != "$ref" && (IsValidating(k) || k == "$id" || k == "id")) ignored = true;
      if (k == "$id" && draft == Draft::k04) ignored = true;
      if (k == "id" && v.is_string() && draft != Draft::k04 && draft != Draft::kUnspecified) ignored = true;
      if (k == "id" && v.is_string() && draft == Draft::k04 && !ignored) key = "$id";
      if (ignored) key = kIgnoredPrefix + k;
      Json value = Value(k, v, recursive_resource);
      if (!ignored && reads_recursive && k == "$recursiveRef") {
        // "#" (the only value 2019-09 gives it): the resource's root, or,
        // where that root has "$recursiveAnchor": true, the outermost
        // resource of the dynamic scope that has one (DynamicTarget).
        if (recursive_resource) {
          out.emplace_back("$dynamicRef", Json::String(std::string("#") + kRecursiveAnchor));
        } else if (!s.Find("$ref")) {
          out.emplace_back("$ref", v);
        } else {
          out.emplace_back("allOf", Json::Array({Json::Object({{"$ref", v}})}));
        }
        continue;
      }
      if (!ignored && reads_recursive && k == "$recursiveAnchor") {
        if (v.as_bool()) out.emplace_back("$dynamicAnchor", Json::String(kRecursiveAnchor));
        out.emplace_back(kIgnoredPrefix + k, v);
        continue;
      }
      out.emplace_back(std::move(key), std::move(value));
    }
    // Array-form "items" (every draft before 2020-12) is 2020-12's
    // prefixItems, and "additionalItems" beside it is "items"; the originals
    // stay under ignored names for pointers into them.
    if (items && items->is_array() && !s.Find("prefixItems")) {
      std::vector<Json::Member> moved;
      for (auto& m : out) {
        if (m.first == "items") {
          moved.emplace_back(kIgnoredPrefix + m.first, m.second);
          m.first = "prefixItems";
        } else if (m.first == "additionalItems") {
          moved.emplace_back(kIgnoredPrefix + m.first, m.second);
          m.first = "items";
        }
      }
      for (auto& m : moved) out.push_back(std::move(m));
    }
    --depth;
    return Json::Object(std::move(out));
  }

  Json Value(std::string_view k, const Json& v, bool recursive_resource) {
    switch (HoldsOf(k, v)) {
      case Holds::kSchema:
        return Schema(v, recursive_resource);
      case Holds::kSchemas: {
        std::vector<Json> a;
        for (const Json& e : v.array()) a.push_back(Schema(e, recursive_resource));
        return Json::Array(std::move(a));
      }
      case Holds::kMap: {
        std::vector<Json::Member> m;
        for (const auto& [name, e] : v.object()) m.emplace_back(name, Schema(e, recursive_resource));
        return Json::Object(std::move(m));
      }
      case Holds::kNone:
        break;
    }
    return v;
  }
};

}  // namespace

StatusOr<Draft> DraftOf(const Json& root) {
  const Json* s = root.is_object() ? root.Find("$schema") : nullptr;
  if (!s) return Draft::kUnspecified;
  if (!s->is_string()) return InvalidArgument("$schema at (root) must be a string");
  const std::string& u = s->as_string();
  auto has = [&](const char* part) { return u.find(part) != std::string::npos; };
  if (has("json-schema.org")) {
    if (has("draft-04")) return Draft::k04;
    if (has("draft-06")) return Draft::k06;
    if (has("draft-07")) return Draft::k07;
    if (has("draft/2019-09")) return Draft::k2019;
    if (has("draft/2020-12")) return Draft::k2020;
    if (has("draft-03") || has("draft-02") || has("draft-01") || has("draft-00"))
      return Unsupported("$schema at (root): \"" + u +
                         "\" is not supported (draft-03 and older: \"required\": true, \"disallow\", \"extends\" and "
                         "\"divisibleBy\" are not read; draft-04 and later are)");
  }
  return Draft::kUnspecified;
}

Json ReadAsDraft(const Json& root, Draft draft) {
  if (!root.is_object()) return root;
  Reader r{draft};
  // Nothing to do for a 2020-12 document without legacy keywords (the
  // common case): still one pass, it is cheap next to compiling.
  return r.Schema(root, false);
}

}  // namespace llm::schema
