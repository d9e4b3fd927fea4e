// Regex -> AST -> grammar IR. The AST step exists for one reason: X* where
// X can match "" (e.g. (a|)*) is left-recursive as a grammar, so a repeated
// nullable X is rewritten as a repetition of X minus the empty string,
// computed structurally (NonEmpty below); the language is unchanged.
#include "constrain/regex_compiler.h"

#include <memory>
#include <string>

#include "util/utf8.h"

namespace llm::constrain {
namespace {

struct Node;
using NodeP = std::shared_ptr<const Node>;
struct Node {
  enum Kind { kChars, kEmpty, kConcat, kAlt, kRepeat } kind;
  std::vector<CodeRange> ranges;  // kChars
  std::vector<NodeP> kids;        // kConcat, kAlt; kRepeat: one
  int32_t min = 0, max = 0;       // kRepeat; max < 0 = unbounded
};

NodeP Make(Node n) { return std::make_shared<const Node>(std::move(n)); }
NodeP Chars(std::vector<CodeRange> r) { return Make({Node::kChars, NormaliseRanges(std::move(r)), {}, 0, 0}); }
NodeP Empty() { return Make({Node::kEmpty, {}, {}, 0, 0}); }
NodeP Concat(std::vector<NodeP> k) { return k.size() == 1 ? k[0] : Make({Node::kConcat, {}, std::move(k), 0, 0}); }
NodeP Alt(std::vector<NodeP> k) { return k.size() == 1 ? k[0] : Make({Node::kAlt, {}, std::move(k), 0, 0}); }
NodeP Repeat(NodeP x, int32_t lo, int32_t hi) { return Make({Node::kRepeat, {}, {std::move(x)}, lo, hi}); }

bool Nullable(const Node& n) {
  switch (n.kind) {
    case Node::kChars: return false;
    case Node::kEmpty: return true;
    case Node::kConcat:
      for (const NodeP& k : n.kids)
        if (!Nullable(*k)) return false;
      return true;
    case Node::kAlt:
      for (const NodeP& k : n.kids)
        if (Nullable(*k)) return true;
      return false;
    case Node::kRepeat: return n.min == 0 || Nullable(*n.kids[0]);
  }
  return false;
}

// L(n) \ {""}; null when that is empty.
NodeP NonEmpty(const NodeP& n) {
  switch (n->kind) {
    case Node::kChars: return n;
    case Node::kEmpty: return nullptr;
    case Node::kAlt: {
      std::vector<NodeP> k;
      for (const NodeP& c : n->kids)
        if (NodeP e = NonEmpty(c)) k.push_back(e);
      return k.empty() ? nullptr : Alt(std::move(k));
    }
    case Node::kConcat: {
      // (A B) \ "" = (A \ "") B  |  B \ ""  when A is nullable.
      const NodeP& a = n->kids[0];
      const NodeP b = Concat(std::vector<NodeP>(n->kids.begin() + 1, n->kids.end()));
      std::vector<NodeP> alts;
      if (NodeP ae = NonEmpty(a)) alts.push_back(Concat({ae, b}));
      if (Nullable(*a))
        if (NodeP be = NonEmpty(b)) alts.push_back(be);
      return alts.empty() ? nullptr : Alt(std::move(alts));
    }
    case Node::kRepeat: {
      if (!Nullable(*n)) return n;
      NodeP x = NonEmpty(n->kids[0]);
      if (x == nullptr || n->max == 0) return nullptr;
      if (n->max == 1) return x;
      return Concat({x, Repeat(x, 0, n->max < 0 ? -1 : n->max - 1)});
    }
  }
  return nullptr;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : s_(p) {}

  StatusOr<NodeP> Run() {
    if (s_.size() > static_cast<size_t>(kMaxGrammarBytes))
      return InvalidArgument("regex longer than " + std::to_string(kMaxGrammarBytes) + " bytes");
    if (!IsValidUtf8(s_)) return InvalidArgument("regex is not valid UTF-8");
    if (!s_.empty() && s_[0] == '^') ++i_;
    LLM_ASSIGN_OR_RETURN(NodeP n, ParseAlt(0));
    if (i_ < s_.size()) return Error(s_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return n;
  }

 private:
  Status Error(const std::string& what, size_t at) const {
    return InvalidArgument("regex offset " + std::to_string(at) + ": " + what);
  }
  Status Error(const std::string& what) const { return Error(what, i_); }

  StatusOr<NodeP> ParseAlt(int depth) {
    if (depth > kMaxNesting) return Error("groups nested deeper than " + std::to_string(kMaxNesting));
    std::vector<NodeP> alts;
    while (true) {
      LLM_ASSIGN_OR_RETURN(NodeP c, ParseConcat(depth));
      alts.push_back(c);
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        continue;
      }
      return Alt(std::move(alts));
    }
  }

  StatusOr<NodeP> ParseConcat(int depth) {
    std::vector<NodeP> items;
    while (i_ < s_.size() && s_[i_] != '|' && s_[i_] != ')') {
      if (s_[i_] == '$' && i_ + 1 == s_.size()) {
        ++i_;  // an explicit end anchor: the match is whole anyway
        break;
      }
      LLM_ASSIGN_OR_RETURN(NodeP a, ParseAtom(depth));
      LLM_ASSIGN_OR_RETURN(a, ParseQuantifiers(a));
      items.push_back(a);
    }
    if (items.empty()) return Empty();
    return Concat(std::move(items));
  }

  // {m}, {m,}, {m,n} at i_; false (i_ unchanged) when it is not one, in
  // which case '{' is a literal, as in Python and PCRE.
  bool TryBraces(int32_t* lo, int32_t* hi, bool* too_big) {
    size_t k = i_ + 1;
    auto num = [&](int64_t* v) {
      const size_t start = k;
      *v = 0;
      while (k < s_.size() && s_[k] >= '0' && s_[k] <= '9') {
        *v = std::min<int64_t>(*v * 10 + (s_[k] - '0'), int64_t{1} << 40);
        ++k;
      }
      return k > start;
    };
    int64_t m = 0, n = 0;
    const bool has_m = num(&m);
    if (k < s_.size() && s_[k] == '}') {
      if (!has_m) return false;
      n = m;
    } else if (k < s_.size() && s_[k] == ',') {
      ++k;
      if (!has_m) m = 0;
      if (!num(&n)) n = -1;
      if (k >= s_.size() || s_[k] != '}') return false;
      if (!has_m && n < 0) return false;
    } else {
      return false;
    }
    *too_big = m > kMaxRepeat || n > kMaxRepeat;
    *lo = static_cast<int32_t>(std::min<int64_t>(m, kMaxRepeat + 1));
    *hi = static_cast<int32_t>(std::min<int64_t>(n, kMaxRepeat + 1));
    i_ = k + 1;
    return true;
  }

  StatusOr<NodeP> ParseQuantifiers(NodeP a) {
    while (i_ < s_.size()) {
      const size_t at = i_;
      int32_t lo, hi;
      const char c = s_[i_];
      if (c == '*') {
        lo = 0, hi = -1, ++i_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++i_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++i_;
      } else if (c == '{') {
        bool too_big = false;
        if (!TryBraces(&lo, &hi, &too_big)) return a;
        if (too_big) return Error("repetition count above the limit of " + std::to_string(kMaxRepeat), at);
        if (hi >= 0 && hi < lo) return Error("repetition {m,n} with n < m", at);
      } else {
        return a;
      }
      if (i_ < s_.size() && s_[i_] == '?') {
        ++i_;  // lazy: the same set of strings
      } else if (i_ < s_.size() && s_[i_] == '+') {
        return Error("possessive quantifiers are not supported", i_);
      }
      a = Repeat(a, lo, hi);
    }
    return a;
  }

  // \d \w \s and their negations, as ASCII classes (JSON Schema's and
  // ECMAScript's reading of patterns).
  static bool ClassEscape(char e, std::vector<CodeRange>* r) {
    std::vector<CodeRange> c;
    switch (e) {
      case 'd': case 'D': c = {{'0', '9'}}; break;
      case 'w': case 'W': c = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; break;
      case 's': case 'S': c = {{'\t', '\r'}, {' ', ' '}}; break;
      default: return false;
    }
    c = NormaliseRanges(std::move(c));
    if (e >= 'A' && e <= 'Z') c = ComplementRanges(c);
    r->insert(r->end(), c.begin(), c.end());
    return true;
  }

  // A single escaped code point after '\' (i_ at the char after '\').
  StatusOr<uint32_t> Escape(size_t at) {
    if (i_ >= s_.size()) return Error("trailing '\\'", at);
    const char e = s_[i_++];
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case 'f': return uint32_t{'\f'};
      case 'v': return uint32_t{'\v'};
      case '0': return uint32_t{0};
      case 'x': case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          if (i_ >= s_.size()) return Error("truncated \\" + std::string(1, e) + " escape", at);
          const char h = s_[i_++];
          const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                                         : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return Error("bad hex digit in escape", at);
          v = v * 16 + static_cast<uint32_t>(d);
        }
        if (v >= 0xD800 && v <= 0xDFFF) return Error("escape names a surrogate", at);
        return v;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
          return Error(std::string("unsupported escape '\\") + e + "' (backreferences, \\b and Unicode classes are not supported)", at);
        if (static_cast<unsigned char>(e) >= 0x80) return Error("escaped non-ASCII character", at);
        return static_cast<uint32_t>(e);
    }
  }

  uint32_t NextCodePoint() {
    uint32_t cp;
    size_t len;
    DecodeUtf8(s_, i_, &cp, &len);
    i_ += len;
    return cp;
  }

  StatusOr<NodeP> ParseAtom(int depth) {
    const size_t at = i_;
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < s_.size() && s_[i_] == '?') {
        if (s_.substr(i_, 2) == "?:") {
          i_ += 2;
        } else if (s_.substr(i_, 3) == "?P<" || (s_.substr(i_, 2) == "?<" && s_.substr(i_, 3) != "?<=" && s_.substr(i_, 3) != "?<!")) {
          const size_t close = s_.find('>', i_);
          if (close == std::string_view::npos) return Error("unterminated group name", at);
          i_ = close + 1;
        } else {
          return Error("unsupported group syntax (lookaround, flags and conditionals are not supported)", at);
        }
      }
      LLM_ASSIGN_OR_RETURN(NodeP inner, ParseAlt(depth + 1));
      if (i_ >= s_.size() || s_[i_] != ')') return Error("unclosed '('", at);
      ++i_;
      return inner;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++i_;
      return Chars({{0, '\n' - 1}, {'\n' + 1, kMaxCodePoint}});
    }
    if (c == '*' || c == '+' || c == '?') return Error("quantifier follows nothing");
    if (c == '{') {
      int32_t lo, hi;
      bool big;
      const size_t save = i_;
      if (TryBraces(&lo, &hi, &big)) {
        i_ = save;
        return Error("quantifier follows nothing");
      }
      ++i_;
      return Chars({{'{', '{'}});
    }
    if (c == '^' || c == '$') return Error("anchors are only supported at the start and end of the pattern");
    if (c == '\\') {
      ++i_;
      std::vector<CodeRange> r;
      if (i_ < s_.size() && ClassEscape(s_[i_], &r)) {
        ++i_;
        return Chars(std::move(r));
      }
      LLM_ASSIGN_OR_RETURN(uint32_t cp, Escape(at));
      return Chars({{cp, cp}});
    }
    const uint32_t cp = NextCodePoint();
    return Chars({{cp, cp}});
  }

  StatusOr<NodeP> ParseClass() {
    const size_t open = i_++;
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    std::vector<CodeRange> ranges;
    bool first = true;
    while (true) {
      if (i_ >= s_.size()) return Error("unterminated character class", open);
      if (s_[i_] == ']' && !first) break;
      first = false;
      // One class member: a code point, possibly the start of a range.
      const size_t at = i_;
      uint32_t lo;
      if (s_[i_] == '\\') {
        ++i_;
        if (i_ < s_.size() && ClassEscape(s_[i_], &ranges)) {
          ++i_;
          continue;
        }
        LLM_ASSIGN_OR_RETURN(lo, Escape(at));
      } else {
        if (s_[i_] == '[' && i_ + 1 < s_.size() && s_[i_ + 1] == ':')
          return Error("POSIX classes [:name:] are not supported", i_);
        lo = NextCodePoint();
      }
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        const size_t dash = i_++;
        if (s_[i_] == '\\') {
          const size_t eat = i_++;
          std::vector<CodeRange> dummy;
          if (i_ < s_.size() && ClassEscape(s_[i_], &dummy)) return Error("class escape as a range end", eat);
          LLM_ASSIGN_OR_RETURN(hi, Escape(eat));
        } else {
          hi = NextCodePoint();
        }
        if (hi < lo) return Error("character range out of order", dash);
      }
      ranges.push_back({lo, hi});
    }
    ++i_;
    ranges = NormaliseRanges(std::move(ranges));
    if (negate) ranges = ComplementRanges(ranges);
    return Chars(std::move(ranges));
  }

  std::string_view s_;
  size_t i_ = 0;
};

class Emitter {
 public:
  StatusOr<Alternative> Emit(const NodeP& n, int depth) {
    if (depth > 4 * kMaxNesting) return InvalidArgument("regex nested too deeply");
    switch (n->kind) {
      case Node::kChars: return Alternative{Element::Chars(n->ranges)};
      case Node::kEmpty: return Alternative{};
      case Node::kConcat: {
        Alternative out;
        for (const NodeP& k : n->kids) {
          LLM_ASSIGN_OR_RETURN(Alternative a, Emit(k, depth + 1));
          out.insert(out.end(), a.begin(), a.end());
          if (out.size() > static_cast<size_t>(kMaxElements)) return InvalidArgument("regex too large");
        }
        return out;
      }
      case Node::kAlt: {
        LLM_ASSIGN_OR_RETURN(int32_t h, b_.NewHelper("alt"));
        for (const NodeP& k : n->kids) {
          LLM_ASSIGN_OR_RETURN(Alternative a, Emit(k, depth + 1));
          LLM_RETURN_IF_ERROR(b_.AddAlt(h, std::move(a)));
        }
        return Alternative{Element::Ref(h)};
      }
      case Node::kRepeat: {
        NodeP body = n->kids[0];
        int32_t lo = n->min, hi = n->max;
        if (Nullable(*body)) {
          // X{m,n} with "" in X = (X \ ""){0,n}: no nullable loop body.
          body = NonEmpty(body);
          if (body == nullptr) return Alternative{};
          lo = 0;
        }
        if (hi == 0) return Alternative{};
        LLM_ASSIGN_OR_RETURN(Alternative a, Emit(body, depth + 1));
        LLM_ASSIGN_OR_RETURN(Element e, b_.Repeat(a, lo, hi, "rep"));
        return Alternative{std::move(e)};
      }
    }
    return InternalError("bad regex node");
  }
  GrammarBuilder b_;
};

}  // namespace

StatusOr<Grammar> CompileRegex(std::string_view pattern) {
  LLM_ASSIGN_OR_RETURN(NodeP ast, RegexParser(pattern).Run());
  Emitter em;
  LLM_ASSIGN_OR_RETURN(int32_t root, em.b_.RuleId("root"));
  auto body = em.Emit(ast, 0);
  if (!body.ok()) return InvalidArgument("regex: " + body.status().message());
  LLM_RETURN_IF_ERROR(em.b_.AddAlt(root, std::move(*body)));
  auto g = em.b_.Finish("root");
  if (!g.ok()) return InvalidArgument("regex: " + g.status().message());
  return g;
}

}  // namespace llm::constrain
