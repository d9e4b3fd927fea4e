// patternProperties and propertyNames for the JSON Schema compiler
// (schema_compiler.h). Keys are strings a DFA can sort (schema_pattern.h):
//   - propertyNames: every key must be in its language (a pattern, lengths,
//     an enum of names; as DFAs that must accept);
//   - patternProperties: a key's value must satisfy the schema of every
//     pattern the key matches, and additionalProperties only when it
//     matches none.
// Free keys are the product of those DFAs with the trie of declared names
// (a declared name is never a free key), one rule per product state; the
// closing quote of a key leads into the value schema its accepting
// patterns select (the allOf of them). Declared names get the same
// treatment at compile time (NameRules). At most 4000 product states.
#include <algorithm>
#include <map>

#include "constrain/schema_compiler.h"
#include "constrain/schema_pattern.h"
#include "util/utf8.h"

namespace llm::schema {
namespace {

constexpr size_t kMaxProductStates = 4000;

std::string RegexEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::vector<uint32_t> CodePoints(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = 0;
    size_t len = 1;
    if (!DecodeUtf8(s, pos, &cp, &len)) cp = 0xFFFD;
    out.push_back(cp);
    pos += len;
  }
  return out;
}

bool Accepts(const CharDfa& d, const std::string& s) {
  if (d.accept.empty()) return false;
  int32_t q = 0;
  for (uint32_t cp : CodePoints(s)) {
    q = d.Run(q, cp);
    if (q < 0) return false;
  }
  return d.accept[static_cast<size_t>(q)];
}

}  // namespace

Status Compiler::KeyAutomata(const Json& s, const std::string& ptr, std::vector<CharDfa>* names,
                             std::vector<std::pair<CharDfa, const Json*>>* patterns) {
  if (const Json* pn = s.Find("propertyNames")) {
    const std::string where = PointerJoin(ptr, "propertyNames");
    if (pn->is_bool()) {
      if (!pn->as_bool()) names->push_back(CharDfa{});  // no key at all
    } else if (pn->is_object()) {
      for (const auto& [k, v] : pn->object()) {
        if (IsAnnotation(k) || (k == "type" && v.is_string() && v.as_string() == "string")) continue;
        std::string re;
        if (k == "pattern" && v.is_string()) {
          re = v.as_string();
        } else if (k == "minLength" || k == "maxLength") {
          if (k == "maxLength" && pn->Find("minLength")) continue;  // (read with minLength below)
          int64_t lo = 0, hi = -1;
          if (const Json* a = pn->Find("minLength"); a && !CountValue(*a, &lo)) return InvalidArgument("minLength at " + Where(where) + " must be a non-negative integer");
          if (const Json* b = pn->Find("maxLength"); b && !CountValue(*b, &hi)) return InvalidArgument("maxLength at " + Where(where) + " must be a non-negative integer");
          if (lo > 1000 || hi > 1000) return InvalidArgument("propertyNames lengths at " + Where(where) + " above 1000 (the limit)");
          re = "^[\\s\\S]{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : std::string()) + "}$";
        } else if ((k == "enum" && v.is_array()) || k == "const") {
          re = "^(?:";
          bool first = true;
          // (no lambda over the structured binding v: clang 14, the fuzz
          // build's compiler, cannot capture one)
          std::vector<const Json*> values;
          if (k == "const") values.push_back(&v);
          else
            for (const auto& x : v.array()) values.push_back(&x);
          for (const Json* e : values) {
            if (!e->is_string()) continue;
            re += (first ? "" : "|") + RegexEscape(e->as_string());
            first = false;
          }
          re += first ? "(?!))$" : ")$";
          if (first) {
            names->push_back(CharDfa{});
            continue;
          }
        } else {
          return Unsupported("\"" + k + "\" in propertyNames at " + Where(PointerJoin(where, k)) +
                             " is not supported (pattern, minLength, maxLength, enum, const)");
        }
        LLM_ASSIGN_OR_RETURN(CharDfa d, PatternToDfa(re, Where(PointerJoin(where, k))));
        names->push_back(std::move(d));
      }
    } else {
      return InvalidArgument("propertyNames at " + Where(ptr) + " must be a schema");
    }
  }
  if (const Json* pp = s.Find("patternProperties")) {
    if (!pp->is_object()) return InvalidArgument("patternProperties at " + Where(ptr) + " must be an object");
    for (const auto& [re, sub] : pp->object()) {
      LLM_ASSIGN_OR_RETURN(CharDfa d, PatternToDfa(re, Where(PointerJoin(PointerJoin(ptr, "patternProperties"), re))));
      patterns->emplace_back(std::move(d), &sub);
    }
  }
  return Status::Ok();
}

StatusOr<std::pair<bool, std::vector<const Json*>>> Compiler::NameRules(const Json& s, const std::string& name,
                                                                       const std::string& ptr) {
  std::vector<CharDfa> names;
  std::vector<std::pair<CharDfa, const Json*>> patterns;
  LLM_RETURN_IF_ERROR(KeyAutomata(s, ptr, &names, &patterns));
  bool allowed = true;
  for (const auto& d : names) allowed = allowed && Accepts(d, name);
  std::vector<const Json*> extra;
  for (const auto& [d, sub] : patterns)
    if (Accepts(d, name)) extra.push_back(sub);
  return std::make_pair(allowed, extra);
}

StatusOr<std::string> Compiler::PatternKeys(const Json& s, const std::vector<std::string>& declared, const Json* additional,
                                            const std::string& ptr, const std::string& hint) {
  std::vector<CharDfa> names;
  std::vector<std::pair<CharDfa, const Json*>> patterns;
  LLM_RETURN_IF_ERROR(KeyAutomata(s, ptr, &names, &patterns));
  for (const auto& d : names)
    if (d.accept.empty()) return std::string();  // no key passes propertyNames
  // The declared names as a trie over code points.
  struct Trie {
    std::map<uint32_t, int32_t> next;
    bool terminal = false;
  };
  std::vector<Trie> trie(1);
  for (const auto& n : declared) {
    int32_t t = 0;
    for (uint32_t cp : CodePoints(n)) {
      auto it = trie[static_cast<size_t>(t)].next.find(cp);
      if (it == trie[static_cast<size_t>(t)].next.end()) {
        trie.emplace_back();
        it = trie[static_cast<size_t>(t)].next.emplace(cp, static_cast<int32_t>(trie.size()) - 1).first;
      }
      t = it->second;
    }
    trie[static_cast<size_t>(t)].terminal = true;
  }
  // Product states: each automaton's state (-1: it can no longer accept;
  // for propertyNames the key is then dead) and the trie node (-1: off it).
  const size_t nn = names.size(), np = patterns.size();
  using State = std::vector<int32_t>;  // names..., patterns..., trie
  std::map<State, int32_t> ids;
  std::vector<State> states;
  auto get = [&](const State& st) {
    auto [it, fresh] = ids.emplace(st, static_cast<int32_t>(states.size()));
    if (fresh) states.push_back(st);
    return it->second;
  };
  State start(nn + np + 1, 0);
  get(start);
  std::vector<std::vector<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, int32_t>>> edges;
  for (size_t i = 0; i < states.size(); ++i) {
    if (states.size() > kMaxProductStates)
      return InvalidArgument("patternProperties/propertyNames at " + Where(ptr) + ": more than " +
                             std::to_string(kMaxProductStates) + " key automaton states (the limit)");
    const State st = states[i];
    // The alphabet cut by every boundary in play.
    std::vector<uint32_t> cuts = {0};
    auto add_cuts = [&](const CharDfa& d, int32_t q) {
      if (q < 0 || static_cast<size_t>(q) >= d.edges.size()) return;
      for (const auto& e : d.edges[static_cast<size_t>(q)])
        for (auto [a, b] : e.chars) {
          cuts.push_back(a);
          cuts.push_back(b + 1);
        }
    };
    for (size_t k = 0; k < nn; ++k) add_cuts(names[k], st[k]);
    for (size_t k = 0; k < np; ++k) add_cuts(patterns[k].first, st[nn + k]);
    if (st.back() >= 0)
      for (const auto& [cp, child] : trie[static_cast<size_t>(st.back())].next) {
        cuts.push_back(cp);
        cuts.push_back(cp + 1);
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::map<int32_t, std::vector<std::pair<uint32_t, uint32_t>>> by_target;
    for (size_t c = 0; c < cuts.size(); ++c) {
      const uint32_t lo = cuts[c], hi = c + 1 < cuts.size() ? cuts[c + 1] - 1 : 0x10FFFF;
      if (lo > 0x10FFFF) continue;
      State nx(st.size());
      bool dead = false;
      for (size_t k = 0; k < nn && !dead; ++k) {
        nx[k] = names[k].Run(st[k], lo);
        dead = nx[k] < 0;
      }
      if (dead) continue;
      for (size_t k = 0; k < np; ++k) nx[nn + k] = patterns[k].first.Run(st[nn + k], lo);
      int32_t t = -1;
      if (st.back() >= 0) {
        auto it = trie[static_cast<size_t>(st.back())].next.find(lo);
        if (it != trie[static_cast<size_t>(st.back())].next.end() && hi == lo) t = it->second;
      }
      nx.back() = t;
      // Writable characters only (the patterns' sets already are; the
      // trie's and the free remainder are cut to them by CharsExpr).
      by_target[get(nx)].push_back({lo, hi});
    }
    edges.emplace_back();
    for (auto& [t, set] : by_target)  // (only sets a JSON string can write: liveness and rules agree)
      if (!CharsExpr(set).empty()) edges.back().emplace_back(std::move(set), t);
  }
  // Where a key may end: propertyNames accept, not a declared name, and a
  // value schema (the matching patterns', or additionalProperties).
  std::map<std::vector<int32_t>, std::string> value_rules;  // accepting patterns -> value expression ("" never)
  std::vector<std::string> ends(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    const State& st = states[i];
    bool ok = st.back() < 0 || !trie[static_cast<size_t>(st.back())].terminal;
    for (size_t k = 0; k < nn && ok; ++k) ok = names[k].accept[static_cast<size_t>(st[k])];
    if (!ok) continue;
    std::vector<int32_t> sig;
    for (size_t k = 0; k < np; ++k)
      if (st[nn + k] >= 0 && patterns[k].first.accept[static_cast<size_t>(st[nn + k])]) sig.push_back(static_cast<int32_t>(k));
    auto it = value_rules.find(sig);
    if (it == value_rules.end()) {
      std::string value;
      if (sig.empty()) {
        if (additional) {
          LLM_ASSIGN_OR_RETURN(value, Visit(*additional, PointerJoin(ptr, "additionalProperties"), hint + "-additional"));
        }
      } else {
        std::vector<Json> parts;
        for (int32_t k : sig) parts.push_back(*patterns[static_cast<size_t>(k)].second);
        const Json both = parts.size() == 1 ? parts[0] : Json::Object({{"allOf", Json::Array(std::move(parts))}});
        LLM_ASSIGN_OR_RETURN(value, Visit(both, PointerJoin(ptr, "patternProperties"), hint + "-pattern"));
      }
      it = value_rules.emplace(sig, value).first;
    }
    ends[i] = it->second;
  }
  // Keep the states from which a key can end with a value.
  std::vector<bool> live(states.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = states.size(); i-- > 0;) {
      if (live[i]) continue;
      bool l = !IsNever(ends[i]);
      for (const auto& [set, t] : edges[i]) l = l || live[static_cast<size_t>(t)];
      if (l) live[i] = changed = true;
    }
  }
  if (!live[0]) return std::string();
  const std::string ws = Builtin(kWs);
  std::vector<std::string> rule(states.size());
  for (size_t i = 0; i < states.size(); ++i)
    if (live[i]) rule[i] = NewName(hint + "-key");
  for (size_t i = 0; i < states.size(); ++i) {
    if (!live[i]) continue;
    std::vector<std::string> alts;
    for (const auto& [set, t] : edges[i]) {
      if (!live[static_cast<size_t>(t)]) continue;
      const std::string chars = CharsExpr(set);
      if (!chars.empty()) alts.push_back(chars + " " + rule[static_cast<size_t>(t)]);
    }
    if (!IsNever(ends[i])) alts.push_back("\"\\\"\" " + ws + " \":\" " + ws + " " + ends[i]);
    std::string body = alts.size() == 1 ? alts[0] : "(";
    if (alts.size() > 1) {
      for (size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : " ") + alts[a];
      body += " )";
    }
    rules_.emplace_back(rule[i], alts.empty() ? std::string("\"\"") : body);
  }
  pattern_keys_ = true;  // free keys: the matcher must keep them unique (json_keys.h)
  return "\"\\\"\" " + rule[0];
}

}  // namespace llm::schema
