// A recursive-descent parser for the grammar dialect of docs/GRAMMAR.md.
//
//   grammar     := (rule | comment | blank)*
//   rule        := name "::=" alternates            (continues until the next "name ::=")
//   alternates  := sequence ("|" sequence)*
//   sequence    := (primary postfix*)*
//   primary     := "literal" | [class] | . | name | ( alternates )
//   postfix     := * | + | ? | {m} | {m,} | {m,n} | {,n}
#include "constrain/gbnf_parser.h"

#include <string>

#include "util/utf8.h"

namespace llm::constrain {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  StatusOr<Grammar> Run() {
    if (s_.size() > static_cast<size_t>(kMaxGrammarBytes))
      return LimitExceeded("grammar longer than " + std::to_string(kMaxGrammarBytes) + " bytes");
    if (!IsValidUtf8(s_)) return InvalidArgument("grammar is not valid UTF-8");
    SkipSpace(true);
    while (i_ < s_.size()) {
      LLM_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    auto g = b_.Finish("root");
    if (!g.ok()) return InvalidArgument("grammar: " + g.status().message());
    return g;
  }

 private:
  Status Error(const std::string& what, size_t at) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgument("grammar line " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }
  Status Error(const std::string& what) const { return Error(what, i_); }

  // Skips blanks and comments; newlines too when `newlines`.
  void SkipSpace(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  // At a line break: does the rule go on? It ends at the end of the text or
  // where the next line starts a new rule ("name ::="), so a rule may run
  // over several lines (GBNF allows that after "::=", after "|" and inside
  // parentheses; this dialect also lets a line start with "|").
  bool RuleContinues() {
    const size_t save = i_;
    SkipSpace(true);
    bool more = i_ < s_.size();
    if (more) {
      size_t k = i_;
      while (k < s_.size() && IsNameChar(s_[k])) ++k;
      if (k > i_) {
        size_t j = k;
        while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t')) ++j;
        if (s_.substr(j, 3) == "::=") more = false;
      }
    }
    if (!more) i_ = save;
    return more;
  }

  Status ParseRule() {
    const size_t start = i_;
    while (i_ < s_.size() && IsNameChar(s_[i_])) ++i_;
    if (i_ == start) return Error("expected a rule name");
    const std::string name(s_.substr(start, i_ - start));
    SkipSpace(false);
    if (s_.substr(i_, 3) != "::=") return Error("expected '::=' after rule name '" + name + "'");
    i_ += 3;
    LLM_ASSIGN_OR_RETURN(int32_t id, b_.RuleId(name));
    if (b_.IsDefined(id)) return Error("rule '" + name + "' is defined twice", start);
    b_.MarkDefined(id);
    SkipSpace(true);
    std::vector<Alternative> alts;
    LLM_RETURN_IF_ERROR(ParseAlternates(name, 0, &alts));
    for (auto& a : alts) LLM_RETURN_IF_ERROR(b_.AddAlt(id, std::move(a)));
    SkipSpace(false);
    if (i_ < s_.size() && s_[i_] != '\n') return Error("unexpected '" + std::string(1, s_[i_]) + "'");
    return Status::Ok();
  }

  Status ParseAlternates(const std::string& rule, int depth, std::vector<Alternative>* alts) {
    if (depth > kMaxNesting) return Error("limit: nesting deeper than " + std::to_string(kMaxNesting));
    while (true) {
      Alternative seq;
      LLM_RETURN_IF_ERROR(ParseSequence(rule, depth, &seq));
      alts->push_back(std::move(seq));
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        SkipSpace(true);
        continue;
      }
      return Status::Ok();
    }
  }

  Status ParseSequence(const std::string& rule, int depth, Alternative* seq) {
    while (true) {
      SkipSpace(depth > 0);
      if (i_ < s_.size() && s_[i_] == '\n') {
        if (!RuleContinues()) return Status::Ok();
        continue;
      }
      if (i_ >= s_.size()) return Status::Ok();
      const char c = s_[i_];
      if (c == '|' || c == ')') return Status::Ok();
      if (c == '*' || c == '+' || c == '?' || c == '{') return Error("'" + std::string(1, c) + "' follows nothing");
      const size_t item = seq->size();
      if (c == '"') {
        LLM_RETURN_IF_ERROR(ParseLiteral(seq));
      } else if (c == '[') {
        LLM_ASSIGN_OR_RETURN(Element e, ParseClass());
        seq->push_back(std::move(e));
      } else if (c == '.') {
        ++i_;
        seq->push_back(Element::Chars({{0, kMaxCodePoint}}));
      } else if (c == '(') {
        const size_t open = i_++;
        SkipSpace(true);
        std::vector<Alternative> alts;
        LLM_RETURN_IF_ERROR(ParseAlternates(rule, depth + 1, &alts));
        SkipSpace(true);
        if (i_ >= s_.size() || s_[i_] != ')') return Error("unclosed '('", open);
        ++i_;
        if (alts.size() == 1) {
          seq->insert(seq->end(), alts[0].begin(), alts[0].end());
        } else {
          LLM_ASSIGN_OR_RETURN(int32_t h, b_.NewHelper(rule));
          for (auto& a : alts) LLM_RETURN_IF_ERROR(b_.AddAlt(h, std::move(a)));
          seq->push_back(Element::Ref(h));
        }
      } else if (IsNameChar(c)) {
        const size_t start = i_;
        while (i_ < s_.size() && IsNameChar(s_[i_])) ++i_;
        LLM_ASSIGN_OR_RETURN(int32_t id, b_.RuleId(std::string(s_.substr(start, i_ - start))));
        seq->push_back(Element::Ref(id));
      } else {
        return Error("unexpected '" + std::string(1, c) + "'");
      }
      LLM_RETURN_IF_ERROR(ParsePostfix(rule, item, seq));
    }
  }

  Status ParsePostfix(const std::string& rule, size_t item, Alternative* seq) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      int32_t lo = 0, hi = 0;
      if (c == '*') {
        lo = 0, hi = -1, ++i_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++i_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++i_;
      } else if (c == '{') {
        LLM_RETURN_IF_ERROR(ParseBraces(&lo, &hi));
      } else {
        return Status::Ok();
      }
      if (item == seq->size()) continue;  // "" or () repeated: still ""
      Alternative body(seq->begin() + static_cast<std::ptrdiff_t>(item), seq->end());
      seq->resize(item);
      auto e = b_.Repeat(body, lo, hi, rule);
      if (!e.ok()) return Error(e.status().message());
      seq->push_back(std::move(*e));
    }
    return Status::Ok();
  }

  StatusOr<int32_t> ParseInt() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_] - '0');
      if (v > kMaxRepeat) return Error("limit: repetition count above " + std::to_string(kMaxRepeat), start);
      ++i_;
    }
    if (i_ == start) return -1;
    return static_cast<int32_t>(v);
  }

  Status ParseBraces(int32_t* lo, int32_t* hi) {
    const size_t open = i_++;
    SkipSpace(false);
    LLM_ASSIGN_OR_RETURN(int32_t m, ParseInt());
    SkipSpace(false);
    int32_t n = m;
    if (i_ < s_.size() && s_[i_] == ',') {
      ++i_;
      SkipSpace(false);
      LLM_ASSIGN_OR_RETURN(n, ParseInt());
      SkipSpace(false);
      if (m < 0) m = 0;
    } else if (m < 0) {
      return Error("expected a number in '{'", open);
    }
    if (i_ >= s_.size() || s_[i_] != '}') return Error("unclosed '{'", open);
    ++i_;
    if (n >= 0 && n < m) return Error("repetition {m,n} with n < m", open);
    *lo = m;
    *hi = n;
    return Status::Ok();
  }

  // One possibly escaped code point inside a literal or class.
  StatusOr<uint32_t> ParseChar() {
    const size_t at = i_;
    if (s_[i_] != '\\') {
      uint32_t cp;
      size_t len;
      DecodeUtf8(s_, i_, &cp, &len);  // the whole text is valid UTF-8
      i_ += len;
      return cp;
    }
    if (++i_ >= s_.size()) return Error("escape at the end of the grammar", at);
    const char e = s_[i_++];
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case 'f': return uint32_t{'\f'};
      case 'v': return uint32_t{'\v'};
      case '0': return uint32_t{0};
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': case '.':
        return static_cast<uint32_t>(e);
      case 'x': case 'u': case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          if (i_ >= s_.size()) return Error("truncated \\" + std::string(1, e) + " escape", at);
          const char h = s_[i_++];
          int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                                   : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return Error("bad hex digit in \\" + std::string(1, e) + " escape", at);
          v = v * 16 + static_cast<uint32_t>(d);
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return Error("escape is not a Unicode scalar value", at);
        return v;
      }
      default:
        return Error("unknown escape '\\" + std::string(1, e) + "'", at);
    }
  }

  Status ParseLiteral(Alternative* seq) {
    const size_t open = i_++;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') return Error("unterminated string literal", open);
      if (s_[i_] == '"') {
        ++i_;
        return Status::Ok();
      }
      LLM_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
      seq->push_back(Element::Char(cp));
    }
  }

  StatusOr<Element> ParseClass() {
    const size_t open = i_++;
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    std::vector<CodeRange> ranges;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') return Error("unterminated character class", open);
      if (s_[i_] == ']') break;
      LLM_ASSIGN_OR_RETURN(uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        const size_t dash = i_++;
        LLM_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("character range out of order", dash);
      }
      ranges.push_back({lo, hi});
    }
    ++i_;
    ranges = NormaliseRanges(std::move(ranges));
    if (negate) ranges = ComplementRanges(ranges);
    return Element::Chars(std::move(ranges));
  }

  std::string_view s_;
  size_t i_ = 0;
  GrammarBuilder b_;
};

}  // namespace

StatusOr<Grammar> ParseGrammar(std::string_view text) { return Parser(text).Run(); }

}  // namespace llm::constrain
