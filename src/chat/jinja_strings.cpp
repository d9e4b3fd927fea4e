#include "chat/jinja_strings.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace llm::jinja {

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string u = ToU32(s);
  std::u32string set = chars != nullptr ? ToU32(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars == nullptr ? IsPySpace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip(u[b])) ++b;
  if (right)
    while (e > b && strip(u[e - 1])) --e;
  return FromU32(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t left = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep != nullptr) {
    size_t i = 0;
    while (left-- > 0) {
      size_t p = s.find(*sep, i);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(i, p - i));
      i = p + sep->size();
    }
    out.emplace_back(s.substr(i));
    return out;
  }
  std::u32string u = ToU32(s);
  size_t i = 0, n = u.size();
  while (left-- > 0) {
    while (i < n && IsPySpace(u[i])) ++i;
    if (i == n) break;
    size_t j = i++;
    while (i < n && !IsPySpace(u[i])) ++i;
    out.push_back(FromU32(std::u32string_view(u).substr(j, i - j)));
  }
  if (i < n) {
    while (i < n && IsPySpace(u[i])) ++i;
    if (i != n) out.push_back(FromU32(std::u32string_view(u).substr(i)));
  }
  return out;
}

namespace {

char32_t Upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t Lower(char32_t c) { return static_cast<char32_t>(UnicodeToLower(static_cast<uint32_t>(c))); }
bool IsCased(char32_t c) { return IsLetter(static_cast<uint32_t>(c)); }

std::string MapChars(std::string_view s, char32_t (*f)(char32_t)) {
  std::u32string u = ToU32(s);
  for (char32_t& c : u) c = f(c);
  return FromU32(u);
}

std::string Reverse(std::string_view s) {
  std::u32string u = ToU32(s);
  std::reverse(u.begin(), u.end());
  return FromU32(u);
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapChars(s, Upper); }
std::string PyLower(std::string_view s) { return MapChars(s, Lower); }

std::string PyTitle(std::string_view s) {
  std::u32string u = ToU32(s);
  bool prev_cased = false;
  for (char32_t& c : u) {
    c = prev_cased ? Lower(c) : Upper(c);
    prev_cased = IsCased(c);
  }
  return FromU32(u);
}

std::string PyCapitalize(std::string_view s) {
  std::u32string u = ToU32(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? Upper(u[i]) : Lower(u[i]);
  return FromU32(u);
}

StatusOr<std::string> PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  int64_t left = count < 0 ? INT64_MAX : count;
  if (from.empty()) {  // Python inserts `to` around every character
    std::u32string u = ToU32(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (left-- > 0) out += to;
      if (i < u.size()) out += FromU32(std::u32string_view(u).substr(i, 1));
      if (out.size() > kMaxBuiltinSize) return TemplateError("string too large");
    }
    return out;
  }
  size_t i = 0;
  while (left-- > 0) {
    size_t p = s.find(from, i);
    if (p == std::string_view::npos) break;
    out.append(s.substr(i, p - i));
    out.append(to);
    i = p + from.size();
    if (out.size() > kMaxBuiltinSize) return TemplateError("string too large");
  }
  out.append(s.substr(i));
  return out;
}

namespace {

StatusOr<const std::string*> OptString(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.Get(i, name);
  if (v == nullptr || v->is_none() || v->is_undefined()) return static_cast<const std::string*>(nullptr);
  if (!v->is_string()) return TemplateError(std::string(name) + " must be a string or None");
  return &v->str();
}

StatusOr<int64_t> OptInt(const CallArgs& a, size_t i, const char* name, int64_t def) {
  const Value* v = a.Get(i, name);
  if (v == nullptr || v->is_none()) return def;
  if (!v->is_number() || v->is_float()) return TemplateError(std::string(name) + " must be an integer");
  return v->as_int();
}

Value StringList(std::vector<std::string> parts) {
  List l;
  for (auto& p : parts) l.push_back(Value::String(std::move(p)));
  return Value::MakeList(std::move(l));
}

// startswith / endswith with a str or a tuple of them.
StatusOr<Value> Affix(const std::string& s, const CallArgs& a, bool start) {
  const Value* v = a.Get(0, "prefix");
  if (v == nullptr) return TemplateError("startswith/endswith expected 1 argument");
  List options = v->is_list() ? v->list() : List{*v};
  for (const Value& o : options) {
    if (!o.is_string()) return TemplateError("startswith/endswith arguments must be str");
    const std::string& p = o.str();
    if (p.size() <= s.size() && (start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0))
      return Value::Bool(true);
  }
  return Value::Bool(false);
}

template <typename Pred>
Value AllChars(const std::string& s, Pred pred) {
  std::u32string u = ToU32(s);
  if (u.empty()) return Value::Bool(false);
  return Value::Bool(std::all_of(u.begin(), u.end(), pred));
}

}  // namespace

StatusOr<Value> StringMethod(const std::string& s, const std::string& m, const CallArgs& a) {
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    LLM_ASSIGN_OR_RETURN(const std::string* chars, OptString(a, 0, "chars"));
    return Value::String(PyStrip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "split" || m == "rsplit") {
    LLM_ASSIGN_OR_RETURN(const std::string* sep, OptString(a, 0, "sep"));
    LLM_ASSIGN_OR_RETURN(int64_t maxsplit, OptInt(a, 1, "maxsplit", -1));
    if (sep != nullptr && sep->empty()) return TemplateError("empty separator");
    if (m == "split") return StringList(PySplit(s, sep, maxsplit));
    // rsplit: split the reversed text with the reversed separator.
    std::string rsep = sep != nullptr ? Reverse(*sep) : std::string();
    std::vector<std::string> parts = PySplit(Reverse(s), sep != nullptr ? &rsep : nullptr, maxsplit);
    std::reverse(parts.begin(), parts.end());
    for (auto& p : parts) p = Reverse(p);
    return StringList(std::move(parts));
  }
  if (m == "startswith" || m == "endswith") return Affix(s, a, m == "startswith");
  if (m == "upper") return Value::String(PyUpper(s));
  if (m == "lower") return Value::String(PyLower(s));
  if (m == "title") return Value::String(PyTitle(s));
  if (m == "capitalize") return Value::String(PyCapitalize(s));
  if (m == "replace") {
    const Value* from = a.Get(0, "old");
    const Value* to = a.Get(1, "new");
    if (from == nullptr || to == nullptr || !from->is_string() || !to->is_string())
      return TemplateError("replace expects two strings");
    LLM_ASSIGN_OR_RETURN(int64_t count, OptInt(a, 2, "count", -1));
    LLM_ASSIGN_OR_RETURN(std::string r, PyReplace(s, from->str(), to->str(), count));
    return Value::String(std::move(r));
  }
  if (m == "find" || m == "rfind" || m == "count") {
    const Value* sub = a.Get(0, "sub");
    if (sub == nullptr || !sub->is_string()) return TemplateError(m + " expects a string");
    const std::string& t = sub->str();
    if (m == "count") {
      if (t.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
      return Value::Int(n);
    }
    size_t p = m == "find" ? s.find(t) : s.rfind(t);
    return Value::Int(p == std::string::npos ? -1 : static_cast<int64_t>(CodePointCount(s.substr(0, p))));
  }
  if (m == "join") {
    const Value* items = a.Get(0, "iterable");
    if (items == nullptr) return TemplateError("join expects an iterable");
    LLM_ASSIGN_OR_RETURN(List l, Iterate(*items));
    std::string out;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!l[i].is_string()) return TemplateError("sequence item " + std::to_string(i) + ": expected str instance");
      if (i) out += s;
      out += l[i].str();
      if (out.size() > kMaxBuiltinSize) return TemplateError("string too large");
    }
    return Value::String(std::move(out));
  }
  if (m == "splitlines") {
    std::vector<std::string> lines;
    std::u32string u = ToU32(s), cur;
    for (size_t i = 0; i < u.size(); ++i) {
      char32_t c = u[i];
      bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
                 c == 0x2028 || c == 0x2029;
      if (!brk) {
        cur += c;
        continue;
      }
      if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      lines.push_back(FromU32(cur));
      cur.clear();
    }
    if (!cur.empty()) lines.push_back(FromU32(cur));
    return StringList(std::move(lines));
  }
  if (m == "isdigit") return AllChars(s, [](char32_t c) { return IsNumber(static_cast<uint32_t>(c)); });
  if (m == "isalpha") return AllChars(s, [](char32_t c) { return IsLetter(static_cast<uint32_t>(c)); });
  if (m == "isalnum")
    return AllChars(s, [](char32_t c) { return IsLetter(static_cast<uint32_t>(c)) || IsNumber(static_cast<uint32_t>(c)); });
  if (m == "isspace") return AllChars(s, [](char32_t c) { return IsPySpace(c); });
  if (m == "islower" || m == "isupper") {
    bool any = false;
    for (char32_t c : ToU32(s)) {
      if (!IsCased(c)) continue;
      any = true;
      if (m == "islower" ? Lower(c) != c : Upper(c) != c) return Value::Bool(false);
    }
    return Value::Bool(any);
  }
  return TemplateError("'str' object has no attribute '" + m + "'");
}

}  // namespace llm::jinja
