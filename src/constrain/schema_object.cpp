// Objects and arrays for the JSON Schema compiler (schema_compiler.h).
#include <algorithm>
#include <deque>
#include <functional>
#include <bit>
#include <cmath>
#include <map>
#include <memory>

#include "constrain/grammar_text.h"
#include "constrain/schema_compiler.h"
#include "util/utf8.h"

namespace llm::schema {
namespace {

// Free (additionalProperties) keys: at most this many per object, each of
// at most about this many characters past a declared name's prefix.
constexpr int kMaxExtraKeys = 16;
constexpr int kMaxExtraKeyLength = 64;
constexpr int64_t kMaxCountedItems = 4096;

struct TrieNode {
  bool terminal = false;
  std::map<uint32_t, std::unique_ptr<TrieNode>> children;
};

// Keys as keychar (no escapes) sees them: a name holding '"', '\' or a
// control character can never be typed as an extra key, so it needs no
// exclusion.
std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

bool Typable(uint32_t cp) { return cp >= 0x20 && cp != '"' && cp != '\\' && cp != 0x7F; }

// The rest of a key, the trie node `n` reached so far: anything that does
// not end on a declared name.
std::string NotIn(const TrieNode& n) {
  std::vector<std::string> alts;
  if (!n.terminal) alts.push_back("\"\\\"\"");
  std::string excluded = "[^\"\\\\\\x00-\\x1F\\x7F";
  for (const auto& [cp, child] : n.children) {
    std::string c;
    AppendUtf8(cp, &c);
    alts.push_back(gbnf::Literal(c) + " " + NotIn(*child));
    excluded += gbnf::ClassChar(cp);
  }
  alts.push_back(excluded + "] keychar{0," + std::to_string(kMaxExtraKeyLength) + "} \"\\\"\"");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

}  // namespace

std::string Compiler::KeyNotIn(const std::vector<std::string>& names) {
  Builtin(kKeyChar);
  TrieNode root;
  for (const auto& name : names) {
    TrieNode* n = &root;
    bool typable = true;
    for (size_t pos = 0; pos < name.size();) {
      uint32_t cp = 0;
      size_t len = 1;
      if (!DecodeUtf8(name, pos, &cp, &len) || !Typable(cp)) {
        typable = false;
        break;
      }
      pos += len;
      auto& child = n->children[cp];
      if (!child) child = std::make_unique<TrieNode>();
      n = child.get();
    }
    if (typable) n->terminal = true;
  }
  return "\"\\\"\" " + NotIn(root);
}

// An object whose member count is bounded (minProperties above the
// required count, or maxProperties below the possible one): the members in
// schema order, then free keys, with the count c written so far in the
// rule: R(i, c) = the members from i on; c saturates at the bound that
// matters. Optional members are written only while c < max, the object
// ends only once c >= min; free keys at most 16 past the declared ones.
StatusOr<std::string> Compiler::CountedMembers(const std::vector<std::string>& kv, const std::vector<bool>& required,
                                               const std::string& extra_kv, int64_t min_props, int64_t max_props,
                                               const std::string& ptr, const std::string& hint) {
  const std::string ws = Builtin(kWs);
  const int64_t n = static_cast<int64_t>(kv.size());
  const int64_t cap = max_props >= 0 ? max_props : min_props;  // counts above cap behave alike
  const int64_t extra_limit = n + kMaxExtraKeys;
  if ((n + 1) * (cap + 1) + (cap + 1) > 20000)
    return InvalidArgument("minProperties/maxProperties at " + Where(ptr) + ": more than 20000 rules to count the members (the limit)");
  std::map<std::pair<int64_t, int64_t>, std::string> memo;  // (i, c) -> rule name, "" = no way to finish
  std::function<std::string(int64_t, int64_t, int64_t)> rule = [&](int64_t i, int64_t c, int64_t written) -> std::string {
    const int64_t key_c = std::min(c, cap);
    const std::pair<int64_t, int64_t> key(i, i < n ? key_c : key_c * 1000 + std::min<int64_t>(written, extra_limit));
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    memo[key] = "";  // (no recursion through the same key: i or written grows)
    const std::string sep = c > 0 ? ws + " \",\" " + ws + " " : std::string();
    const bool can_write = max_props < 0 || c < max_props;
    std::vector<std::string> alts;
    if (i < n) {
      if (can_write) {
        const std::string next = rule(i + 1, c + 1, written + 1);
        if (!next.empty()) alts.push_back(sep + kv[static_cast<size_t>(i)] + " " + next);
      }
      if (!required[static_cast<size_t>(i)]) {
        const std::string skip = rule(i + 1, c, written);
        if (!skip.empty()) alts.push_back(skip);
      }
    } else {
      if (c >= min_props) alts.push_back(c > 0 ? ws : std::string("\"\""));
      if (!extra_kv.empty() && can_write && written < extra_limit) {
        const std::string next = rule(n, c + 1, written + 1);
        if (!next.empty()) alts.push_back(sep + extra_kv + " " + next);
      }
    }
    if (alts.empty()) return "";
    std::string body = alts.size() == 1 ? alts[0] : "(";
    if (alts.size() > 1) {
      for (size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : " ") + alts[a];
      body += " )";
    }
    const std::string name = AddRule(hint + "-count", body);
    memo[key] = name;
    return name;
  };
  const std::string members = rule(0, 0, 0);
  if (members.empty()) return std::string();  // no count fits
  return AddRule(hint, "\"{\" " + ws + " " + members + " \"}\"");
}

StatusOr<std::string> Compiler::Object(const Json& s, const std::string& ptr, const std::string& hint) {
  const std::string ws = Builtin(kWs);
  struct Prop {
    std::string name;
    const Json* schema;
    std::string ptr;
    bool required;
    bool own = true;  // declared in properties (else a required name alone)
  };
  std::vector<Prop> props;
  const Json* properties = s.Find("properties");
  if (properties && !properties->is_object()) return InvalidArgument("properties at " + Where(ptr) + " must be an object");
  std::vector<std::string> required;
  if (const Json* r = s.Find("required")) {
    if (!r->is_array()) return InvalidArgument("required at " + Where(ptr) + " must be an array");
    for (size_t i = 0; i < r->array().size(); ++i) {
      const Json& e = r->array()[i];
      if (!e.is_string()) return InvalidArgument("required at " + Where(PointerJoin(PointerJoin(ptr, "required"), i)) + " must be a string");
      if (std::find(required.begin(), required.end(), e.as_string()) == required.end()) required.push_back(e.as_string());
    }
  }
  auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
  if (properties) {
    const std::string pp = PointerJoin(ptr, "properties");
    for (const auto& member : properties->object()) {
      const std::string& name = member.first;  // (captured by the lambda below)
      const Json& sub = member.second;
      if (std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.name == name; }))
        return InvalidArgument("properties at " + Where(ptr) + " names \"" + name + "\" twice");
      props.push_back({name, &sub, PointerJoin(pp, name), is_required(name)});
    }
  }
  // Extra keys: additionalProperties true or a schema; absent counts as true
  // only for an object schema that declares no properties ("any object").
  static const Json kTrue = Json::Bool(true);
  const Json* extra = s.Find("additionalProperties");
  if (!extra && !properties) extra = &kTrue;
  if (extra && extra->is_bool() && !extra->as_bool()) extra = nullptr;
  for (const auto& r : required) {
    if (std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.name == r; })) continue;
    if (s.Find("additionalProperties") && !extra) return std::string();  // required yet forbidden: no object
    // A required name without a schema of its own takes additionalProperties'.
    props.push_back({r, extra ? extra : &kTrue, PointerJoin(ptr, "additionalProperties"), true, false});
  }
  // patternProperties / propertyNames (schema_keys.cpp): a declared name a
  // pattern matches takes that pattern's schema too (instead of
  // additionalProperties' for a required name alone); one propertyNames
  // rejects cannot appear.
  const bool keyed = s.Find("patternProperties") || s.Find("propertyNames");
  std::deque<Json> owned;
  if (keyed) {
    const Json* mn = s.Find("minProperties");
    if ((mn && !(mn->is_number() && mn->as_double() <= 0)) || s.Find("maxProperties"))
      return Unsupported("minProperties/maxProperties beside patternProperties/propertyNames at " + Where(ptr) + " is not supported");
    std::vector<Prop> allowed;
    for (auto& p : props) {
      LLM_ASSIGN_OR_RETURN(auto rules, NameRules(s, p.name, ptr));
      if (!rules.first) {
        if (p.required) return std::string();  // a required name propertyNames forbids: no object
        continue;
      }
      if (!rules.second.empty()) {
        std::vector<Json> parts;
        if (p.own) parts.push_back(*p.schema);
        for (const Json* x : rules.second) parts.push_back(*x);
        owned.push_back(parts.size() == 1 ? parts[0] : Json::Object({{"allOf", Json::Array(std::move(parts))}}));
        p.schema = &owned.back();
      }
      allowed.push_back(p);
    }
    props = std::move(allowed);
  }
  const size_t n_required = static_cast<size_t>(std::count_if(props.begin(), props.end(), [](const Prop& p) { return p.required; }));
  // minProperties / maxProperties: when the required and possible counts
  // do not already decide them, the members are counted (CountedMembers).
  int64_t min_props = 0, max_props = -1;
  if (const Json* v = s.Find("minProperties")) {
    if (!CountValue(*v, &min_props)) return InvalidArgument("minProperties at " + Where(ptr) + " must be a non-negative integer");
    if (static_cast<uint64_t>(min_props) <= n_required) min_props = 0;
    // More members than the declared ones: an absent additionalProperties
    // is true (the narrowing to false would leave no object).
    if (!extra && !s.Find("additionalProperties") && static_cast<uint64_t>(min_props) > props.size()) extra = &kTrue;
  }
  if (const Json* v = s.Find("maxProperties")) {
    if (!CountValue(*v, &max_props)) return InvalidArgument("maxProperties at " + Where(ptr) + " must be a non-negative integer");
    if (!extra && static_cast<uint64_t>(max_props) >= props.size()) max_props = -1;
    if (max_props >= 0 && static_cast<uint64_t>(max_props) < n_required) return std::string();  // no object
  }

  // One rule per member: "name" ws ":" ws value.
  // A property whose value is out of reach (kNever: recursion unrolled to
  // its limit) is left out when optional; when required, so is the object.
  std::vector<std::string> kv;
  std::vector<std::string> declared;
  for (const auto& p : props) declared.push_back(p.name);
  std::vector<Prop> kept;
  for (const auto& p : props) {
    LLM_ASSIGN_OR_RETURN(std::string value, Visit(*p.schema, p.ptr, hint + "-" + p.name));
    if (IsNever(value)) {
      if (p.required) return std::string();
      continue;
    }
    kept.push_back(p);
    kv.push_back(AddRule(hint + "-" + p.name + "-kv", gbnf::Literal(gbnf::JsonString(p.name)) + " " + ws + " \":\" " + ws + " " + value));
  }
  props = std::move(kept);
  std::string extra_kv;
  if (keyed) {
    LLM_ASSIGN_OR_RETURN(std::string keys, PatternKeys(s, declared, extra, ptr, hint));
    extra = keys.empty() ? nullptr : &kTrue;  // (from here on: whether free keys exist)
    if (!keys.empty()) extra_kv = AddRule(hint + "-additional-kv", keys);
  } else if (extra) {
    LLM_ASSIGN_OR_RETURN(std::string value, Visit(*extra, PointerJoin(ptr, "additionalProperties"), hint + "-additional"));
    if (IsNever(value)) extra = nullptr;
    else extra_kv = AddRule(hint + "-additional-kv", KeyNotIn(declared) + " " + ws + " \":\" " + ws + " " + value);
  }
  if (min_props > 0 || max_props >= 0) {
    std::vector<bool> req;
    for (const auto& p : props) req.push_back(p.required);
    return CountedMembers(kv, req, extra ? extra_kv : std::string(), min_props, max_props, ptr, hint);
  }
  // rest[i]: members i.. after at least one member was written, each behind
  // a comma; optional ones may be left out.
  const std::string comma = ws + " \",\" " + ws + " ";
  std::vector<std::string> rest(props.size() + 1);
  // Extra keys: at most kMaxExtraKeys (json_schema.h), so that free keys end.
  rest[props.size()] = extra ? "( " + comma + extra_kv + " ){0," + std::to_string(kMaxExtraKeys - 1) + "}" : "";
  // (rest[0] is never needed: member 0 can only come first.)
  for (size_t i = props.size(); i-- > 1;) {
    std::string item = props[i].required ? comma + kv[i] : "( " + comma + kv[i] + " )?";
    std::string body = rest[i + 1].empty() ? item : item + " " + rest[i + 1];
    rest[i] = i + 1 < props.size() || extra ? AddRule(hint + "-rest-" + std::to_string(i), body) : body;
  }
  // First member: property i when all before it are left out (only optional
  // ones can be), then the rest after it.
  std::vector<std::string> first;
  bool nullable = true;
  for (size_t i = 0; i < props.size(); ++i) {
    first.push_back(rest[i + 1].empty() ? kv[i] : kv[i] + " " + rest[i + 1]);
    if (props[i].required) {
      nullable = false;
      break;
    }
  }
  if (nullable && extra) first.push_back(extra_kv + " " + rest[props.size()]);
  if (first.empty()) return "\"{\" " + ws + " \"}\"";
  std::string members = first.size() == 1 ? first[0] : "( " + first[0];
  for (size_t i = 1; i < first.size(); ++i) members += " | " + first[i];
  if (first.size() > 1) members += " )";
  const std::string body = nullable ? "\"{\" " + ws + " ( " + members + " " + ws + " )? \"}\""
                                    : "\"{\" " + ws + " " + members + " " + ws + " \"}\"";
  return AddRule(hint, body);
}

// contains S (at least minContains items, default 1, satisfy S): the
// items, with minContains of them marked as satisfying S too:
//   "[" (item ",")* hit ( ("," item)* "," hit ){k-1} ("," item)* "]"
// (ambiguous where items could be hits either way, which the matcher's
// stack sets absorb: k is at most 4). maxContains needs the other items
// to fail S, and minItems/maxItems/prefixItems to count hits and items
// together: those are refused.
StatusOr<std::string> Compiler::Contains(const Json& s, const Json& contains, int64_t min_items, int64_t max_items,
                                         const std::string& ptr, const std::string& hint) {
  int64_t k = 1;
  if (const Json* v = s.Find("minContains"); v && !CountValue(*v, &k))
    return InvalidArgument("minContains at " + Where(ptr) + " must be a non-negative integer");
  if (const Json* v = s.Find("maxContains")) {
    int64_t m = 0;
    if (!CountValue(*v, &m)) return InvalidArgument("maxContains at " + Where(ptr) + " must be a non-negative integer");
    return CountedContains(s, contains, k, m, min_items, max_items, ptr, hint);
  }
  const bool vacuous = k == 0 || (contains.is_bool() && contains.as_bool() && k <= std::max<int64_t>(min_items, 0));
  for (const char* bad : {"prefixItems", "uniqueItems"})
    if (const Json* v = s.Find(bad); v && !(std::string(bad) == "uniqueItems" && v->is_bool() && !v->as_bool()))
      return Unsupported(std::string(bad) + " beside contains at " + Where(ptr) + " is not supported");
  if (const Json* it = s.Find("items"); it && it->is_array())
    return Unsupported("items (an array) beside contains at " + Where(ptr) + " is not supported");
  if (!vacuous && (min_items > k || max_items >= 0))
    return Unsupported("minItems/maxItems beside contains at " + Where(ptr) + " is not supported");
  if (k > 4) return InvalidArgument("minContains " + std::to_string(k) + " at " + Where(ptr) + " is above the limit of 4");
  std::vector<Json::Member> rest;
  for (const auto& m : s.object())
    if (m.first != "contains" && m.first != "minContains") rest.push_back(m);
  if (vacuous) return Array(Json::Object(std::move(rest)), ptr, hint);
  static const Json kTrue = Json::Bool(true);
  const Json* items = s.Find("items");
  if (!items) items = &kTrue;
  LLM_ASSIGN_OR_RETURN(std::string item, Visit(*items, PointerJoin(ptr, "items"), hint + "-item"));
  LLM_ASSIGN_OR_RETURN(Json both, MergeAllOf(Json::Object({{"allOf", Json::Array({*items, contains})}}), PointerJoin(ptr, "contains")));
  LLM_ASSIGN_OR_RETURN(std::string hit, Visit(both, PointerJoin(ptr, "contains"), hint + "-contains"));
  if (IsNever(hit)) return std::string();  // no item can satisfy contains
  const std::string ws = Builtin(kWs);
  const std::string comma = ws + " \",\" " + ws;
  std::string body = "\"[\" " + ws + " ";
  if (!IsNever(item)) body += "( " + item + " " + comma + " )* ";
  body += hit;
  for (int64_t j = 1; j < k; ++j) body += IsNever(item) ? " " + comma + " " + hit : " ( " + comma + " " + item + " )* " + comma + " " + hit;
  if (!IsNever(item)) body += " ( " + comma + " " + item + " )*";
  return AddRule(hint, body + " " + ws + " \"]\"");
}

// contains S with maxContains m (and minContains k): each item is a hit
// (items ∧ S) or a miss (items ∧ ¬S, schema_negate.cpp), disjoint, so
// the hits are counted exactly by the rule the list is in:
//   rest[c] ::= "," (miss rest[c] | hit rest[c+1])  | ""   (c >= k)
// one rule per count c <= m. Without a negation of S it is refused.
StatusOr<std::string> Compiler::CountedContains(const Json& s, const Json& contains, int64_t k, int64_t m,
                                                int64_t min_items, int64_t max_items, const std::string& ptr,
                                                const std::string& hint) {
  constexpr int64_t kMaxCounted = 256;
  if (k > m) return std::string();  // no count of hits satisfies both
  for (const char* bad : {"prefixItems", "uniqueItems"})
    if (const Json* v = s.Find(bad); v && !(std::string(bad) == "uniqueItems" && v->is_bool() && !v->as_bool()))
      return Unsupported(std::string(bad) + " beside contains at " + Where(ptr) + " is not supported");
  if (const Json* it = s.Find("items"); it && it->is_array())
    return Unsupported("items (an array) beside contains at " + Where(ptr) + " is not supported");
  if (min_items > 0 || max_items >= 0)
    return Unsupported("minItems/maxItems beside contains and maxContains at " + Where(ptr) + " is not supported");
  if (m > kMaxCounted)
    return InvalidArgument("maxContains " + std::to_string(m) + " at " + Where(ptr) + " is above the limit of " +
                           std::to_string(kMaxCounted));
  static const Json kTrue = Json::Bool(true);
  const Json* items = s.Find("items");
  if (!items) items = &kTrue;
  const std::string cptr = PointerJoin(ptr, "contains");
  auto negated = Negate(contains, cptr, 0);
  if (!negated.ok()) {
    if (negated.status().code() != LLM_ERR_UNSUPPORTED) return negated.status();
    return Unsupported("maxContains at " + Where(ptr) + " needs the items that fail contains, and " +
                       negated.status().message());
  }
  LLM_ASSIGN_OR_RETURN(Json hit_schema, MergeAllOf(Json::Object({{"allOf", Json::Array({*items, contains})}}), cptr));
  LLM_ASSIGN_OR_RETURN(std::string hit, Visit(hit_schema, cptr, hint + "-contains"));
  LLM_ASSIGN_OR_RETURN(std::string miss,
                       Visit(Json::Object({{"allOf", Json::Array({*items, *negated})}}), PointerJoin(ptr, "maxContains"),
                             hint + "-other"));
  const std::string ws = Builtin(kWs);
  const std::string comma = ws + " \",\" " + ws + " ";
  std::vector<std::string> rest(static_cast<size_t>(m) + 1);
  for (auto& r : rest) r = NewName(hint + "-counted");
  for (int64_t c = 0; c <= m; ++c) {
    std::vector<std::string> alts;
    if (!IsNever(miss)) alts.push_back(comma + miss + " " + rest[static_cast<size_t>(c)]);
    if (c < m && !IsNever(hit)) alts.push_back(comma + hit + " " + rest[static_cast<size_t>(c + 1)]);
    if (c >= k) alts.push_back("\"\"");
    rules_.emplace_back(rest[static_cast<size_t>(c)], alts.empty() ? "\"\"" : Alternatives(alts));
  }
  std::vector<std::string> first;
  if (!IsNever(miss)) first.push_back(miss + " " + rest[0]);
  if (m > 0 && !IsNever(hit)) first.push_back(hit + " " + rest[1]);
  std::string body = "\"[\" " + ws + " ";
  if (first.empty()) {
    if (k > 0) return std::string();
    body += "\"]\"";
  } else {
    body += (k == 0 ? "( " + Alternatives(first) + " " + ws + " )? " : Alternatives(first) + " " + ws + " ") + "\"]\"";
  }
  return AddRule(hint, body);
}

// uniqueItems over items from a small finite set (an enum/const, boolean,
// null; at most 6 values): the array picks values it has not picked yet,
// the state being the set picked so far (2^k rules), exact with the item
// counts. Other items would have to be compared at run time (refused); an
// array of at most one item is unique anyway (Array drops the keyword).
StatusOr<std::string> Compiler::UniqueItems(const Json& s, int64_t min_items, int64_t max_items, const std::string& ptr,
                                            const std::string& hint) {
  const std::string where = Where(PointerJoin(ptr, "uniqueItems"));
  if (s.Find("prefixItems") || (s.Find("items") && s.Find("items")->is_array()) || s.Find("contains"))
    return Unsupported("uniqueItems at " + where + " beside prefixItems/contains is not supported");
  const Json* items = s.Find("items");
  for (int hops = 0; items && items->is_object() && items->size() == 1 && items->Find("$ref") && hops < 16; ++hops) {
    LLM_ASSIGN_OR_RETURN(items, Resolve(items->Find("$ref")->as_string(), PointerJoin(ptr, "items")));
  }
  std::vector<Json> values;
  bool finite = false;
  if (items && items->is_object()) {
    std::vector<std::string> types;
    if (const Json* t = items->Find("type")) {
      if (t->is_string()) types.push_back(t->as_string());
      for (const auto& e : t->array()) types.push_back(e.as_string());
    }
    auto typed = [&](const Json& v) {
      if (types.empty()) return true;
      for (const auto& t : types) {
        if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_bool()) || (t == "string" && v.is_string()) ||
            (t == "number" && v.is_number()) || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
            (t == "integer" && v.is_number() && std::floor(v.as_double()) == v.as_double()))
          return true;
      }
      return false;
    };
    bool only_simple = true;
    for (const auto& m : items->object())
      if (m.first != "type" && m.first != "enum" && m.first != "const" && IsAnnotation(m.first) == false) only_simple = false;
    std::vector<const Json*> listed;
    if (const Json* c = items->Find("const")) listed.push_back(c);
    else if (const Json* e = items->Find("enum"); e && e->is_array()) for (const auto& v : e->array()) listed.push_back(&v);
    if (only_simple && !listed.empty()) {
      finite = true;
      for (const Json* v : listed) {
        if (!typed(*v)) continue;
        auto a = gbnf::JsonDump(*v);
        bool dup = false;
        for (const auto& w : values) {
          auto b = gbnf::JsonDump(w);
          dup = dup || (a.ok() && b.ok() && *a == *b) || (v->is_number() && w.is_number() && v->as_double() == w.as_double());
        }
        if (!dup) values.push_back(*v);
      }
    } else if (only_simple && !types.empty() &&
               std::all_of(types.begin(), types.end(), [](const std::string& t) { return t == "boolean" || t == "null"; })) {
      finite = true;
      for (const auto& t : types) {
        if (t == "boolean") {
          values.push_back(Json::Bool(true));
          values.push_back(Json::Bool(false));
        } else {
          values.push_back(Json::Null());
        }
      }
    }
  }
  if (!finite)
    return Unsupported("uniqueItems at " + where + " is supported only over items from a small enum/const/boolean/null set (or maxItems <= 1)");
  // (The state is the subset picked so far: 2^k rules.)
  if (values.size() > 6)
    return Unsupported("uniqueItems at " + where + " over more than 6 distinct item values is not supported (the subsets picked would be the state)");
  const int k = static_cast<int>(values.size());
  const int64_t hi = max_items < 0 ? k : std::min<int64_t>(max_items, k);
  if (min_items > hi) return std::string();  // not enough distinct values
  const std::string ws = Builtin(kWs);
  std::vector<std::string> lits;
  for (const auto& v : values) {
    LLM_ASSIGN_OR_RETURN(std::string t, gbnf::JsonDump(v));
    lits.push_back(gbnf::Literal(t));
  }
  // rule[S]: the rest of the array after the values in S (S non-empty).
  std::vector<std::string> names(static_cast<size_t>(1) << k);
  for (uint32_t set = 1; set < (1u << k); ++set) names[set] = NewName(hint + "-unique");
  for (uint32_t set = 1; set < (1u << k); ++set) {
    const int n = std::popcount(set);
    std::vector<std::string> alts;
    if (n < hi)
      for (int i = 0; i < k; ++i)
        if (!(set >> i & 1)) alts.push_back(ws + " \",\" " + ws + " " + lits[static_cast<size_t>(i)] + " " + names[set | (1u << i)]);
    if (n >= min_items) alts.push_back("\"\"");
    rules_.emplace_back(names[set], alts.empty() ? "\"\"" : Alternatives(alts));
  }
  std::vector<std::string> first;
  if (hi > 0)
    for (int i = 0; i < k; ++i) first.push_back(lits[static_cast<size_t>(i)] + " " + names[1u << i]);
  std::string body = "\"[\" " + ws + " ";
  if (first.empty()) body += "\"]\"";
  else if (min_items == 0) body += "( " + Alternatives(first) + " " + ws + " )? \"]\"";
  else body += Alternatives(first) + " " + ws + " \"]\"";
  return AddRule(hint, body);
}

StatusOr<std::string> Compiler::Array(const Json& s, const std::string& ptr, const std::string& hint) {
  const std::string ws = Builtin(kWs);
  auto count = [&](const char* k, int64_t* out) -> Status {
    const Json* v = s.Find(k);
    if (!v) return Status::Ok();
    if (!CountValue(*v, out)) return InvalidArgument(std::string(k) + " at " + Where(ptr) + " must be a non-negative integer");
    *out = std::min<int64_t>(*out, 1 << 20);
    return Status::Ok();
  };
  int64_t min_items = 0, max_items = -1;
  LLM_RETURN_IF_ERROR(count("minItems", &min_items));
  LLM_RETURN_IF_ERROR(count("maxItems", &max_items));
  if (max_items >= 0 && max_items < min_items) return std::string();  // no array: like false
  if (const Json* contains = s.Find("contains")) return Contains(s, *contains, min_items, max_items, ptr, hint);
  // Counts are written out (grammar.h): above kMaxCountedItems, maxItems is
  // narrowed to it (sound), minItems refused.
  if (min_items > kMaxCountedItems)
    return InvalidArgument("minItems " + std::to_string(min_items) + " at " + Where(ptr) + " is above the limit of " +
                           std::to_string(kMaxCountedItems) + " items");
  if (max_items > kMaxCountedItems) max_items = kMaxCountedItems;

  if (const Json* u = s.Find("uniqueItems"); u && u->as_bool() && !(max_items >= 0 && max_items <= 1)) {
    auto unique = UniqueItems(s, min_items, max_items, ptr, hint);
    // Items that are not from a small finite set would have to be compared
    // with each other as they are written; where one item is enough
    // (minItems <= 1) the array is narrowed to at most one (sound: a
    // one-item array is unique), else refused.
    if (unique.ok() || unique.status().code() != LLM_ERR_UNSUPPORTED || min_items > 1) return unique;
    max_items = 1;
  }

  // Tuple positions (2020-12 prefixItems, or draft-7 items as an array) and
  // the schema of the positions after them (nullptr: none allowed).
  const Json* tuple = s.Find("prefixItems");
  std::string tuple_ptr = PointerJoin(ptr, "prefixItems");
  const Json* items = s.Find("items");
  const Json* after = items;
  std::string after_ptr = PointerJoin(ptr, "items");
  static const Json kTrue = Json::Bool(true);
  if (items && items->is_array()) {
    if (tuple) return InvalidArgument("items at " + Where(ptr) + " is an array beside prefixItems");
    tuple = items;
    tuple_ptr = after_ptr;
    after = s.Find("additionalItems");
    after_ptr = PointerJoin(ptr, "additionalItems");
    if (!after) after = &kTrue;
  } else if (!items) {
    after = &kTrue;  // past a tuple: any items, as every draft says
  }
  if (tuple && !tuple->is_array()) return InvalidArgument("prefixItems at " + Where(ptr) + " must be an array");
  if (after && after->is_bool() && !after->as_bool()) after = nullptr;

  std::vector<std::string> seq;
  const size_t n_tuple = tuple ? tuple->array().size() : 0;
  size_t n_fixed = max_items >= 0 ? std::min<size_t>(n_tuple, static_cast<size_t>(max_items)) : n_tuple;
  bool tuple_closed = false;  // a position with no value (false): the array ends before it
  for (size_t i = 0; i < n_fixed; ++i) {
    LLM_ASSIGN_OR_RETURN(std::string e, Visit(tuple->array()[i], PointerJoin(tuple_ptr, i), hint + "-" + std::to_string(i)));
    if (IsNever(e)) {
      if (static_cast<int64_t>(i) < min_items) return std::string();  // a position every array needs
      n_fixed = i;
      tuple_closed = true;
      break;
    }
    seq.push_back(e);
  }
  const int64_t more_min = std::max<int64_t>(0, min_items - static_cast<int64_t>(n_fixed));
  int64_t more_max = max_items < 0 ? -1 : max_items - static_cast<int64_t>(n_fixed);
  if (n_fixed < n_tuple || tuple_closed || !after) more_max = 0;  // nothing may follow
  if (more_max >= 0 && more_max < more_min)
    return InvalidArgument("minItems at " + Where(ptr) + " cannot be met: no items allowed past the tuple");
  std::string item;
  if (more_max != 0) {
    LLM_ASSIGN_OR_RETURN(item, Visit(*after, after_ptr, hint + "-item"));
    if (IsNever(item)) {  // items out of reach: only minItems 0 has a value
      if (more_min > 0) return std::string();
      more_max = 0;
    }
  }
  const std::string comma = ws + " \",\" " + ws + " ";
  std::string body;
  if (!seq.empty()) {
    // The tuple's positions past minItems are optional, each only after
    // the one before it (an array may stop anywhere in the tuple); items
    // past the tuple only once it is whole.
    std::string tail;
    if (more_max != 0) {
      std::string rep = "{" + std::to_string(more_min) + "," + (more_max < 0 ? "" : std::to_string(more_max)) + "}";
      if (more_min == 0 && more_max < 0) rep = "*";
      tail = "( " + comma + item + " )" + rep;
    }
    const size_t required = static_cast<size_t>(std::min<int64_t>(min_items, static_cast<int64_t>(seq.size())));
    body = tail;
    for (size_t i = seq.size(); i-- > std::max<size_t>(required, 1);)
      body = "( " + comma + seq[i] + (body.empty() ? "" : " " + body) + " )?";
    for (size_t i = std::max<size_t>(required, 1); i-- > 1;) body = comma + seq[i] + (body.empty() ? "" : " " + body);
    body = seq[0] + (body.empty() ? "" : " " + body);
    if (required == 0) return AddRule(hint, "\"[\" " + ws + " ( " + body + " " + ws + " )? \"]\"");
    return AddRule(hint, "\"[\" " + ws + " " + body + " " + ws + " \"]\"");
  }
  if (more_max == 0) return "\"[\" " + ws + " \"]\"";
  // item ( , item ){min-1, max-1}, optional as a whole when min is 0.
  const int64_t rmin = std::max<int64_t>(0, more_min - 1);
  std::string rep;
  if (more_max < 0) rep = rmin == 0 ? "*" : "{" + std::to_string(rmin) + ",}";
  else if (more_max - 1 == 0) rep = "";
  else rep = "{" + std::to_string(rmin) + "," + std::to_string(more_max - 1) + "}";
  std::string list = item + (rep.empty() && more_max == 1 ? "" : " ( " + comma + item + " )" + rep);
  body = more_min == 0 ? "\"[\" " + ws + " ( " + list + " " + ws + " )? \"]\"" : "\"[\" " + ws + " " + list + " " + ws + " \"]\"";
  return AddRule(hint, body);
}

}  // namespace llm::schema
