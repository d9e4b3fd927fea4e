#include "constrain/grammar_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace llm::gbnf {
namespace {

std::string Hex2(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", v & 0xFFu);
  return buf;
}

// Decimal digits of v (1 for 0).
int Digits(uint64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

uint64_t Pow10(int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

std::string DigitClass(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  if (a == '0' && b == '9') return "[0-9]";
  return std::string("[") + a + "-" + b + "]";
}

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

bool AllOf(std::string_view s, char c) {
  for (char x : s)
    if (x != c) return false;
  return true;
}

// Equal-length decimal strings lo <= hi: an expression for every string of
// that length between them (leading zeros allowed here: callers pass whole
// numbers whose first digit is not 0 unless the length is 1).
std::string SameLengthRange(std::string_view lo, std::string_view hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return Literal(lo);
  std::string_view lrest = lo.substr(1), hrest = hi.substr(1);
  if (lo[0] == hi[0]) return Literal(lo.substr(0, 1)) + " " + SameLengthRange(lrest, hrest);
  if (AllOf(lrest, '0') && AllOf(hrest, '9')) {
    std::string e = DigitClass(lo[0], hi[0]);
    if (n > 1) e += " " + AnyDigits(n - 1);
    return e;
  }
  std::vector<std::string> alts;
  char start = lo[0], end = hi[0];
  if (!AllOf(lrest, '0')) {
    alts.push_back(Literal(lo.substr(0, 1)) + " " +
                   SameLengthRange(lrest, std::string(lrest.size(), '9')));
    ++start;
  }
  std::string high;
  if (!AllOf(hrest, '9')) {
    high = Literal(hi.substr(0, 1)) + " " + SameLengthRange(std::string(hrest.size(), '0'), hrest);
    --end;
  }
  if (start <= end) alts.push_back(DigitClass(start, end) + " " + AnyDigits(n - 1));
  if (!high.empty()) alts.push_back(high);
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Non-negative integers in [a, b] (b absent: open, up to max(16, digits(a))
// digits), as a list of alternatives.
void NonNegRange(uint64_t a, std::optional<uint64_t> b, std::vector<std::string>* alts) {
  const int da = Digits(a);
  if (!b) {
    const int cap = da > 16 ? da : 16;
    alts->push_back(SameLengthRange(std::to_string(a), std::to_string(Pow10(da) - 1)));
    if (da < cap) alts->push_back("[1-9] [0-9]{" + std::to_string(da) + "," + std::to_string(cap - 1) + "}");
    return;
  }
  const int db = Digits(*b);
  for (int len = da; len <= db; ++len) {
    const uint64_t low = len == 1 ? 0 : Pow10(len - 1);
    const uint64_t high = Pow10(len) - 1;
    const uint64_t rlo = a > low ? a : low;
    const uint64_t rhi = *b < high ? *b : high;
    if (rlo <= rhi) alts->push_back(SameLengthRange(std::to_string(rlo), std::to_string(rhi)));
  }
}

}  // namespace

std::string Literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) out += Hex2(c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string ClassChar(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F || cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-')
    return Hex2(cp);
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  if (cp >= 0xD800 && cp <= 0xDFFF) {  // not encodable as UTF-8: spell it out
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    return buf;
  }
  std::string out;
  // Encode by hand (utf8.h's AppendUtf8 would do; this keeps the file free of
  // a dependency for four lines).
  if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

StatusOr<std::string> JsonDump(const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull: return std::string("null");
    case Json::Type::kBool: return std::string(v.as_bool() ? "true" : "false");
    case Json::Type::kString: return JsonString(v.as_string());
    case Json::Type::kNumber: {
      if (v.is_int()) return std::to_string(v.as_int());
      const double d = v.as_double();
      if (!std::isfinite(d)) return InvalidArgument("a number out of range in enum/const");
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, d);
      return std::string(buf, r.ptr);
    }
    case Json::Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < v.array().size(); ++i) {
        LLM_ASSIGN_OR_RETURN(std::string e, JsonDump(v.array()[i]));
        out += (i ? "," : "") + e;
      }
      return out + "]";
    }
    case Json::Type::kObject: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.object()) {
        LLM_ASSIGN_OR_RETURN(std::string s, JsonDump(e));
        out += (first ? "" : ",") + JsonString(k) + ":" + s;
        first = false;
      }
      return out + "}";
    }
  }
  return InternalError("unknown JSON type");
}

StatusOr<std::string> IntRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  // Bounds beyond +-1e18 are clamped: digits(1e18) = 19 still fits uint64
  // arithmetic below, and such bounds are never reached in practice.
  constexpr int64_t kLimit = 1000000000000000000LL;
  if (lo && *lo < -kLimit) lo = -kLimit;
  if (hi && *hi > kLimit) hi = kLimit;
  if (lo && hi && *lo > *hi) return InvalidArgument("the integer range is empty");
  std::vector<std::string> alts;
  // Negative part: -m for m in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t mlo = (hi && *hi < 0) ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> mhi;
    if (lo) mhi = static_cast<uint64_t>(-*lo);
    std::vector<std::string> neg;
    NonNegRange(mlo, mhi, &neg);
    for (auto& n : neg) alts.push_back("\"-\" " + n);
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = (lo && *lo > 0) ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    NonNegRange(a, b, &alts);
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::optional<std::string> FormatBody(std::string_view f) {
  // Dates: every month has days 01..28; 29 and 30 exist except in February,
  // 31 in the long months. Years 1000..9999 (no leap-day reasoning needed).
  static const std::string kDate =
      "[1-9] [0-9]{3} \"-\" ( ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )"
      " | ( \"0\" [13-9] | \"1\" [0-2] ) \"-\" ( \"29\" | \"30\" )"
      " | ( \"0\" [13578] | \"1\" [02] ) \"-31\" )";
  // RFC 3339 full-time: seconds required, offset required (jsonschema's
  // checker insists on both).
  static const std::string kTime =
      "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )?"
      " ( \"Z\" | [+\\x2D] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )";
  static const std::string kLabel = "[a-zA-Z0-9] ( [a-zA-Z0-9\\x2D]{0,61} [a-zA-Z0-9] )?";
  // Counts are bounded (at most 8 labels, path segments, 64-character
  // queries): every value stays finite, so a model cannot wander on forever
  // inside a host name or a path (seen with SmolLM2 on unbounded `*`).
  static const std::string kHost = kLabel + " ( \".\" " + kLabel + " ){0,7}";
  static const std::string kOctet = "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9] )";
  if (f == "date") return kDate;
  if (f == "time") return kTime;
  if (f == "date-time") return kDate + " \"T\" " + kTime;
  if (f == "uuid")
    return "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
  // E-mail addresses are narrowed further (local part <= 32, domain labels
  // <= 24 characters, at most 4 labels): an array of 4 addresses of random
  // characters at the RFC limits ran a SmolLM2 sample past 1024 tokens.
  static const std::string kMailLabel = "[a-zA-Z0-9] ( [a-zA-Z0-9\\x2D]{0,22} [a-zA-Z0-9] )?";
  if (f == "email")
    return "[a-zA-Z0-9] [a-zA-Z0-9._+\\x2D]{0,31} \"@\" " + kMailLabel + " ( \".\" " + kMailLabel + " ){1,3}";
  if (f == "ipv4") return kOctet + " ( \".\" " + kOctet + " ){3}";
  if (f == "hostname") return kHost;
  if (f == "uri" || f == "url") {
    static const std::string kPchar = "[a-zA-Z0-9._~!$&'()*+,;=:@\\x2D]";
    return "[a-zA-Z] [a-zA-Z0-9+.\\x2D]{0,15} \"://\" " + kHost + " ( \"/\" " + kPchar + "{0,32} ){0,8}" +
           " ( \"?\" [a-zA-Z0-9._~!$&'()*+,;=:@/?\\x2D]{0,64} )? ( \"#\" [a-zA-Z0-9._~!$&'()*+,;=:@/?\\x2D]{0,64} )?";
  }
  return std::nullopt;
}

}  // namespace llm::gbnf
