#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/json.h"
#include "util/utf8.h"

namespace llm::jinja {

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
namespace {
uint16_t ChildDepth(int d) { return static_cast<uint16_t>(d < kMaxValueDepth ? d + 1 : kMaxValueDepth + 1); }
}  // namespace

Value Value::MakeList(List items) {
  Value v;
  v.kind_ = Kind::kList;
  for (const Value& e : items) v.depth_ = std::max(v.depth_, ChildDepth(e.depth_));
  if (items.empty()) v.depth_ = 1;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeTuple(List items) {
  Value v = MakeList(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::MakeDict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  for (const auto& kv : d.items) v.depth_ = std::max(v.depth_, ChildDepth(kv.second.depth_));
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::MakeNamespace(Dict d) {
  Value v = MakeDict(std::move(d));
  v.kind_ = Kind::kNamespace;
  v.depth_ = std::max<uint16_t>(v.depth_, kMaxValueDepth);  // > max when it holds a namespace
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::FromJson(const Json& j) {
  switch (j.type()) {
    case Json::Type::kNull: return None();
    case Json::Type::kBool: return Bool(j.as_bool());
    case Json::Type::kNumber: return j.is_int() ? Int(j.as_int()) : Float(j.as_double());
    case Json::Type::kString: return String(j.as_string());
    case Json::Type::kArray: {
      List l;
      for (const Json& e : j.array()) l.push_back(FromJson(e));
      return MakeList(std::move(l));
    }
    case Json::Type::kObject: {
      Dict d;
      for (const auto& [k, e] : j.object()) d.Set(k, FromJson(e));
      return MakeDict(std::move(d));
    }
  }
  return Value();
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::Set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "object";
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then Python's layout: positional for
  // exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (digits.size() <= static_cast<size_t>(exp) + 1) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + eb;
}

namespace {

// Code points Python's repr() escapes (not str.isprintable()); an
// approximation of the Unicode tables covering controls, format characters
// and separators.
bool IsPrintable(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c < 0xa0)) return false;
  if (c != ' ' && IsPySpace(c)) return false;
  if (c == 0xad || (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
      (c >= 0x2060 && c <= 0x2064) || c == 0xfeff || (c >= 0xd800 && c <= 0xdfff))
    return false;
  return true;
}

std::string StringRepr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : ToU32(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!IsPrintable(c)) {
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      AppendUtf8(c, &out);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return s_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatRepr(f_);
    case Kind::kString: return StringRepr(s_);
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].Repr();
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        out += (first ? "" : ", ") + StringRepr(k) + ": " + v.Repr();
        first = false;
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kFunction: return "<function " + fn_->name + ">";
  }
  return "";
}

bool Equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.str() == b.str();
    case K::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!Equal(a.list()[i], b.list()[i])) return false;
      return true;
    }
    case K::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().Find(k);
        if (o == nullptr || !Equal(v, *o)) return false;
      }
      return true;
    }
    case K::kNamespace: return &a.dict() == &b.dict();
    default: return false;
  }
}

StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order is code point order
  if (a.is_list() && b.is_list()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument(std::string("'<' not supported between instances of '") + a.TypeName() + "' and '" +
                         b.TypeName() + "'");
}

namespace {

void JsonChar(char32_t c, bool ensure_ascii, std::string* out) {
  char buf[16];
  switch (c) {
    case '"': *out += "\\\""; return;
    case '\\': *out += "\\\\"; return;
    case '\n': *out += "\\n"; return;
    case '\r': *out += "\\r"; return;
    case '\t': *out += "\\t"; return;
    case '\b': *out += "\\b"; return;
    case '\f': *out += "\\f"; return;
    default: break;
  }
  if (c < 0x20 || (ensure_ascii && c >= 0x7f && c < 0x10000)) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    *out += buf;
  } else if (ensure_ascii && c >= 0x10000) {
    uint32_t v = static_cast<uint32_t>(c) - 0x10000;
    std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    *out += buf;
  } else {
    AppendUtf8(c, out);
  }
}

void JsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (char32_t c : ToU32(s)) JsonChar(c, ensure_ascii, out);
  *out += '"';
}

Status JsonValue(const Value& v, const JsonOptions& o, int level, std::string* out) {
  if (level > 256) return InvalidArgument("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    *out += '\n';
    out->append(static_cast<size_t>(o.indent) * static_cast<size_t>(lvl), ' ');
  };
  const std::string item_sep = !o.item_sep.empty() ? o.item_sep : o.indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return Status::Ok();
    case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return Status::Ok();
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return Status::Ok();
    case Value::Kind::kFloat: {
      double d = v.as_double();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : FloatRepr(d);
      return Status::Ok();
    }
    case Value::Kind::kString: JsonString(v.str(), o.ensure_ascii, out); return Status::Ok();
    case Value::Kind::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return Status::Ok();
      }
      *out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        LLM_RETURN_IF_ERROR(JsonValue(v.list()[i], o, level + 1, out));
      }
      newline(level);
      *out += ']';
      return Status::Ok();
    }
    case Value::Kind::kDict: {
      if (v.dict().items.empty()) {
        *out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        JsonString(items[i]->first, o.ensure_ascii, out);
        *out += o.key_sep;
        LLM_RETURN_IF_ERROR(JsonValue(items[i]->second, o, level + 1, out));
      }
      newline(level);
      *out += '}';
      return Status::Ok();
    }
    default:
      return InvalidArgument(std::string("Object of type ") + v.TypeName() + " is not JSON serializable");
  }
}

}  // namespace

StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opts) {
  std::string out;
  LLM_RETURN_IF_ERROR(JsonValue(v, opts, 0, &out));
  return out;
}

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp;
    size_t len;
    DecodeUtf8(s, pos, &cp, &len);
    out += static_cast<char32_t>(cp);
    pos += len;
  }
  return out;
}

std::string FromU32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

}  // namespace llm::jinja
