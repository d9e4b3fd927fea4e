#include "constrain/schema_pattern.h"

#include <algorithm>
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
// Open repetitions (* + {n,}) and the free ends of an unanchored pattern
// stop this many characters/repeats past their minimum: a sound narrowing
// that keeps every string finite, so a model cannot wander on inside one
// (SmolLM2 ran "[0-9]{3}" unanchored into the length limit 6 times in 20).
constexpr int kOpenRepeat = 128;
const std::string kOpenStar = "{0," + std::to_string(kOpenRepeat) + "}";

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

class Parser {
 public:
  Parser(std::string_view p, std::string_view any) : p_(p), any_(any) {}

  StatusOr<std::string> Top() {
    std::vector<std::string> alts;
    while (true) {
      bool start = false;
      if (Peek('^')) {
        ++pos_;
        start = true;
      }
      LLM_ASSIGN_OR_RETURN(std::string seq, Sequence(/*top=*/true));
      bool end = false;
      if (Peek('$')) {
        ++pos_;
        end = true;
      }
      std::string e;
      if (!start) e = std::string(any_) + kOpenStar;
      if (!seq.empty()) e += (e.empty() ? "" : " ") + seq;
      if (!end) e += (e.empty() ? "" : " ") + std::string(any_) + kOpenStar;
      alts.push_back(e.empty() ? "\"\"" : e);
      if (pos_ >= p_.size()) break;
      if (Peek('|')) {
        ++pos_;
        continue;
      }
      if (Peek('$') || Peek('^')) return Err(Unsupported, "an anchor inside the pattern");
      return Err(InvalidArgument, "unbalanced ')'");
    }
    if (alts.size() == 1) return alts[0];
    return Join(alts);
  }

 private:
  using MakeStatus = Status (*)(std::string);

  Status Err(MakeStatus make, const std::string& what) const {
    return make("pattern: " + what + " at offset " + std::to_string(pos_));
  }
  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }

  static std::string Join(const std::vector<std::string>& alts) {
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + (alts[i].empty() ? "\"\"" : alts[i]);
    return out + ")";
  }

  StatusOr<std::string> Alternation() {
    std::vector<std::string> alts;
    while (true) {
      LLM_ASSIGN_OR_RETURN(std::string seq, Sequence(false));
      alts.push_back(seq);
      if (!Peek('|')) break;
      ++pos_;
    }
    if (alts.size() == 1) return alts[0].empty() ? std::string("\"\"") : alts[0];
    return Join(alts);
  }

  // Items until '|', ')' or the end (and, at the top, before a final '$').
  StatusOr<std::string> Sequence(bool top) {
    std::string out;
    while (pos_ < p_.size() && !Peek('|') && !Peek(')')) {
      if (top && Peek('$') && pos_ + 1 == p_.size()) break;
      if (top && Peek('$') && pos_ + 1 < p_.size() && p_[pos_ + 1] == '|') break;
      if (Peek('^') || Peek('$')) return Err(Unsupported, "an anchor inside the pattern");
      LLM_ASSIGN_OR_RETURN(std::string atom, Atom());
      LLM_ASSIGN_OR_RETURN(std::string q, Quantified(atom));
      out += (out.empty() ? "" : " ") + q;
    }
    if (top && Peek(')')) return Err(InvalidArgument, "unbalanced ')'");
    return out;
  }

  StatusOr<int> Number() {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = v * 10 + (p_[pos_] - '0');
      if (v > kMaxRepeat) return Err(Unsupported, "a repetition count above 1000");
      ++pos_;
    }
    if (pos_ == start) return Err(InvalidArgument, "a number expected in {}");
    return static_cast<int>(v);
  }

  StatusOr<std::string> Quantified(std::string atom) {
    while (pos_ < p_.size()) {
      const char c = p_[pos_];
      std::string suffix;
      if (c == '*' || c == '+') {
        ++pos_;
        suffix = "{" + std::string(c == '*' ? "0" : "1") + "," + std::to_string(kOpenRepeat + (c == '+')) + "}";
      } else if (c == '?') {
        ++pos_;
        suffix = "?";
      } else if (c == '{') {
        ++pos_;
        LLM_ASSIGN_OR_RETURN(int lo, Number());
        int hi = lo;
        bool open = false;
        if (Peek(',')) {
          ++pos_;
          if (Peek('}')) {
            open = true;
          } else {
            LLM_ASSIGN_OR_RETURN(hi, Number());
          }
        }
        if (!Peek('}')) return Err(InvalidArgument, "'}' expected");
        ++pos_;
        if (!open && hi < lo) return Err(InvalidArgument, "{n,m} with m < n");
        if (open) hi = lo + kOpenRepeat;
        suffix = "{" + std::to_string(lo) + (hi != lo ? "," + std::to_string(hi) : "") + "}";
      } else {
        break;
      }
      if (Peek('?')) ++pos_;  // lazy: the same language
      else if (Peek('+')) return Err(Unsupported, "a possessive quantifier");
      atom = "(" + atom + ")" + suffix;
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

  StatusOr<std::string> Class() {
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
    std::string e = SetExpr(set);
    if (e.empty()) return Err(Unsupported, "a class no JSON string character can match");
    return e;
  }

  StatusOr<std::string> Atom() {
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
      LLM_ASSIGN_OR_RETURN(std::string inner, std::move(group));
      if (!Peek(')')) return Err(InvalidArgument, "')' expected");
      ++pos_;
      return inner.empty() ? std::string("\"\"") : inner;
    }
    if (c == '[') {
      ++pos_;
      return Class();
    }
    if (c == '.') {
      ++pos_;
      return SetExpr(Complement({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Err(InvalidArgument, "nothing to repeat");
    Ranges set;
    if (c == '\\') {
      ++pos_;
      LLM_ASSIGN_OR_RETURN(set, Escape(false));
    } else {
      LLM_ASSIGN_OR_RETURN(set, Literal());
    }
    std::string e = SetExpr(set);
    if (e.empty()) return Err(Unsupported, "a character a JSON string cannot hold");
    return e;
  }

  std::string_view p_;
  std::string_view any_;
  size_t pos_ = 0;
  static constexpr int kMaxGroupDepth = 100;
  int depth_ = 0;  // groups open around pos_
};

}  // namespace

StatusOr<std::string> PatternToStringBody(std::string_view pattern, std::string_view any_char) {
  Parser p(pattern, any_char);
  return p.Top();
}

}  // namespace llm
