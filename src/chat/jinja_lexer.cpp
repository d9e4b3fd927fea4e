#include "chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "chat/jinja_value.h"
#include "util/utf8.h"

namespace llm::jinja {
namespace {

// The Python whitespace code point ending at / starting at a byte position.
bool SpaceAt(std::string_view s, size_t pos, size_t* len) {
  uint32_t cp;
  if (!DecodeUtf8(s, pos, &cp, len)) return false;
  return IsPySpace(cp);
}

size_t SkipSpace(std::string_view s, size_t pos) {
  size_t len;
  while (pos < s.size() && SpaceAt(s, pos, &len)) pos += len;
  return pos;
}

// s without trailing Python whitespace (str.rstrip()).
std::string_view RStrip(std::string_view s) {
  size_t end = 0;
  for (size_t pos = 0, len; pos < s.size(); pos += len)
    if (!SpaceAt(s, pos, &len)) end = pos + len;
  return s.substr(0, end);
}

bool AllSpace(std::string_view s) {
  size_t len;
  for (size_t pos = 0; pos < s.size(); pos += len)
    if (!SpaceAt(s, pos, &len)) return false;
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      size_t t = FindTagStart(pos_);
      if (t == std::string::npos) {
        Push(Tok::kData, s_.substr(pos_));
        break;
      }
      std::string_view text = std::string_view(s_).substr(pos_, t - pos_);
      char kind = s_[t + 1];
      size_t after = t + 2;
      char sign = 0;
      if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: not for {{
        size_t nl = text.rfind('\n');
        size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && AllSpace(text.substr(l_pos)))
          text = text.substr(0, l_pos);
      }
      if (!text.empty()) Push(Tok::kData, std::string(text));
      line_ += CountLines(pos_, t);
      pos_ = after;
      if (kind == '#') {
        LLM_RETURN_IF_ERROR(Comment(&line_starting));
      } else {
        LLM_RETURN_IF_ERROR(Tag(kind == '%', &line_starting));
      }
    }
    Push(Tok::kEof, "");
    return std::move(out_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  int CountLines(size_t from, size_t to) const {
    int n = 0;
    for (size_t i = from; i < to && i < s_.size(); ++i) n += s_[i] == '\n';
    return n;
  }

  Status Error(const std::string& what) const {
    return InvalidArgument("template syntax error (line " + std::to_string(line_) + "): " + what);
  }

  void Push(Tok type, std::string text) {
    Token tok;
    tok.type = type;
    tok.text = std::move(text);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }

  // After `{#`: skip to `#}`, then apply `-#}` / trim_blocks.
  Status Comment(bool* line_starting) {
    size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) return Error("missing end of comment tag");
    bool strip = end > pos_ && s_[end - 1] == '-';
    bool plus = end > pos_ && s_[end - 1] == '+';
    line_ += CountLines(pos_, end);
    pos_ = end + 2;
    AfterTagEnd(strip, plus, true, line_starting);
    return Status::Ok();
  }

  void AfterTagEnd(bool strip, bool plus, bool trim_newline, bool* line_starting) {
    size_t start = pos_;
    if (strip) {
      pos_ = SkipSpace(s_, pos_);
    } else if (!plus && trim_newline && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_ += CountLines(start, pos_);
    // The match jinja2 made ends with the tag's own last character unless
    // whitespace after it was consumed.
    *line_starting = pos_ > start && s_[pos_ - 1] == '\n';
  }

  // After `{{` or `{%`: expression tokens up to the matching end.
  Status Tag(bool block, bool* line_starting) {
    Push(block ? Tok::kBlockBegin : Tok::kVarBegin, "");
    int depth = 0;  // open brackets: an end marker inside them is an operator
    const char close = block ? '%' : '}';
    for (;;) {
      size_t len;
      while (pos_ < s_.size() && SpaceAt(s_, pos_, &len)) {
        line_ += s_[pos_] == '\n';
        pos_ += len;
      }
      if (pos_ >= s_.size()) return Error(block ? "unexpected end of template, missing '%}'" : "missing '}}'");
      if (depth == 0) {
        bool strip = s_.compare(pos_, 3, std::string("-") + close + "}") == 0;
        bool plus = block && s_.compare(pos_, 3, "+%}") == 0;
        if (strip || plus || s_.compare(pos_, 2, std::string(1, close) + "}") == 0) {
          pos_ += strip || plus ? 3 : 2;
          Push(block ? Tok::kBlockEnd : Tok::kVarEnd, "");
          AfterTagEnd(strip, plus, block, line_starting);
          return Status::Ok();
        }
      }
      char c = s_[pos_];
      if (IsDigit(c)) {
        LLM_RETURN_IF_ERROR(Number());
      } else if (IsNameStart(c)) {
        size_t start = pos_;
        while (pos_ < s_.size() && (IsNameStart(s_[pos_]) || IsDigit(s_[pos_]))) ++pos_;
        Push(Tok::kName, s_.substr(start, pos_ - start));
      } else if (c == '\'' || c == '"') {
        LLM_RETURN_IF_ERROR(String(c));
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                           "]", "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (s_.compare(pos_, std::char_traits<char>::length(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (op == nullptr) return Error(std::string("unexpected character '") + c + "'");
        std::string o(op);
        if (o == "(" || o == "[" || o == "{") {
          if (++depth > 256) return Error("brackets nested too deeply");
        } else if (o == ")" || o == "]" || o == "}") {
          if (depth == 0) return Error("unexpected '" + o + "'");
          --depth;
        }
        pos_ += o.size();
        Push(Tok::kOp, std::move(o));
      }
    }
  }

  Status Number() {
    size_t start = pos_;
    auto digits = [&] {
      while (pos_ < s_.size() && (IsDigit(s_[pos_]) || (s_[pos_] == '_' && pos_ + 1 < s_.size() && IsDigit(s_[pos_ + 1]))))
        ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && IsDigit(s_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < s_.size() && s_[pos_] == 'e') {
      size_t e = pos_ + 1;
      if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
      if (e < s_.size() && IsDigit(s_[e])) {
        is_float = true;
        pos_ = e;
        digits();
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i)
      if (s_[i] != '_') text += s_[i];
    Token tok;
    tok.line = line_;
    tok.text = text;
    errno = 0;
    if (is_float) {
      tok.type = Tok::kFloat;
      tok.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      tok.type = Tok::kInt;
      tok.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error("integer literal out of range: " + text);
    }
    out_.push_back(std::move(tok));
    return Status::Ok();
  }

  // A quoted string with Python's escapes (jinja2 decodes with
  // "unicode-escape"); unknown escapes stay as written.
  Status String(char quote) {
    int start_line = line_;
    std::string value;
    ++pos_;
    for (;;) {
      if (pos_ >= s_.size()) {
        line_ = start_line;
        return Error("unterminated string");
      }
      char c = s_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= s_.size()) continue;  // reported as unterminated above
      char e = s_[pos_++];
      auto hex = [&](int n) -> int64_t {
        if (pos_ + static_cast<size_t>(n) > s_.size()) return -1;
        int64_t v = 0;
        for (int i = 0; i < n; ++i) {
          char h = s_[pos_ + static_cast<size_t>(i)];
          int d = IsDigit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return -1;
          v = v * 16 + d;
        }
        pos_ += static_cast<size_t>(n);
        return v;
      };
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': ++line_; break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          int64_t cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (cp < 0 || cp > 0x10FFFF) return Error("truncated or invalid \\" + std::string(1, e) + " escape");
          if (cp >= 0xD800 && cp <= 0xDFFF) return Error("surrogate escape in string");
          AppendUtf8(static_cast<uint32_t>(cp), &value);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++i)
              cp = cp * 8 + static_cast<uint32_t>(s_[pos_++] - '0');
            AppendUtf8(cp, &value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    Token tok;
    tok.type = Tok::kString;
    tok.text = std::move(value);
    tok.line = start_line;
    out_.push_back(std::move(tok));
    return Status::Ok();
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

StatusOr<std::vector<Token>> Lex(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(s)).Run();
}

}  // namespace llm::jinja
