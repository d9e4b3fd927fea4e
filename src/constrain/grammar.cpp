#include "constrain/grammar.h"

#include <algorithm>
#include <functional>

namespace llm::constrain {

std::vector<CodeRange> NormaliseRanges(std::vector<CodeRange> r) {
  std::erase_if(r, [](const CodeRange& c) { return c.lo > c.hi || c.lo > kMaxCodePoint; });
  for (CodeRange& c : r) c.hi = std::min(c.hi, kMaxCodePoint);
  std::sort(r.begin(), r.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> out;
  for (const CodeRange& c : r) {
    if (!out.empty() && c.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, c.hi);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<CodeRange> ComplementRanges(const std::vector<CodeRange>& r) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& c : r) {
    if (c.lo > next) out.push_back({next, c.lo - 1});
    next = c.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  // Surrogates are not code points UTF-8 can carry.
  std::vector<CodeRange> cut;
  for (const CodeRange& c : out) {
    if (c.hi < 0xD800 || c.lo > 0xDFFF) {
      cut.push_back(c);
      continue;
    }
    if (c.lo < 0xD800) cut.push_back({c.lo, 0xD7FF});
    if (c.hi > 0xDFFF) cut.push_back({0xE000, c.hi});
  }
  return cut;
}

Element Element::Chars(std::vector<CodeRange> r) {
  Element e;
  e.kind = Kind::kChars;
  e.ranges = NormaliseRanges(std::move(r));
  return e;
}

Element Element::Ref(int32_t rule) {
  Element e;
  e.kind = Kind::kRule;
  e.rule = rule;
  return e;
}

Status LimitExceeded(const std::string& what) { return InvalidArgument("limit: " + what); }

bool IsLimitExceeded(const Status& s) {
  return s.code() == LLM_ERR_INVALID_ARGUMENT && s.message().find("limit: ") != std::string::npos;
}

std::string LimitWhat(const Status& s) {
  const size_t at = s.message().find("limit: ");
  return at == std::string::npos ? s.message() : s.message().substr(at + 7) + " (a grammar limit)";
}

Status GrammarBuilder::CountElements(size_t n) {
  n_elements_ += static_cast<int64_t>(n) + 1;
  if (n_elements_ > kMaxElements)
    return LimitExceeded("grammar too large: more than " + std::to_string(kMaxElements) +
                           " elements after expanding repetitions");
  return Status::Ok();
}

StatusOr<int32_t> GrammarBuilder::AddRule(std::string name) {
  if (static_cast<int32_t>(g_.rules.size()) >= kMaxRules)
    return LimitExceeded("grammar too large: more than " + std::to_string(kMaxRules) +
                           " rules after expanding repetitions");
  const int32_t id = static_cast<int32_t>(g_.rules.size());
  names_.emplace(name, id);
  g_.rules.push_back(Rule{std::move(name), {}, false});
  return id;
}

StatusOr<int32_t> GrammarBuilder::RuleId(const std::string& name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  return AddRule(name);
}

StatusOr<int32_t> GrammarBuilder::NewHelper(const std::string& base) {
  std::string name;
  do {
    // "#" cannot occur in a rule name the grammar text spells, so a helper
    // never takes the name of a rule defined further down (issue 29).
    name = base + "#" + std::to_string(++n_helpers_);
  } while (names_.count(name) != 0);
  LLM_ASSIGN_OR_RETURN(int32_t id, AddRule(std::move(name)));
  g_.rules[static_cast<size_t>(id)].defined = true;
  return id;
}

Status GrammarBuilder::AddAlt(int32_t rule, Alternative alt) {
  LLM_RETURN_IF_ERROR(CountElements(alt.size()));
  Rule& r = g_.rules[static_cast<size_t>(rule)];
  r.defined = true;
  r.alts.push_back(std::move(alt));
  return Status::Ok();
}

StatusOr<Element> GrammarBuilder::Repeat(const Alternative& body, int32_t min, int32_t max, const std::string& base) {
  if (min < 0 || min > kMaxRepeat || max > kMaxRepeat)
    return LimitExceeded("repetition count above " + std::to_string(kMaxRepeat));
  if (max >= 0 && max < min) return InvalidArgument("repetition {m,n} with n < m");
  // Expanding m + (n - m) copies of the body: refuse before allocating.
  const int64_t copies = static_cast<int64_t>(max < 0 ? min + 1 : max);
  if (copies * static_cast<int64_t>(body.size() + 1) + n_elements_ > kMaxElements)
    return LimitExceeded("grammar too large: a repetition expands to more than " + std::to_string(kMaxElements) +
                           " elements");
  Alternative seq;
  for (int32_t i = 0; i < min; ++i) seq.insert(seq.end(), body.begin(), body.end());
  CountedRepeat rep;
  rep.min = min;
  rep.body_len = static_cast<int32_t>(body.size());
  if (max < 0) {
    LLM_ASSIGN_OR_RETURN(int32_t star, NewHelper(base));
    Alternative loop = body;
    loop.push_back(Element::Ref(star));
    LLM_RETURN_IF_ERROR(AddAlt(star, std::move(loop)));
    LLM_RETURN_IF_ERROR(AddAlt(star, {}));
    seq.push_back(Element::Ref(star));
  } else if (max > min) {
    int32_t inner = -1;  // O_k ::= body O_{k-1} | ""
    for (int32_t k = 0; k < max - min; ++k) {
      LLM_ASSIGN_OR_RETURN(int32_t opt, NewHelper(base));
      Alternative a = body;
      if (inner >= 0) a.push_back(Element::Ref(inner));
      LLM_RETURN_IF_ERROR(AddAlt(opt, std::move(a)));
      LLM_RETURN_IF_ERROR(AddAlt(opt, {}));
      rep.opt_rules.push_back(opt);
      inner = opt;
    }
    seq.push_back(Element::Ref(inner));
  }
  LLM_ASSIGN_OR_RETURN(int32_t r, NewHelper(base));
  LLM_RETURN_IF_ERROR(AddAlt(r, std::move(seq)));
  // Only counts long enough for the mask cache to fold are worth recording.
  rep.seq_rule = r;
  if (!body.empty() && (min > 2 || rep.opt_rules.size() > 2)) g_.repeats.push_back(std::move(rep));
  return Element::Ref(r);
}

StatusOr<Grammar> GrammarBuilder::Finish(const std::string& root_name) {
  auto it = names_.find(root_name);
  if (it == names_.end() || !g_.rules[static_cast<size_t>(it->second)].defined)
    return InvalidArgument("grammar has no rule '" + root_name + "'");
  for (const Rule& r : g_.rules) {
    if (!r.defined) return InvalidArgument("rule '" + r.name + "' is used but never defined");
  }
  const size_t n = g_.rules.size();
  // Nullable rules, to a fixpoint.
  std::vector<uint8_t> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (nullable[i]) continue;
      for (const Alternative& a : g_.rules[i].alts) {
        bool all = std::all_of(a.begin(), a.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kRule && nullable[static_cast<size_t>(e.rule)];
        });
        if (all) {
          nullable[i] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // "A can begin with B without consuming input" edges; a cycle is left
  // recursion, on which the matcher's expansion would never end.
  std::vector<std::vector<int32_t>> left(n);
  for (size_t i = 0; i < n; ++i) {
    for (const Alternative& a : g_.rules[i].alts) {
      for (const Element& e : a) {
        if (e.kind != Element::Kind::kRule) break;
        left[i].push_back(e.rule);
        if (!nullable[static_cast<size_t>(e.rule)]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<int32_t> path;
  std::string cycle;
  // Iterative DFS: a hostile grammar's chain of rules must not overflow the C++ stack.
  for (size_t start = 0; start < n && cycle.empty(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(start), 0}};
    color[start] = 1;
    while (!stack.empty() && cycle.empty()) {
      auto& [u, k] = stack.back();
      const auto& next = left[static_cast<size_t>(u)];
      if (k == next.size()) {
        color[static_cast<size_t>(u)] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t v = next[k++];
      if (color[static_cast<size_t>(v)] == 1) {
        size_t from = 0;
        while (stack[from].first != v) ++from;
        for (size_t j = from; j < stack.size(); ++j) cycle += g_.rules[static_cast<size_t>(stack[j].first)].name + " -> ";
        cycle += g_.rules[static_cast<size_t>(v)].name;
      } else if (color[static_cast<size_t>(v)] == 0) {
        color[static_cast<size_t>(v)] = 1;
        stack.emplace_back(v, 0);
      }
    }
  }
  if (!cycle.empty())
    return InvalidArgument("grammar is left-recursive (or repeats something that can match the empty string): " +
                           cycle + " (rewrite it right-recursively, e.g. x ::= y x | y)");
  g_.root = it->second;
  return std::move(g_);
}

}  // namespace llm::constrain
