// jinja2's built-in filters and tests (the subset chat templates use), with
// transformers' `tojson` (json.dumps, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_builtins.h"
#include "chat/jinja_strings.h"

namespace llm::jinja {
namespace {

bool Flag(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.Get(i, name);
  return v != nullptr && v->Truthy();
}

// `attribute="a.b"` or an integer index, as jinja2's make_attrgetter.
StatusOr<Value> Attr(const Value& item, const Value& attr) {
  if (!attr.is_string()) return GetItem(item, attr);
  Value cur = item;
  size_t start = 0;
  const std::string& path = attr.str();
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    LLM_ASSIGN_OR_RETURN(cur, GetItem(cur, numeric ? Value::Int(std::atoll(part.c_str())) : Value::String(part)));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Arguments after the first `skip` positional ones, for a nested filter/test.
CallArgs Rest(const CallArgs& a, size_t skip) {
  CallArgs r;
  for (size_t i = skip; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

StatusOr<Value> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value::Int(0);
    case Value::Kind::kString: return Value::Int(static_cast<int64_t>(CodePointCount(v.str())));
    case Value::Kind::kList: return Value::Int(static_cast<int64_t>(v.list().size()));
    case Value::Kind::kDict: return Value::Int(static_cast<int64_t>(v.dict().items.size()));
    default: return TemplateError(std::string("object of type '") + v.TypeName() + "' has no len()");
  }
}

StatusOr<Value> ToJsonFilter(const Value& v, const CallArgs& a) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  JsonOptions o;
  o.ensure_ascii = Flag(a, 0, "ensure_ascii");
  if (const Value* indent = a.Get(1, "indent"); indent != nullptr && !indent->is_none()) {
    if (!indent->is_number() || indent->is_float() || indent->as_int() < 0 || indent->as_int() > 64)
      return TemplateError("tojson: indent must be an integer in [0, 64]");
    o.indent = static_cast<int>(indent->as_int());
  }
  if (const Value* sep = a.Get(2, "separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_list() || sep->list().size() != 2 || !sep->list()[0].is_string() || !sep->list()[1].is_string())
      return TemplateError("tojson: separators must be a pair of strings");
    o.item_sep = sep->list()[0].str();
    o.key_sep = sep->list()[1].str();
    if (o.item_sep.empty()) return TemplateError("tojson: empty item separator is not supported");
  }
  o.sort_keys = Flag(a, 3, "sort_keys");
  LLM_ASSIGN_OR_RETURN(std::string s, ToJson(v, o));
  return Value::String(std::move(s));
}

// select / reject / selectattr / rejectattr.
StatusOr<Value> SelectFilter(const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
  size_t skip = by_attr ? 1 : 0;
  const Value* attr = by_attr ? a.Get(0, "attribute") : nullptr;
  if (by_attr && attr == nullptr) return TemplateError("selectattr/rejectattr need an attribute");
  const Value* test = skip < a.pos.size() ? &a.pos[skip] : nullptr;
  if (test != nullptr && !test->is_string()) return TemplateError("test name must be a string");
  CallArgs test_args = Rest(a, skip + 1);
  test_args.kw.clear();
  List out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attr) {
      LLM_ASSIGN_OR_RETURN(subject, Attr(item, *attr));
    }
    bool ok;
    if (test == nullptr) ok = subject.Truthy();
    else {
      LLM_ASSIGN_OR_RETURN(ok, ApplyTest(test->str(), subject, test_args));
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

StatusOr<Value> MapFilter(const Value& v, const CallArgs& a) {
  LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
  List out;
  const Value* attr = nullptr;
  for (const auto& [k, val] : a.kw)
    if (k == "attribute") attr = &val;
  if (attr == nullptr && (a.pos.empty() || !a.pos[0].is_string())) return TemplateError("map needs a filter name or attribute=");
  const Value* def = nullptr;
  for (const auto& [k, val] : a.kw)
    if (k == "default") def = &val;
  CallArgs fargs = Rest(a, 1);
  fargs.kw.clear();
  for (const Value& item : items) {
    Value r;
    if (attr != nullptr) {
      LLM_ASSIGN_OR_RETURN(r, Attr(item, *attr));
      if (r.is_undefined() && def != nullptr) r = *def;
    } else {
      LLM_ASSIGN_OR_RETURN(r, ApplyFilter(a.pos[0].str(), item, fargs));
    }
    out.push_back(std::move(r));
  }
  return Value::MakeList(std::move(out));
}

StatusOr<Value> SortFilter(const Value& v, const CallArgs& a) {
  LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
  bool reverse = Flag(a, 0, "reverse");
  bool case_sensitive = Flag(a, 1, "case_sensitive");
  const Value* attr = a.Get(2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (attr != nullptr && !attr->is_none()) {
      LLM_ASSIGN_OR_RETURN(key, Attr(item, *attr));
    }
    if (!case_sensitive && key.is_string()) key = Value::String(PyLower(key.str()));
    keyed.emplace_back(std::move(key), item);
  }
  Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    auto lt = reverse ? Less(y.first, x.first) : Less(x.first, y.first);
    if (!lt.ok()) {
      err = lt.status();
      return false;
    }
    return *lt;
  });
  LLM_RETURN_IF_ERROR(err);
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::MakeList(std::move(out));
}

// jinja2's do_indent (lines split at \n only).
StatusOr<Value> Indent(const Value& v, const CallArgs& a) {
  const Value* w = a.Get(0, "width");
  std::string pad = w == nullptr   ? "    "
                    : w->is_string() ? w->str()
                                     : std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 256)), ' ');
  bool first = Flag(a, 1, "first"), blank = Flag(a, 2, "blank");
  std::string s = v.ToString() + "\n";
  std::vector<std::string> lines;
  for (size_t start = 0, nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(s.substr(start, nl - start));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  if (out.size() > kMaxBuiltinSize) return TemplateError("string too large");
  return Value::String(std::move(out));
}

}  // namespace

StatusOr<Value> ApplyFilter(const std::string& f, const Value& v, const CallArgs& a) {
  if (f == "trim") {
    const Value* chars = a.Get(0, "chars");
    const std::string* cs = chars != nullptr && chars->is_string() ? &chars->str() : nullptr;
    return Value::String(PyStrip(v.ToString(), cs, true, true));
  }
  if (f == "length" || f == "count") return Length(v);
  if (f == "default" || f == "d") {
    const Value* def = a.Get(0, "default_value");
    bool boolean = Flag(a, 1, "boolean");
    if (v.is_undefined() || (boolean && !v.Truthy())) return def != nullptr ? *def : Value::String("");
    return v;
  }
  if (f == "tojson") return ToJsonFilter(v, a);
  if (f == "upper") return Value::String(PyUpper(v.ToString()));
  if (f == "lower") return Value::String(PyLower(v.ToString()));
  if (f == "capitalize") return Value::String(PyCapitalize(v.ToString()));
  if (f == "title") return Value::String(PyTitle(v.ToString()));
  if (f == "string") return Value::String(v.ToString());
  if (f == "safe") return v;
  if (f == "replace") {
    const Value* from = a.Get(0, "old");
    const Value* to = a.Get(1, "new");
    if (from == nullptr || to == nullptr) return TemplateError("replace expects two arguments");
    const Value* count = a.Get(2, "count");
    int64_t n = count != nullptr && count->is_number() ? count->as_int() : -1;
    LLM_ASSIGN_OR_RETURN(std::string r, PyReplace(v.ToString(), from->ToString(), to->ToString(), n));
    return Value::String(std::move(r));
  }
  if (f == "join") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    const Value* sep = a.Get(0, "d");
    const Value* attr = a.Get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (attr != nullptr && !attr->is_none()) {
        LLM_ASSIGN_OR_RETURN(item, Attr(item, *attr));
      }
      if (i && sep != nullptr) out += sep->ToString();
      out += item.ToString();
      if (out.size() > kMaxBuiltinSize) return TemplateError("string too large");
    }
    return Value::String(std::move(out));
  }
  if (f == "first" || f == "last") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    if (items.empty()) return Value();
    return f == "first" ? items.front() : items.back();
  }
  if (f == "list") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    return Value::MakeList(std::move(items));
  }
  if (f == "reverse") {
    if (v.is_string()) {
      std::u32string u = ToU32(v.str());
      std::reverse(u.begin(), u.end());
      return Value::String(FromU32(u));
    }
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (f == "items") {
    if (v.is_undefined()) return Value::MakeList({});
    if (!v.is_dict()) return TemplateError("items filter expects a mapping");
    List out;
    for (const auto& [k, val] : v.dict().items) out.push_back(Value::MakeTuple({Value::String(k), val}));
    return Value::MakeList(std::move(out));
  }
  if (f == "int") {
    const Value* def = a.Get(0, "default");
    Value fallback = def != nullptr ? *def : Value::Int(0);
    if (v.is_number()) return v.is_float() ? Value::Int(static_cast<int64_t>(v.as_double())) : Value::Int(v.as_int());
    if (!v.is_string()) return fallback;
    std::string s = PyStrip(v.str(), nullptr, true, true);
    char* end = nullptr;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size()) return Value::Int(i);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
    return fallback;
  }
  if (f == "float") {
    if (v.is_number()) return Value::Float(v.as_double());
    const Value* def = a.Get(0, "default");
    if (v.is_string()) {
      std::string s = PyStrip(v.str(), nullptr, true, true);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return Value::Float(d);
    }
    return def != nullptr ? *def : Value::Float(0.0);
  }
  if (f == "abs") {
    if (!v.is_number()) return TemplateError(std::string("bad operand type for abs(): '") + v.TypeName() + "'");
    if (v.is_float()) return Value::Float(std::fabs(v.as_double()));
    if (v.as_int() == INT64_MIN) return TemplateError("integer overflow in abs");
    return Value::Int(std::llabs(v.as_int()));
  }
  if (f == "select" || f == "reject") return SelectFilter(v, a, false, f == "select");
  if (f == "selectattr" || f == "rejectattr") return SelectFilter(v, a, true, f == "selectattr");
  if (f == "map") return MapFilter(v, a);
  if (f == "sort") return SortFilter(v, a);
  if (f == "unique") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    List out;
    for (const Value& item : items) {
      bool seen = false;
      for (const Value& o : out) seen = seen || Equal(o, item);
      if (!seen) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (f == "indent") return Indent(v, a);
  if (f == "wordcount") return Value::Int(static_cast<int64_t>(PySplit(v.ToString(), nullptr, -1).size()));
  return TemplateError("no filter named '" + f + "'");
}

StatusOr<bool> ApplyTest(const std::string& t, const Value& v, const CallArgs& a) {
  const Value* arg = a.Get(0, "other");
  auto need_arg = [&]() -> Status {
    return arg == nullptr ? TemplateError("test '" + t + "' needs an argument") : Status::Ok();
  };
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_int();
  if (t == "float") return v.is_float();
  if (t == "boolean") return v.is_bool();
  if (t == "true") return v.is_bool() && v.as_bool();
  if (t == "false") return v.is_bool() && !v.as_bool();
  if (t == "mapping") return v.is_dict();
  if (t == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (t == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (t == "callable") return v.is_function();
  if (t == "odd" || t == "even") {
    if (!v.is_number() || v.is_float()) return TemplateError("odd/even need an integer");
    return (v.as_int() % 2 != 0) == (t == "odd");
  }
  if (t == "divisibleby") {
    LLM_RETURN_IF_ERROR(need_arg());
    if (!v.is_number() || !arg->is_number() || arg->as_double() == 0) return TemplateError("divisibleby needs non-zero numbers");
    if (v.is_float() || arg->is_float()) return std::fmod(v.as_double(), arg->as_double()) == 0;
    return v.as_int() % arg->as_int() == 0;
  }
  if (t == "eq" || t == "==" || t == "equalto" || t == "ne" || t == "!=") {
    LLM_RETURN_IF_ERROR(need_arg());
    return Equal(v, *arg) == (t != "ne" && t != "!=");
  }
  if (t == "lt" || t == "<" || t == "lessthan") {
    LLM_RETURN_IF_ERROR(need_arg());
    return Less(v, *arg);
  }
  if (t == "gt" || t == ">" || t == "greaterthan") {
    LLM_RETURN_IF_ERROR(need_arg());
    return Less(*arg, v);
  }
  if (t == "le" || t == "<=" || t == "ge" || t == ">=") {
    LLM_RETURN_IF_ERROR(need_arg());
    bool le = t == "le" || t == "<=";
    LLM_ASSIGN_OR_RETURN(bool lt, le ? Less(*arg, v) : Less(v, *arg));
    return !lt;
  }
  if (t == "in") {
    LLM_RETURN_IF_ERROR(need_arg());
    return Contains(*arg, v);
  }
  if (t == "sameas") {
    LLM_RETURN_IF_ERROR(need_arg());
    if (v.kind() != arg->kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == arg->as_bool();
    return Equal(v, *arg) && (v.is_int() || v.is_string());
  }
  if (t == "lower" || t == "upper") {
    std::string s = v.ToString();
    return t == "lower" ? PyLower(s) == s : PyUpper(s) == s;
  }
  return TemplateError("no test named '" + t + "'");
}

}  // namespace llm::jinja
