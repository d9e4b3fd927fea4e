#include "constrain/schema_pattern.h"

#include "constrain/unicode_classes.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "constrain/grammar_text.h"
#include "util/utf8.h"

namespace llm {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;
// Counted repetitions above this would blow up the grammar the engine
// expands; a pattern asking for more is refused rather than truncated.
constexpr int kMaxRepeat = 1000;
// The free end of an unanchored pattern (an accepting state every
// character leads back to) stops this many characters on: a sound
// narrowing that keeps the string finite, so a model cannot wander on
// inside it (SmolLM2 ran "[0-9]{3}" unanchored into the length limit 6
// times in 20).
constexpr int kFreeTail = 128;
// Bounds on the automata of one pattern (hostile patterns are refused).
constexpr size_t kMaxNfaStates = 100000;
constexpr size_t kMaxDfaStates = 4000;
constexpr size_t kMaxRules = 20000;  // after the product with length bounds

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges n = Normalize(r), out;
  uint32_t next = 0;
  for (auto& x : n) {
    if (x.first > next) out.push_back({next, x.first - 1});
    next = x.second + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

bool Contains(const Ranges& r, uint32_t cp) {
  for (auto& x : r)
    if (cp >= x.first && cp <= x.second) return true;
  return false;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

// The characters a JSON string can hold as SetExpr writes them: raw from
// U+0020 (but 0x7F and surrogates), and ", \, \t, \n, \r escaped.
const Ranges& Writable() {
  static const Ranges w = {{'\t', '\n'}, {'\r', '\r'}, {0x20, 0x7E}, {0x80, 0xD7FF}, {0xE000, kMaxCp}};
  return w;
}

Ranges Intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (auto x : Normalize(a))
    for (auto y : b) {
      const uint32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return Normalize(out);
}

// A set of characters as JSON-string text: the characters a JSON string may
// hold raw (U+0020 and up, except " and \ and surrogates) in one class,
// plus the escaped forms of ", \, \t, \n, \r when the set has them.
std::string SetExpr(const Ranges& set) {
  Ranges raw;
  for (auto [a, b] : Normalize(set)) {
    // Cut out [0,0x1F], '"', '\\', 0x7F and the surrogates.
    const std::pair<uint32_t, uint32_t> holes[] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}, {0xD800, 0xDFFF}};
    std::vector<std::pair<uint32_t, uint32_t>> parts = {{a, b}};
    for (auto h : holes) {
      std::vector<std::pair<uint32_t, uint32_t>> next;
      for (auto p : parts) {
        if (p.second < h.first || p.first > h.second) {
          next.push_back(p);
          continue;
        }
        if (p.first < h.first) next.push_back({p.first, h.first - 1});
        if (p.second > h.second) next.push_back({h.second + 1, p.second});
      }
      parts = std::move(next);
    }
    raw.insert(raw.end(), parts.begin(), parts.end());
  }
  std::vector<std::string> alts;
  if (!raw.empty()) {
    std::string cls = "[";
    for (auto [a, b] : raw) {
      cls += gbnf::ClassChar(a);
      if (b != a) cls += "-" + gbnf::ClassChar(b);
    }
    alts.push_back(cls + "]");
  }
  const std::pair<uint32_t, const char*> escaped[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\t', "\\t"}, {'\n', "\\n"}, {'\r', "\\r"}};
  for (auto [cp, text] : escaped)
    if (Contains(set, cp)) alts.push_back(gbnf::Literal(text));
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}


// The pattern as a tree, then a Thompson NFA over character sets, then a
// DFA (subset construction over the blocks the sets' boundaries cut the
// code points into). The grammar written from the DFA is deterministic:
// one stack per state whatever the nesting of quantifiers, so the matcher
// never meets the ambiguity that (a*)* written as GBNF has (its stack sets
// grew with the number of parses and hit the limit, a dead end where EOS
// was allowed inside the string).
struct Node {
  enum Kind { kSet, kCat, kAlt, kRep } kind;
  Ranges set;              // kSet (writable characters only)
  std::vector<int> kids;   // kCat, kAlt; kRep: one
  int min = 0, max = -1;   // kRep; max -1: open
};

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  // Top-level alternatives, each with whether it is anchored at the start
  // and at the end.
  struct TopAlt {
    int node;
    bool start, end;
  };
  StatusOr<std::vector<TopAlt>> Top() {
    std::vector<TopAlt> alts;
    while (true) {
      bool start = false;
      if (Peek('^')) {
        ++pos_;
        start = true;
      }
      LLM_ASSIGN_OR_RETURN(int seq, Sequence(/*top=*/true));
      bool end = false;
      if (Peek('$')) {
        ++pos_;
        end = true;
      }
      alts.push_back({seq, start, end});
      if (pos_ >= p_.size()) break;
      if (Peek('|')) {
        ++pos_;
        continue;
      }
      if (Peek('$') || Peek('^')) return Err(Unsupported, "an anchor inside the pattern");
      return Err(InvalidArgument, "unbalanced ')'");
    }
    return alts;
  }

  std::vector<Node> nodes;

 private:
  using MakeStatus = Status (*)(std::string);

  Status Err(MakeStatus make, const std::string& what) const {
    return make("pattern: " + what + " at offset " + std::to_string(pos_));
  }
  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  int Add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  }

  StatusOr<int> Alternation() {
    Node alt{Node::kAlt, {}, {}};
    while (true) {
      LLM_ASSIGN_OR_RETURN(int seq, Sequence(false));
      alt.kids.push_back(seq);
      if (!Peek('|')) break;
      ++pos_;
    }
    if (alt.kids.size() == 1) return alt.kids[0];
    return Add(std::move(alt));
  }

  // Items until '|', ')' or the end (and, at the top, before a final '$').
  StatusOr<int> Sequence(bool top) {
    Node cat{Node::kCat, {}, {}};
    while (pos_ < p_.size() && !Peek('|') && !Peek(')')) {
      if (top && Peek('$') && pos_ + 1 == p_.size()) break;
      if (top && Peek('$') && pos_ + 1 < p_.size() && p_[pos_ + 1] == '|') break;
      if (Peek('^') || Peek('$')) return Err(Unsupported, "an anchor inside the pattern");
      LLM_ASSIGN_OR_RETURN(int atom, Atom());
      LLM_ASSIGN_OR_RETURN(int q, Quantified(atom));
      cat.kids.push_back(q);
    }
    if (top && Peek(')')) return Err(InvalidArgument, "unbalanced ')'");
    return Add(std::move(cat));
  }

  StatusOr<int> Number() {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = v * 10 + (p_[pos_] - '0');
      if (v > 1000000) return Err(Unsupported, "a repetition count above 1000000");
      ++pos_;
    }
    if (pos_ == start) return Err(InvalidArgument, "a number expected in {}");
    return static_cast<int>(v);
  }

  StatusOr<int> Quantified(int atom) {
    while (pos_ < p_.size()) {
      const char c = p_[pos_];
      int lo = 0, hi = -1;
      if (c == '*' || c == '+') {
        ++pos_;
        lo = c == '+' ? 1 : 0;
      } else if (c == '?') {
        ++pos_;
        hi = 1;
      } else if (c == '{') {
        ++pos_;
        LLM_ASSIGN_OR_RETURN(lo, Number());
        hi = lo;
        if (Peek(',')) {
          ++pos_;
          if (Peek('}')) {
            hi = -1;
          } else {
            LLM_ASSIGN_OR_RETURN(hi, Number());
          }
        }
        if (!Peek('}')) return Err(InvalidArgument, "'}' expected");
        ++pos_;
        if (hi >= 0 && hi < lo) return Err(InvalidArgument, "{n,m} with m < n");
        if (lo > kMaxRepeat) return Err(Unsupported, "a repetition count above " + std::to_string(kMaxRepeat));
        // A long optional run ({1,2048} in an ARN) stops kFreeTail past its
        // minimum, like a long maxLength (sound: a narrowing).
        if (hi > kMaxRepeat) hi = std::min(hi, lo + kFreeTail);
      } else {
        break;
      }
      if (Peek('?')) ++pos_;  // lazy: the same language
      else if (Peek('+')) return Err(Unsupported, "a possessive quantifier");
      Node rep{Node::kRep, {}, {atom}};
      rep.min = lo;
      rep.max = hi;
      atom = Add(std::move(rep));
    }
    return atom;
  }

  StatusOr<uint32_t> HexDigits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= p_.size()) return Err(InvalidArgument, "a truncated escape");
      const char c = p_[pos_++];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return Err(InvalidArgument, "a bad hex digit in an escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }
  // After a backslash: a set of characters (single ones as one range).
  StatusOr<Ranges> Escape(bool in_class) {
    if (pos_ >= p_.size()) return Err(InvalidArgument, "a trailing backslash");
    const char c = p_[pos_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return Complement(kDigit);
      case 'w': return kWord;
      case 'W': return Complement(kWord);
      case 's': return kSpace;
      case 'S': return Complement(kSpace);
      case 'n': return Ranges{{'\n', '\n'}};
      case 't': return Ranges{{'\t', '\t'}};
      case 'r': return Ranges{{'\r', '\r'}};
      case 'f': return Ranges{{'\f', '\f'}};
      case 'v': return Ranges{{'\v', '\v'}};
      case '0': return Ranges{{0, 0}};
      case 'x': {
        LLM_ASSIGN_OR_RETURN(uint32_t v, HexDigits(2));
        return Ranges{{v, v}};
      }
      case 'u': {
        LLM_ASSIGN_OR_RETURN(uint32_t v, HexDigits(4));
        return Ranges{{v, v}};
      }
      case 'p':
      case 'P': {
        // \p{Name} / \pL: a Unicode general category (unicode_classes.h).
        std::string_view name;
        if (Peek('{')) {
          const size_t end = p_.find('}', pos_);
          if (end == std::string_view::npos) return Err(InvalidArgument, "an unterminated \\p{");
          name = p_.substr(pos_ + 1, end - pos_ - 1);
          pos_ = end + 1;
        } else if (pos_ < p_.size()) {
          name = p_.substr(pos_++, 1);
        }
        Ranges set;
        if (!constrain::UnicodeCategory(name, &set))
          return Err(Unsupported, "the Unicode property \\" + std::string(1, c) + "{" + std::string(name) +
                                      "} (general categories only: L, Lu, N, Nd, Z, ...)");
        return c == 'P' ? Complement(set) : Normalize(set);
      }
      case 'b':
        if (in_class) return Ranges{{'\b', '\b'}};
        return Err(Unsupported, "a word boundary (\\b)");
      default:
        break;
    }
    if ((c >= '1' && c <= '9') || c == 'k') return Err(Unsupported, "a backreference");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return Err(Unsupported, std::string("the escape \\") + c);
    --pos_;
    return Literal();  // escaped punctuation or a non-ASCII character
  }

  // One (possibly multi-byte) literal character at pos_.
  StatusOr<Ranges> Literal() {
    uint32_t cp = 0;
    size_t len = 1;
    if (!DecodeUtf8(p_, pos_, &cp, &len)) return Err(InvalidArgument, "invalid UTF-8");
    pos_ += len;
    return Ranges{{cp, cp}};
  }

  StatusOr<int> Class() {
    bool negate = false;
    if (Peek('^')) {
      negate = true;
      ++pos_;
    }
    Ranges set;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return Err(InvalidArgument, "an unterminated class");
      if (Peek(']') && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (Peek('[') && pos_ + 1 < p_.size() && p_[pos_ + 1] == ':')
        return Err(Unsupported, "a POSIX class");
      Ranges lo;
      if (Peek('\\')) {
        ++pos_;
        LLM_ASSIGN_OR_RETURN(lo, Escape(true));
      } else {
        LLM_ASSIGN_OR_RETURN(lo, Literal());
      }
      // A range a-b (a '-' first, last or after a set escape is literal).
      if (lo.size() == 1 && lo[0].first == lo[0].second && Peek('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi;
        if (Peek('\\')) {
          ++pos_;
          LLM_ASSIGN_OR_RETURN(hi, Escape(true));
        } else {
          LLM_ASSIGN_OR_RETURN(hi, Literal());
        }
        if (hi.size() != 1 || hi[0].first != hi[0].second) return Err(InvalidArgument, "a class range ending in a set");
        if (hi[0].first < lo[0].first) return Err(InvalidArgument, "a class range out of order");
        set.push_back({lo[0].first, hi[0].first});
        continue;
      }
      set.insert(set.end(), lo.begin(), lo.end());
    }
    if (negate) set = Complement(set);
    set = Intersect(set, Writable());
    if (set.empty()) return Err(Unsupported, "a class no JSON string character can match");
    return Add(Node{Node::kSet, std::move(set), {}});
  }

  StatusOr<int> Atom() {
    const char c = p_[pos_];
    if (c == '(') {
      // Each group level is three frames of this recursive descent: bound
      // it, so a hostile pattern is an error and not a stack overflow.
      if (depth_ >= kMaxGroupDepth)
        return Err(InvalidArgument, "groups nested deeper than " + std::to_string(kMaxGroupDepth));
      ++pos_;
      if (Peek('?')) {
        ++pos_;
        if (Peek(':')) {
          ++pos_;
        } else if (p_.substr(pos_, 2) == "s)" && !dot_seen_) {
          // (?s) before any '.': the whole pattern's '.' matches a newline
          // too (Python's DOTALL, which jsonschema validates with).
          pos_ += 2;
          dotall_ = true;
          return Add(Node{Node::kCat, {}, {}});
        } else if (Peek('P') && pos_ + 1 < p_.size() && p_[pos_ + 1] == '<') {
          pos_ = p_.find('>', pos_);
          if (pos_ == std::string_view::npos) { pos_ = p_.size(); return Err(InvalidArgument, "an unterminated group name"); }
          ++pos_;
        } else if (Peek('<') && pos_ + 1 < p_.size() && p_[pos_ + 1] != '=' && p_[pos_ + 1] != '!') {
          pos_ = p_.find('>', pos_);
          if (pos_ == std::string_view::npos) { pos_ = p_.size(); return Err(InvalidArgument, "an unterminated group name"); }
          ++pos_;
        } else {
          return Err(Unsupported, "lookaround or inline flags '(?'");
        }
      }
      ++depth_;
      auto group = Alternation();
      --depth_;
      LLM_ASSIGN_OR_RETURN(int inner, std::move(group));
      if (!Peek(')')) return Err(InvalidArgument, "')' expected");
      ++pos_;
      return inner;
    }
    if (c == '[') {
      ++pos_;
      return Class();
    }
    Ranges set;
    if (c == '.') {
      ++pos_;
      dot_seen_ = true;
      set = dotall_ ? Complement({}) : Complement({{'\n', '\n'}});
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      return Err(InvalidArgument, "nothing to repeat");
    } else if (c == '\\') {
      ++pos_;
      LLM_ASSIGN_OR_RETURN(set, Escape(false));
    } else {
      LLM_ASSIGN_OR_RETURN(set, Literal());
    }
    set = Intersect(set, Writable());
    if (set.empty()) return Err(Unsupported, "a character a JSON string cannot hold");
    return Add(Node{Node::kSet, std::move(set), {}});
  }

  std::string_view p_;
  size_t pos_ = 0;
  static constexpr int kMaxGroupDepth = 100;
  int depth_ = 0;  // groups open around pos_
  bool dotall_ = false;   // (?s) seen
  bool dot_seen_ = false;  // a '.' parsed (a later (?s) would change it)
};

// ---- Thompson NFA
struct NfaState {
  std::vector<int> eps;
  int set = -1;   // index into Nfa::sets: one character of it leads to `next`
  int next = -1;
};
struct Nfa {
  std::vector<NfaState> states;
  std::vector<Ranges> sets;
  bool overflow = false;
  int New() {
    if (states.size() >= kMaxNfaStates) overflow = true;
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }
};
struct Frag {
  int start, end;
};

Frag Build(const std::vector<Node>& nodes, int n, Nfa* nfa) {
  const Node& node = nodes[static_cast<size_t>(n)];
  const int s = nfa->New(), e = nfa->New();
  if (nfa->overflow) return {s, e};
  switch (node.kind) {
    case Node::kSet:
      nfa->sets.push_back(node.set);
      nfa->states[static_cast<size_t>(s)].set = static_cast<int>(nfa->sets.size()) - 1;
      nfa->states[static_cast<size_t>(s)].next = e;
      break;
    case Node::kCat: {
      int cur = s;
      for (int k : node.kids) {
        const Frag f = Build(nodes, k, nfa);
        if (nfa->overflow) return {s, e};
        nfa->states[static_cast<size_t>(cur)].eps.push_back(f.start);
        cur = f.end;
      }
      nfa->states[static_cast<size_t>(cur)].eps.push_back(e);
      break;
    }
    case Node::kAlt:
      for (int k : node.kids) {
        const Frag f = Build(nodes, k, nfa);
        if (nfa->overflow) return {s, e};
        nfa->states[static_cast<size_t>(s)].eps.push_back(f.start);
        nfa->states[static_cast<size_t>(f.end)].eps.push_back(e);
      }
      break;
    case Node::kRep: {
      int cur = s;
      for (int i = 0; i < node.min; ++i) {  // the required copies
        const Frag f = Build(nodes, node.kids[0], nfa);
        if (nfa->overflow) return {s, e};
        nfa->states[static_cast<size_t>(cur)].eps.push_back(f.start);
        cur = f.end;
      }
      if (node.max < 0) {  // then a loop
        const Frag f = Build(nodes, node.kids[0], nfa);
        if (nfa->overflow) return {s, e};
        nfa->states[static_cast<size_t>(cur)].eps.push_back(f.start);
        nfa->states[static_cast<size_t>(f.end)].eps.push_back(cur);
      } else {  // or optional copies, each a way out
        for (int i = node.min; i < node.max; ++i) {
          const Frag f = Build(nodes, node.kids[0], nfa);
          if (nfa->overflow) return {s, e};
          nfa->states[static_cast<size_t>(cur)].eps.push_back(f.start);
          nfa->states[static_cast<size_t>(cur)].eps.push_back(e);
          cur = f.end;
        }
      }
      nfa->states[static_cast<size_t>(cur)].eps.push_back(e);
      break;
    }
  }
  return {s, e};
}

void Closure(const Nfa& nfa, std::vector<int>* set) {
  std::vector<char> seen(nfa.states.size(), 0);
  std::vector<int> stack = *set;
  for (int x : *set) seen[static_cast<size_t>(x)] = 1;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    for (int y : nfa.states[static_cast<size_t>(x)].eps)
      if (!seen[static_cast<size_t>(y)]) {
        seen[static_cast<size_t>(y)] = 1;
        set->push_back(y);
        stack.push_back(y);
      }
  }
  std::sort(set->begin(), set->end());
}

// ---- DFA over character blocks
struct Dfa {
  // The alphabet: disjoint classes of code points that every set of the
  // pattern holds wholly or not at all (\p{L} is hundreds of ranges, one class).
  std::vector<Ranges> blocks;
  std::vector<std::vector<int>> next;                  // (states, blocks) -1: none
  std::vector<bool> accept;
};

StatusOr<Dfa> Determinize(const Nfa& nfa, int start, int final_state, const std::string& where) {
  Dfa d;
  std::vector<uint32_t> cuts = {0};  // the blocks partition all code points
  for (const auto& set : nfa.sets)
    for (auto [a, b] : set) {
      cuts.push_back(a);
      if (b < kMaxCp) cuts.push_back(b + 1);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // Intervals between cuts, grouped by the sets that hold them (an
  // interval lies wholly inside or outside each set): one block per group.
  std::map<std::vector<int>, int> by_sets;
  std::vector<std::vector<int>> covers(nfa.sets.size());
  std::vector<Ranges> sorted;  // each set normalized, for a binary search
  for (const auto& set : nfa.sets) sorted.push_back(Normalize(set));
  auto holds = [](const Ranges& r, uint32_t cp) {
    auto it = std::upper_bound(r.begin(), r.end(), cp, [](uint32_t c, const std::pair<uint32_t, uint32_t>& x) { return c < x.first; });
    return it != r.begin() && std::prev(it)->second >= cp;
  };
  for (size_t i = 0; i < cuts.size(); ++i) {
    const uint32_t lo = cuts[i], hi = i + 1 < cuts.size() ? cuts[i + 1] - 1 : kMaxCp;
    Ranges part = Intersect({{lo, hi}}, Writable());
    if (part.empty()) continue;
    std::vector<int> in;
    for (size_t k = 0; k < nfa.sets.size(); ++k)
      if (holds(sorted[k], lo)) in.push_back(static_cast<int>(k));
    auto [it, fresh] = by_sets.emplace(in, static_cast<int>(d.blocks.size()));
    if (fresh) {
      d.blocks.emplace_back();
      for (int k : in) covers[static_cast<size_t>(k)].push_back(it->second);
    }
    Ranges& b = d.blocks[static_cast<size_t>(it->second)];
    b.insert(b.end(), part.begin(), part.end());
  }
  std::map<std::vector<int>, int> ids;
  std::vector<std::vector<int>> sets;
  auto intern = [&](std::vector<int> s) -> int {
    Closure(nfa, &s);
    auto [it, fresh] = ids.emplace(s, static_cast<int>(sets.size()));
    if (fresh) {
      sets.push_back(std::move(s));
      d.accept.push_back(std::binary_search(sets.back().begin(), sets.back().end(), final_state));
    }
    return it->second;
  };
  intern({start});
  std::vector<std::vector<int>> by_block(d.blocks.size());
  for (size_t i = 0; i < sets.size(); ++i) {
    if (sets.size() > kMaxDfaStates) return InvalidArgument("pattern at " + where + ": more than " + std::to_string(kMaxDfaStates) + " automaton states");
    for (auto& v : by_block) v.clear();
    for (int x : sets[i]) {
      const NfaState& st = nfa.states[static_cast<size_t>(x)];
      if (st.set < 0) continue;
      for (int b : covers[static_cast<size_t>(st.set)]) by_block[static_cast<size_t>(b)].push_back(st.next);
    }
    std::vector<int> row(d.blocks.size(), -1);
    for (size_t b = 0; b < d.blocks.size(); ++b) {
      if (by_block[b].empty()) continue;
      std::sort(by_block[b].begin(), by_block[b].end());
      by_block[b].erase(std::unique(by_block[b].begin(), by_block[b].end()), by_block[b].end());
      row[b] = intern(by_block[b]);
    }
    d.next.push_back(std::move(row));
  }
  return d;
}

}  // namespace

StatusOr<PatternAutomaton> CompilePattern(std::string_view pattern, int64_t min_len, int64_t max_len,
                                          std::string_view any_char, const std::string& where) {
  Parser parser(pattern);
  LLM_ASSIGN_OR_RETURN(auto alts, parser.Top());
  // A pattern is searched: an unanchored side gets any characters.
  const int any = static_cast<int>(parser.nodes.size());
  parser.nodes.push_back(Node{Node::kSet, Writable(), {}});
  const int any_star = static_cast<int>(parser.nodes.size());
  parser.nodes.push_back(Node{Node::kRep, {}, {any}});
  Nfa nfa;
  const int start = nfa.New(), final_state = nfa.New();
  for (const auto& a : alts) {
    Node cat{Node::kCat, {}, {}};
    if (!a.start) cat.kids.push_back(any_star);
    cat.kids.push_back(a.node);
    if (!a.end) cat.kids.push_back(any_star);
    parser.nodes.push_back(std::move(cat));
    const Frag f = Build(parser.nodes, static_cast<int>(parser.nodes.size()) - 1, &nfa);
    if (nfa.overflow) return InvalidArgument("pattern at " + where + ": expands to more than " + std::to_string(kMaxNfaStates) + " states");
    nfa.states[static_cast<size_t>(start)].eps.push_back(f.start);
    nfa.states[static_cast<size_t>(f.end)].eps.push_back(final_state);
  }
  LLM_ASSIGN_OR_RETURN(Dfa dfa, Determinize(nfa, start, final_state, where));
  const size_t n = dfa.accept.size(), nb = dfa.blocks.size();

  // Free tails: accepting states every writable character leads back to.
  std::vector<bool> sink(n, false);
  for (size_t q = 0; q < n; ++q) {
    if (!dfa.accept[q]) continue;
    sink[q] = std::all_of(dfa.next[q].begin(), dfa.next[q].end(), [&](int t) { return t == static_cast<int>(q); });
  }
  // The lengths the pattern itself allows, over states that can still
  // accept: when they lie within the bounds, no counter is needed (and the
  // mask cache keeps seeing the same few states).
  std::vector<bool> can_accept(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t q = 0; q < n; ++q) {
      if (can_accept[q]) continue;
      bool l = dfa.accept[q];
      for (int t : dfa.next[q]) l = l || (t >= 0 && can_accept[static_cast<size_t>(t)]);
      if (l) can_accept[q] = changed = true;
    }
  }
  int64_t shortest = -1, longest = 0;  // longest -1: unbounded
  {
    std::vector<int64_t> dist(n, -1);
    std::vector<size_t> queue = {0};
    dist[0] = 0;
    for (size_t h = 0; h < queue.size(); ++h) {
      const size_t q = queue[h];
      if (dfa.accept[q] && shortest < 0) shortest = dist[q];
      for (int t : dfa.next[q])
        if (t >= 0 && dist[static_cast<size_t>(t)] < 0) {
          dist[static_cast<size_t>(t)] = dist[q] + 1;
          queue.push_back(static_cast<size_t>(t));
        }
    }
    // Longest: a cycle through live, non-sink states is unbounded; else a
    // longest path (memoised depth-first), a sink adding its free tail.
    std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<int64_t> best(n, 0);
    bool cyclic = false;
    std::function<void(size_t)> dfs = [&](size_t q) {
      mark[q] = 1;
      int64_t b = sink[q] ? kFreeTail : 0;
      if (!sink[q]) {
        for (int t : dfa.next[q]) {
          if (t < 0 || !can_accept[static_cast<size_t>(t)]) continue;
          if (mark[static_cast<size_t>(t)] == 1) cyclic = true;
          if (mark[static_cast<size_t>(t)] == 0) dfs(static_cast<size_t>(t));
          b = std::max(b, best[static_cast<size_t>(t)] + 1);
        }
      }
      best[q] = b;
      mark[q] = 2;
    };
    if (can_accept[0]) dfs(0);
    longest = cyclic ? -1 : best[0];
  }
  if (shortest >= min_len && max_len >= 0 && longest >= 0 && longest <= max_len) max_len = -1, min_len = 0;
  if (shortest >= min_len && max_len < 0) min_len = 0;
  // A cyclic pattern under a long maxLength (ARNs of "maxLength": 2048):
  // the string stops kFreeTail characters past the length it needs, as an
  // unanchored pattern's free end does (sound: a narrowing; the counter
  // then multiplies the states by ~kFreeTail, not by maxLength).
  if (longest < 0 && max_len >= 0) max_len = std::min(max_len, std::max(min_len, shortest) + kFreeTail);
  // A counter up to max_len multiplies the states: narrow max_len (sound)
  // to what the limit allows, as long as it stays at or above min_len.
  // (An acyclic DFA needs no narrowing: each state is reached at few
  // lengths, so the product stays near its own size.)
  if (longest < 0 && max_len >= 0 && static_cast<size_t>(max_len + 1) * n > kMaxRules) {
    const int64_t fit = static_cast<int64_t>(kMaxRules / n) - 1;
    if (fit < min_len || fit < shortest)
      return InvalidArgument("pattern at " + where + " with maxLength " + std::to_string(max_len) +
                             ": the pattern's automaton times the length counter passes " + std::to_string(kMaxRules) + " states");
    max_len = fit;
  }

  // The product with a length counter k (characters so far): k runs to
  // max_len, or saturates at min_len when there is no maximum; without
  // bounds there is no counter (k = 0 throughout).
  const bool counted = min_len > 0 || max_len >= 0;
  auto succ_k = [&](int64_t k) -> int64_t {
    if (!counted) return 0;
    if (max_len >= 0) return k + 1 <= max_len ? k + 1 : -1;
    return std::min(k + 1, min_len);
  };
  // A sink's tail at count k: characters [lo, hi] more.
  auto tail = [&](int64_t k, int64_t* lo, int64_t* hi) {
    *lo = std::max<int64_t>(0, min_len - k);
    *hi = max_len >= 0 ? max_len - k : *lo + kFreeTail;
    if (max_len < 0 && min_len == 0) *hi = kFreeTail;
    if (*hi > *lo + kFreeTail) *hi = *lo + kFreeTail;
  };
  auto accepting = [&](size_t q, int64_t k) {
    if (sink[q]) {
      int64_t lo, hi;
      tail(k, &lo, &hi);
      return lo <= hi;
    }
    return dfa.accept[q] && (!counted || (k >= min_len && (max_len < 0 || k <= max_len)));
  };
  // Explore (q, k) from (start, 0); a sink ends the exploration (its tail
  // is one counted repetition).
  std::map<std::pair<int, int64_t>, int> id;
  std::vector<std::pair<int, int64_t>> states;
  auto get = [&](int q, int64_t k) {
    auto [it, fresh] = id.emplace(std::make_pair(q, k), static_cast<int>(states.size()));
    if (fresh) states.push_back({q, k});
    return it->second;
  };
  get(0, 0);
  std::vector<std::vector<std::pair<int, int>>> edges;  // (states) (block, to)
  for (size_t i = 0; i < states.size(); ++i) {
    if (states.size() > kMaxRules)
      return InvalidArgument("pattern at " + where + " with minLength/maxLength " + std::to_string(min_len) + "/" +
                             std::to_string(max_len) + ": more than " + std::to_string(kMaxRules) + " automaton states");
    const auto [q, k] = states[i];
    edges.emplace_back();
    if (sink[static_cast<size_t>(q)]) continue;
    const int64_t k2 = succ_k(k);
    if (k2 < 0) continue;
    for (size_t b = 0; b < nb; ++b) {
      const int t = dfa.next[static_cast<size_t>(q)][b];
      if (t >= 0) edges[i].push_back({static_cast<int>(b), get(t, k2)});
    }
  }
  // Keep the states from which an accepting one is reachable: a string
  // the grammar lets the model start can always be finished.
  std::vector<bool> live(states.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = states.size(); i-- > 0;) {
      if (live[i]) continue;
      bool l = accepting(static_cast<size_t>(states[i].first), states[i].second);
      for (auto [b, t] : edges[i]) l = l || live[static_cast<size_t>(t)];
      if (l) {
        live[i] = true;
        changed = true;
      }
    }
  }
  PatternAutomaton out;
  if (!live[0]) return out;  // no string: the caller's "no value"
  std::map<Ranges, std::string> set_text;
  std::vector<int> rule(states.size(), -1);
  for (size_t i = 0; i < states.size(); ++i)
    if (live[i]) rule[i] = static_cast<int>(out.states.size()), out.states.emplace_back();
  for (size_t i = 0; i < states.size(); ++i) {
    if (!live[i]) continue;
    PatternAutomaton::State& st = out.states[static_cast<size_t>(rule[i])];
    const auto [q, k] = states[i];
    if (sink[static_cast<size_t>(q)]) {
      int64_t lo, hi;
      tail(k, &lo, &hi);
      st.tail = std::string(any_char) + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      continue;
    }
    st.accept = accepting(static_cast<size_t>(q), k);
    std::map<int, Ranges> by_target;
    for (auto [b, t] : edges[i])
      if (live[static_cast<size_t>(t)]) {
        Ranges& r = by_target[rule[static_cast<size_t>(t)]];
        r.insert(r.end(), dfa.blocks[static_cast<size_t>(b)].begin(), dfa.blocks[static_cast<size_t>(b)].end());
      }
    for (auto& [t, set] : by_target) {
      // The states of a length counter step on the same sets: write each once.
      auto [it, fresh] = set_text.emplace(Normalize(set), std::string());
      if (fresh) it->second = SetExpr(it->first);
      st.edges.push_back({it->second, t});
    }
  }
  return out;
}

StatusOr<CharDfa> PatternToDfa(std::string_view pattern, const std::string& where) {
  Parser parser(pattern);
  LLM_ASSIGN_OR_RETURN(auto alts, parser.Top());
  const int any = static_cast<int>(parser.nodes.size());
  parser.nodes.push_back(Node{Node::kSet, Writable(), {}});
  const int any_star = static_cast<int>(parser.nodes.size());
  parser.nodes.push_back(Node{Node::kRep, {}, {any}});
  Nfa nfa;
  const int start = nfa.New(), final_state = nfa.New();
  for (const auto& a : alts) {
    Node cat{Node::kCat, {}, {}};
    if (!a.start) cat.kids.push_back(any_star);
    cat.kids.push_back(a.node);
    if (!a.end) cat.kids.push_back(any_star);
    parser.nodes.push_back(std::move(cat));
    const Frag f = Build(parser.nodes, static_cast<int>(parser.nodes.size()) - 1, &nfa);
    if (nfa.overflow) return InvalidArgument("pattern at " + where + ": expands to more than " + std::to_string(kMaxNfaStates) + " states");
    nfa.states[static_cast<size_t>(start)].eps.push_back(f.start);
    nfa.states[static_cast<size_t>(f.end)].eps.push_back(final_state);
  }
  LLM_ASSIGN_OR_RETURN(Dfa dfa, Determinize(nfa, start, final_state, where));
  const size_t n = dfa.accept.size();
  std::vector<bool> live(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t q = 0; q < n; ++q) {
      if (live[q]) continue;
      bool l = dfa.accept[q];
      for (int t : dfa.next[q]) l = l || (t >= 0 && live[static_cast<size_t>(t)]);
      if (l) live[q] = changed = true;
    }
  }
  CharDfa out;
  out.edges.resize(n);
  out.accept = dfa.accept;
  for (size_t q = 0; q < n; ++q) {
    if (!live[q]) continue;
    std::map<int, Ranges> by_target;
    for (size_t b = 0; b < dfa.blocks.size(); ++b) {
      const int t = dfa.next[q][b];
      if (t >= 0 && live[static_cast<size_t>(t)]) by_target[t].insert(by_target[t].end(), dfa.blocks[b].begin(), dfa.blocks[b].end());
    }
    for (auto& [t, set] : by_target) out.edges[q].push_back({Intersect(set, Writable()), t});
  }
  if (!live[0]) out.edges.clear(), out.accept.clear();
  return out;
}

std::string CharsExpr(const std::vector<std::pair<uint32_t, uint32_t>>& set) { return SetExpr(set); }

int32_t CharDfa::Run(int32_t q, uint32_t cp) const {
  if (q < 0 || static_cast<size_t>(q) >= edges.size()) return -1;
  for (const auto& e : edges[static_cast<size_t>(q)])
    for (auto [a, b] : e.chars)
      if (cp >= a && cp <= b) return e.to;
  return -1;
}

}  // namespace llm
