#include "util/json.h"

#include <charconv>
#include <cmath>

#include "util/utf8.h"

namespace llm {

int64_t Json::as_int() const {
  if (type_ != Type::kNumber) return 0;
  if (is_int_) return int_;
  // Saturate rather than invoke undefined behaviour on huge doubles.
  if (!(double_ == double_)) return 0;
  if (double_ >= 9.2233720368547758e18) return INT64_MAX;
  if (double_ <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(double_);
}

const Json& Json::operator[](size_t i) const {
  static const Json kNull;
  if (type_ != Type::kArray || i >= array_.size()) return kNull;
  return array_[i];
}

const Json* Json::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const Member& m : object_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

Json Json::Bool(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.bool_ = b;
  return j;
}
Json Json::Number(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.double_ = d;
  return j;
}
Json Json::Int(int64_t i) {
  Json j;
  j.type_ = Type::kNumber;
  j.double_ = static_cast<double>(i);
  j.int_ = i;
  j.is_int_ = true;
  return j;
}
Json Json::String(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.string_ = std::move(s);
  return j;
}
Json Json::Array(std::vector<Json> a) {
  Json j;
  j.type_ = Type::kArray;
  j.array_ = std::move(a);
  return j;
}
Json Json::Object(std::vector<Member> o) {
  Json j;
  j.type_ = Type::kObject;
  j.object_ = std::move(o);
  return j;
}

namespace {

// Recursive descent over the byte string. Recursion depth is bounded by
// max_depth, so hostile nesting cannot overflow the stack.
class Parser {
 public:
  Parser(std::string_view s, int max_depth) : s_(s), max_depth_(max_depth) {}

  Status Parse(Json* out) {
    SkipWs();
    LLM_RETURN_IF_ERROR(Value(out, 0));
    SkipWs();
    if (pos_ != s_.size()) return Error("trailing characters after the JSON value");
    return Status::Ok();
  }

 private:
  Status Error(const char* what) const {
    return InvalidArgument("JSON: " + std::string(what) + " at byte " + std::to_string(pos_));
  }

  void SkipWs() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status Value(Json* out, int depth) {
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    switch (s_[pos_]) {
      case '{': return ParseObject(out, depth);
      case '[': return ParseArray(out, depth);
      case '"': {
        std::string str;
        LLM_RETURN_IF_ERROR(ParseString(&str));
        *out = Json::String(std::move(str));
        return Status::Ok();
      }
      case 't':
        if (!Literal("true")) return Error("invalid literal");
        *out = Json::Bool(true);
        return Status::Ok();
      case 'f':
        if (!Literal("false")) return Error("invalid literal");
        *out = Json::Bool(false);
        return Status::Ok();
      case 'n':
        if (!Literal("null")) return Error("invalid literal");
        *out = Json::Null();
        return Status::Ok();
      default: return ParseNumber(out);
    }
  }

  Status ParseObject(Json* out, int depth) {
    if (depth >= max_depth_) return Error("nesting too deep");
    ++pos_;  // '{'
    std::vector<Json::Member> members;
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      *out = Json::Object(std::move(members));
      return Status::Ok();
    }
    while (true) {
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      Json::Member m;
      LLM_RETURN_IF_ERROR(ParseString(&m.first));
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      SkipWs();
      LLM_RETURN_IF_ERROR(Value(&m.second, depth + 1));
      members.push_back(std::move(m));
      SkipWs();
      if (pos_ >= s_.size()) return Error("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      return Error("expected ',' or '}'");
    }
    *out = Json::Object(std::move(members));
    return Status::Ok();
  }

  Status ParseArray(Json* out, int depth) {
    if (depth >= max_depth_) return Error("nesting too deep");
    ++pos_;  // '['
    std::vector<Json> items;
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      *out = Json::Array(std::move(items));
      return Status::Ok();
    }
    while (true) {
      SkipWs();
      items.emplace_back();
      LLM_RETURN_IF_ERROR(Value(&items.back(), depth + 1));
      SkipWs();
      if (pos_ >= s_.size()) return Error("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      return Error("expected ',' or ']'");
    }
    *out = Json::Array(std::move(items));
    return Status::Ok();
  }

  bool Hex4(uint32_t* v) {
    if (s_.size() - pos_ < 4) return false;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + i];
      r <<= 4;
      if (c >= '0' && c <= '9') r |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') r |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') r |= uint32_t(c - 'A' + 10);
      else return false;
    }
    pos_ += 4;
    *v = r;
    return true;
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (true) {
      // Copy the run of plain bytes in one go: tokenizer files are mostly that.
      const size_t start = pos_;
      while (pos_ < s_.size()) {
        const unsigned char c = static_cast<unsigned char>(s_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        ++pos_;
      }
      out->append(s_.data() + start, pos_ - start);
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c != '\\') return Error("control character in string");
      ++pos_;
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return Error("invalid \\u escape");
          if (cp >= 0xDC00 && cp <= 0xDFFF) return Error("unpaired low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (s_.substr(pos_, 2) != "\\u") return Error("unpaired high surrogate");
            pos_ += 2;
            if (!Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return Error("unpaired high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default: --pos_; return Error("invalid escape");
      }
    }
  }

  Status ParseNumber(Json* out) {
    // Validate the RFC 8259 grammar first; from_chars is laxer (it takes "01").
    const size_t start = pos_;
    size_t p = pos_;
    auto digit = [&](size_t i) { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; };
    if (p < s_.size() && s_[p] == '-') ++p;
    if (!digit(p)) return Error("invalid value");
    if (s_[p] == '0') {
      ++p;
    } else {
      while (digit(p)) ++p;
    }
    bool integral = true;
    if (p < s_.size() && s_[p] == '.') {
      integral = false;
      ++p;
      if (!digit(p)) {
        pos_ = p;
        return Error("digit expected after '.'");
      }
      while (digit(p)) ++p;
    }
    if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      integral = false;
      ++p;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (!digit(p)) {
        pos_ = p;
        return Error("digit expected in exponent");
      }
      while (digit(p)) ++p;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + p;
    if (integral) {
      int64_t v = 0;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) {
        *out = Json::Int(v);
        pos_ = p;
        return Status::Ok();
      }
      // Out of int64 range: fall through and keep only the double.
    }
    // from_chars: locale-independent, unlike strtod.
    double d = 0.0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Saturate: a negative exponent or a "0." literal underflowed to zero,
      // anything else overflowed to infinity. The sign is kept.
      const std::string_view lit(b, static_cast<size_t>(e - b));
      const bool neg = lit[0] == '-';
      const size_t ep = lit.find_first_of("eE");
      const bool tiny = (ep != std::string_view::npos && lit[ep + 1] == '-') ||
                        lit.substr(neg ? 1 : 0, 2) == "0.";
      d = tiny ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL);
    }
    *out = Json::Number(d);
    pos_ = p;
    return Status::Ok();
  }

  std::string_view s_;
  int max_depth_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<Json> ParseJson(std::string_view text, int max_depth) {
  // JSON text is UTF-8; checking it once up front keeps the string scanner
  // simple and guarantees every string in the DOM is valid UTF-8.
  if (!IsValidUtf8(text)) return Status(LLM_ERR_INVALID_ARGUMENT, "JSON: input is not valid UTF-8");
  Json root;
  Parser parser(text, max_depth);
  LLM_RETURN_IF_ERROR(parser.Parse(&root));
  return root;
}

}  // namespace llm
