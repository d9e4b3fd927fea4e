// oneOf for the JSON Schema compiler (schema_compiler.h): a value must
// match exactly one branch. The grammar of anyOf lets the output match
// several, so oneOf compiles as anyOf only when no value can match two
// branches, proven from the keywords that say so outright:
//   - the branches' types do not meet (`type`, and the types of const/enum
//     values; integer lies inside number);
//   - their const/enum values differ (numbers compared by value: 1 = 1.0);
//   - their number ranges do not meet;
//   - for objects, one branch requires a property that the other forbids
//     (additionalProperties: false, or the property's schema is false) or
//     whose schemas are themselves disjoint (a "kind" discriminator).
// Anything else (an untyped branch, patterns, formats, array shapes) is not
// a proof, and the schema is refused naming the two branches.
#include <algorithm>
#include <cmath>
#include <optional>

#include "constrain/schema_compiler.h"

namespace llm::schema {
namespace {

// JSON types as bits; "number" is integer | fraction.
enum : uint32_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64,
  kAll = 127,
};

uint32_t TypeBit(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBoolean;
  if (t == "object") return kObject;
  if (t == "array") return kArray;
  if (t == "string") return kString;
  if (t == "integer") return kInteger;
  if (t == "number") return kInteger | kFraction;
  return 0;
}

uint32_t TypeOfValue(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_bool()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  const double d = v.as_double();
  return std::isfinite(d) && std::floor(d) == d ? kInteger : kFraction;
}

class Prover {
 public:
  explicit Prover(const RefResolver& resolve) : resolve_(resolve) {}

  bool Disjoint(const Json& a0, const Json& b0, int depth) {
    if (--budget_ < 0 || depth > 8) return false;
    const Json* a = Deref(&a0);
    const Json* b = Deref(&b0);
    if (!a || !b) return false;
    if ((a->is_bool() && !a->as_bool()) || (b->is_bool() && !b->as_bool())) return true;  // false matches nothing
    if (!a->is_object() || !b->is_object()) return false;
    const uint32_t common = Types(*a, depth) & Types(*b, depth);
    if (common == 0) return true;
    auto va = Values(*a), vb = Values(*b);
    if (va || vb) {
      // A value list: each value must fail the other side's list or type.
      const auto& vals = va ? *va : *vb;
      const Json& other = va ? *b : *a;
      const auto other_vals = va ? vb : va;
      const uint32_t other_types = Types(other, depth);
      return std::all_of(vals.begin(), vals.end(), [&](const Json* v) {
        if ((TypeOfValue(*v) & other_types) == 0) return true;
        if (!other_vals) return false;
        return std::none_of(other_vals->begin(), other_vals->end(), [&](const Json* w) { return Equal(*v, *w); });
      });
    }
    if ((common & ~(kInteger | kFraction)) == 0 && RangesDisjoint(*a, *b)) return true;
    if (common == kObject) return ObjectsDisjoint(*a, *b, depth) || ObjectsDisjoint(*b, *a, depth);
    return false;
  }

 private:
  const Json* Deref(const Json* s) {
    for (int hops = 0; s && s->is_object() && hops < 16; ++hops) {
      const Json* r = s->Find("$ref");
      if (!r || !r->is_string()) return s;
      // A $ref beside other keywords: only the reference is read (sound:
      // siblings narrow the set, and a proof on a superset holds).
      s = resolve_(r->as_string());
    }
    return s;
  }

  // The types a schema admits at most.
  uint32_t Types(const Json& s0, int depth) {
    const Json* s = Deref(&s0);
    if (!s || depth > 8 || --budget_ < 0) return kAll;
    if (s->is_bool()) return s->as_bool() ? kAll : 0;
    if (!s->is_object()) return kAll;
    uint32_t t = kAll;
    if (const Json* ty = s->Find("type")) {
      uint32_t u = 0;
      if (ty->is_string()) u = TypeBit(ty->as_string());
      for (const auto& e : ty->array()) u |= TypeBit(e.as_string());
      if (const Json* n = s->Find("nullable"); n && n->as_bool()) u |= kNull;  // OpenAPI
      t &= ty->is_string() || ty->is_array() ? u : kAll;
    }
    if (auto v = Values(*s)) {
      uint32_t u = 0;
      for (const Json* e : *v) u |= TypeOfValue(*e);
      t &= u;
    }
    if (const Json* all = s->Find("allOf"); all && all->is_array())
      for (const auto& p : all->array()) t &= Types(p, depth + 1);
    for (const char* comb : {"anyOf", "oneOf"}) {
      const Json* alts = s->Find(comb);
      if (!alts || !alts->is_array()) continue;
      uint32_t u = 0;
      for (const auto& p : alts->array()) u |= Types(p, depth + 1);
      t &= u;
    }
    return t;
  }

  // const / enum values (nullptr list: the schema has neither).
  static std::optional<std::vector<const Json*>> Values(const Json& s) {
    if (const Json* c = s.Find("const")) return std::vector<const Json*>{c};
    if (const Json* e = s.Find("enum"); e && e->is_array()) {
      std::vector<const Json*> out;
      for (const auto& v : e->array()) out.push_back(&v);
      return out;
    }
    return std::nullopt;
  }

  static bool Equal(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
    if (a.type() != b.type()) return false;
    if (a.is_string()) return a.as_string() == b.as_string();
    if (a.is_bool()) return a.as_bool() == b.as_bool();
    if (a.is_null()) return true;
    if (a.size() != b.size()) return false;
    if (a.is_array()) {
      for (size_t i = 0; i < a.size(); ++i)
        if (!Equal(a.array()[i], b.array()[i])) return false;
      return true;
    }
    for (const auto& [k, v] : a.object()) {
      const Json* w = b.Find(k);
      if (!w || !Equal(v, *w)) return false;
    }
    return true;
  }

  struct Range {
    double lo = -INFINITY, hi = INFINITY;
    bool lo_open = false, hi_open = false;
  };
  static Range RangeOf(const Json& s) {
    Range r;
    const Json* emin = s.Find("exclusiveMinimum");
    const Json* emax = s.Find("exclusiveMaximum");
    if (const Json* v = s.Find("minimum"); v && v->is_number()) {
      r.lo = v->as_double();
      r.lo_open = emin && emin->as_bool();  // draft 4's boolean form
    }
    if (const Json* v = s.Find("maximum"); v && v->is_number()) {
      r.hi = v->as_double();
      r.hi_open = emax && emax->as_bool();
    }
    if (emin && emin->is_number() && emin->as_double() >= r.lo) {
      r.lo = emin->as_double();
      r.lo_open = true;
    }
    if (emax && emax->is_number() && emax->as_double() <= r.hi) {
      r.hi = emax->as_double();
      r.hi_open = true;
    }
    return r;
  }
  static bool RangesDisjoint(const Json& a, const Json& b) {
    const Range x = RangeOf(a), y = RangeOf(b);
    auto below = [](const Range& p, const Range& q) { return p.hi < q.lo || (p.hi == q.lo && (p.hi_open || q.lo_open)); };
    return below(x, y) || below(y, x);
  }

  // The schema s gives property `name` (nullptr: s says nothing about it).
  static const Json* PropertySchema(const Json& s, const std::string& name) {
    if (const Json* p = s.Find("properties"); p && p->is_object())
      if (const Json* v = p->Find(name)) return v;
    if (s.Find("patternProperties")) return nullptr;
    return s.Find("additionalProperties");
  }
  // Some property `a` requires cannot have a value `b` accepts.
  bool ObjectsDisjoint(const Json& a, const Json& b, int depth) {
    const Json* r = a.Find("required");
    if (!r || !r->is_array()) return false;
    for (const auto& e : r->array()) {
      if (!e.is_string()) continue;
      const Json* pb = PropertySchema(b, e.as_string());
      if (!pb) continue;
      if (pb->is_bool() && !pb->as_bool()) return true;
      const Json* pa = PropertySchema(a, e.as_string());
      if (pa && Disjoint(*pa, *pb, depth + 1)) return true;
    }
    return false;
  }

  const RefResolver& resolve_;
  int budget_ = 200000;

 public:
  bool exhausted() const { return budget_ < 0; }
};

}  // namespace

bool FindOverlap(const std::vector<const Json*>& branches, const RefResolver& resolve, size_t* first, size_t* second,
                 bool* exhausted) {
  Prover p(resolve);
  for (size_t i = 0; i < branches.size(); ++i) {
    for (size_t j = i + 1; j < branches.size(); ++j) {
      if (!p.Disjoint(*branches[i], *branches[j], 0)) {
        *first = i;
        *second = j;
        *exhausted = p.exhausted();
        return true;
      }
    }
  }
  return false;
}

}  // namespace llm::schema
