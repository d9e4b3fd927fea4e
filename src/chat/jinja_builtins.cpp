// Operators, attribute and item access, global functions and the methods of
// str and dict. Filters and tests are in jinja_filters.cpp.
#include <cmath>
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_strings.h"

namespace llm::jinja {

const Value* CallArgs::Get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Status TemplateError(const std::string& what) { return InvalidArgument("template error: " + what); }

namespace {

// The error for using an undefined value: its hint, as jinja2's UndefinedError.
Status UndefinedError(const Value& v) {
  return TemplateError(v.str().empty() ? std::string("use of an undefined value") : v.str());
}

// jinja2's object_type_repr, quoted for attribute hints.
std::string TypeRepr(const Value& v) { return v.is_none() ? "None" : std::string(v.TypeName()) + " object"; }
Value NoAttribute(const Value& obj, const std::string& name) {
  std::string hint = "'";  // built piecewise: GCC 12 warns (-Wrestrict) on "'" + std::string
  hint += TypeRepr(obj);
  hint += "' has no attribute '";
  hint += name;
  hint += "'";
  return Value::Undefined(std::move(hint));
}
Value NoElement(const Value& obj, int64_t i) {
  return Value::Undefined(TypeRepr(obj) + " has no element " + std::to_string(i));
}

bool IsMethod(const Value& obj, const std::string& name) {
  static const char* const kStr[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                     "upper", "lower", "title", "capitalize", "replace", "find", "rfind", "count",
                                     "join", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper",
                                     "splitlines"};
  static const char* const kDict[] = {"items", "keys", "values", "get"};
  if (obj.is_string()) {
    for (const char* m : kStr)
      if (name == m) return true;
  } else if (obj.is_dict()) {
    for (const char* m : kDict)
      if (name == m) return true;
  }
  return false;
}

Value Bind(const Value& obj, const std::string& name) {
  Function f;
  f.name = name;
  f.self = obj;
  return Value::MakeFunction(std::move(f));
}

// Python's index normalisation; false when out of range.
bool NormalizeIndex(int64_t* i, size_t n) {
  if (*i < 0) *i += static_cast<int64_t>(n);
  return *i >= 0 && *i < static_cast<int64_t>(n);
}

StatusOr<int64_t> CheckedInt(const char* op, __int128 r) {
  if (r > INT64_MAX || r < INT64_MIN) return TemplateError(std::string("integer overflow in '") + op + "'");
  return static_cast<int64_t>(r);
}

Status OperandError(const std::string& op, const Value& a, const Value& b) {
  return TemplateError("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() +
                       "'");
}

StatusOr<Value> Repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::String("") : Value::MakeList({});
  size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
  if (unit != 0 && static_cast<uint64_t>(n) > kMaxBuiltinSize / unit) return TemplateError("repetition too large");
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::MakeList(std::move(out));
}

}  // namespace

StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.ToString() + b.ToString();
    if (s.size() > kMaxBuiltinSize) return TemplateError("string too large");
    return Value::String(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  bool ints = a.is_number() && b.is_number() && !a.is_float() && !b.is_float();
  bool nums = a.is_number() && b.is_number();
  __int128 x = a.is_number() ? a.as_int() : 0, y = b.is_number() ? b.as_int() : 0;
  double fx = a.is_number() ? a.as_double() : 0, fy = b.is_number() ? b.as_double() : 0;
  if (op == "+") {
    if (ints) {
      LLM_ASSIGN_OR_RETURN(int64_t r, CheckedInt("+", x + y));
      return Value::Int(r);
    }
    if (nums) return Value::Float(fx + fy);
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > kMaxBuiltinSize) return TemplateError("string too large");
      return Value::String(a.str() + b.str());
    }
    if (a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(l));
    }
    if (a.is_string() || b.is_string())
      return TemplateError(std::string("can only concatenate str (not \"") +
                           (a.is_string() ? b.TypeName() : a.TypeName()) + "\") to str");
    return OperandError(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      LLM_ASSIGN_OR_RETURN(int64_t r, CheckedInt("-", x - y));
      return Value::Int(r);
    }
    if (nums) return Value::Float(fx - fy);
    return OperandError(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      LLM_ASSIGN_OR_RETURN(int64_t r, CheckedInt("*", x * y));
      return Value::Int(r);
    }
    if (nums) return Value::Float(fx * fy);
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) return Repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) return Repeat(b, a.as_int());
    return OperandError(op, a, b);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (!nums) {
      if (op == "%" && a.is_string()) return TemplateError("printf-style string formatting is not supported");
      return OperandError(op, a, b);
    }
    if (fy == 0) return TemplateError(ints && op != "/" ? "integer division or modulo by zero" : "division by zero");
    if (op == "/") return Value::Float(fx / fy);
    if (ints) {
      __int128 q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      {
      LLM_ASSIGN_OR_RETURN(int64_t res, CheckedInt(op.c_str(), op == "//" ? q : r));
      return Value::Int(res);
    }
    }
    // CPython's float_divmod.
    double m = std::fmod(fx, fy);
    double div = (fx - m) / fy;
    if (m != 0 && ((fy < 0) != (m < 0))) {
      m += fy;
      div -= 1.0;
    }
    double fdiv = std::floor(div);
    if (div - fdiv > 0.5) fdiv += 1.0;
    if (m == 0) m = std::copysign(0.0, fy);
    return Value::Float(op == "//" ? fdiv : m);
  }
  if (op == "**") {
    if (ints && y >= 0) {
      __int128 r = 1;
      for (__int128 i = 0; i < y; ++i) {
        r *= x;
        if (r > INT64_MAX || r < INT64_MIN) return TemplateError("integer overflow in '**'");
        if (r == 0 || r == 1) break;
      }
      return Value::Int(static_cast<int64_t>(r));
    }
    if (nums) return Value::Float(std::pow(fx, fy));
    return OperandError(op, a, b);
  }
  return TemplateError("unknown operator '" + op + "'");
}

StatusOr<bool> Contains(const Value& c, const Value& item) {
  if (c.is_string()) {
    if (!item.is_string())
      return TemplateError(std::string("'in <string>' requires string as left operand, not ") + item.TypeName());
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_list()) {
    for (const Value& v : c.list())
      if (Equal(v, item)) return true;
    return false;
  }
  if (c.is_dict()) return item.is_string() && c.dict().Find(item.str()) != nullptr;
  if (c.is_undefined()) return false;
  return TemplateError(std::string("argument of type '") + c.TypeName() + "' is not iterable");
}

StatusOr<Value> GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (IsMethod(obj, name)) return Bind(obj, name);
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  }
  return NoAttribute(obj, name);
}

StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (key.is_number() && !key.is_float() && (obj.is_list() || obj.is_string())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      if (!NormalizeIndex(&i, obj.list().size())) return NoElement(obj, key.as_int());
      return obj.list()[static_cast<size_t>(i)];
    }
    std::u32string s = ToU32(obj.str());
    if (!NormalizeIndex(&i, s.size())) return NoElement(obj, key.as_int());
    return Value::String(FromU32(s.substr(static_cast<size_t>(i), 1)));
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(TypeRepr(obj) + " has no element " + key.Repr());
}

StatusOr<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (!obj.is_list() && !obj.is_string()) {
    if (obj.is_undefined()) return UndefinedError(obj);
    return Value();
  }
  auto as_index = [](const Value& v, bool* given) -> StatusOr<int64_t> {
    *given = !v.is_undefined() && !v.is_none();
    if (!*given) return int64_t{0};
    if (!v.is_number() || v.is_float()) return TemplateError("slice indices must be integers or None");
    return v.as_int();
  };
  bool has_start, has_stop, has_step;
  LLM_ASSIGN_OR_RETURN(int64_t st, as_index(step, &has_step));
  if (!has_step) st = 1;
  if (st == 0) return TemplateError("slice step cannot be zero");
  std::u32string chars = obj.is_string() ? ToU32(obj.str()) : std::u32string();
  int64_t n = static_cast<int64_t>(obj.is_string() ? chars.size() : obj.list().size());
  LLM_ASSIGN_OR_RETURN(int64_t lo, as_index(start, &has_start));
  LLM_ASSIGN_OR_RETURN(int64_t hi, as_index(stop, &has_stop));
  auto clamp = [&](int64_t v, bool given, int64_t def) {
    if (!given) return def;
    if (v < 0) v += n;
    if (st > 0) return v < 0 ? 0 : (v > n ? n : v);
    return v < 0 ? -1 : (v >= n ? n - 1 : v);
  };
  lo = clamp(lo, has_start, st > 0 ? 0 : n - 1);
  hi = clamp(hi, has_stop, st > 0 ? n : -1);
  std::u32string s_out;
  List l_out;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    if (obj.is_string()) s_out += chars[static_cast<size_t>(i)];
    else l_out.push_back(obj.list()[static_cast<size_t>(i)]);
  }
  return obj.is_string() ? Value::String(FromU32(s_out)) : Value::MakeList(std::move(l_out));
}

StatusOr<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return List{};
    case Value::Kind::kList: return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.dict().items) keys.push_back(Value::String(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : ToU32(v.str())) chars.push_back(Value::String(FromU32(std::u32string(1, c))));
      return chars;
    }
    default: return TemplateError(std::string("'") + v.TypeName() + "' object is not iterable");
  }
}

Value BuiltinGlobal(const std::string& name) {
  static const char* const kGlobals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};
  for (const char* g : kGlobals) {
    if (name == g) {
      Function f;
      f.name = name;
      return Value::MakeFunction(std::move(f));
    }
  }
  return Value();
}

namespace {

StatusOr<Value> Range(const CallArgs& a) {
  int64_t v[3] = {0, 0, 1};
  if (a.pos.empty() || a.pos.size() > 3) return TemplateError("range expected 1 to 3 arguments");
  for (size_t i = 0; i < a.pos.size(); ++i) {
    if (!a.pos[i].is_number() || a.pos[i].is_float()) return TemplateError("range() arguments must be integers");
  }
  if (a.pos.size() == 1) v[1] = a.pos[0].as_int();
  else for (size_t i = 0; i < a.pos.size(); ++i) v[i] = a.pos[i].as_int();
  if (v[2] == 0) return TemplateError("range() arg 3 must not be zero");
  __int128 count = v[2] > 0 ? (static_cast<__int128>(v[1]) - v[0] + v[2] - 1) / v[2]
                            : (static_cast<__int128>(v[0]) - v[1] - v[2] - 1) / -v[2];
  if (count > kMaxRange)
    return TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List out;
  for (__int128 i = 0; i < count; ++i) out.push_back(Value::Int(static_cast<int64_t>(v[0] + i * v[2])));
  return Value::MakeList(std::move(out));
}

StatusOr<Value> MakeMapping(const CallArgs& a, bool ns) {
  Dict d;
  if (!a.pos.empty()) {
    if (a.pos.size() > 1 || !a.pos[0].is_dict()) return TemplateError("expected keyword arguments or one dict");
    d = a.pos[0].dict();
  }
  for (const auto& [k, v] : a.kw) d.Set(k, v);
  return ns ? Value::MakeNamespace(std::move(d)) : Value::MakeDict(std::move(d));
}

StatusOr<Value> Strftime(const CallArgs& a) {
  const Value* fmt = a.Get(0, "format");
  if (fmt == nullptr || !fmt->is_string()) return TemplateError("strftime_now expects a format string");
  if (fmt->str().size() > 256) return TemplateError("strftime_now: format too long");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[1024];
  size_t n = std::strftime(buf, sizeof buf, fmt->str().c_str(), &tm);
  return Value::String(std::string(buf, n));
}

StatusOr<Value> DictMethod(const Value& self, const std::string& m, const CallArgs& a) {
  if (m == "get") {
    const Value* key = a.Get(0, "key");
    if (key == nullptr) return TemplateError("get expected at least 1 argument");
    if (key->is_string())
      if (const Value* v = self.dict().Find(key->str())) return *v;
    const Value* def = a.Get(1, "default");
    return def != nullptr ? *def : Value::None();
  }
  List out;
  for (const auto& [k, v] : self.dict().items) {
    if (m == "items") out.push_back(Value::MakeTuple({Value::String(k), v}));
    else if (m == "keys") out.push_back(Value::String(k));
    else out.push_back(v);
  }
  return Value::MakeList(std::move(out));
}

}  // namespace

StatusOr<Value> CallFunction(const Function& f, const CallArgs& a) {
  if (f.name == "loop.cycle") {
    if (a.pos.empty()) return TemplateError("no items for cycling given");
    const Value* index0 = f.self.dict().Find("index0");
    return a.pos[static_cast<size_t>(index0 != nullptr ? index0->as_int() : 0) % a.pos.size()];
  }
  if (f.self.is_string()) return StringMethod(f.self.str(), f.name, a);
  if (f.self.is_dict()) return DictMethod(f.self, f.name, a);
  if (f.name == "range") return Range(a);
  if (f.name == "namespace") return MakeMapping(a, true);
  if (f.name == "dict") return MakeMapping(a, false);
  if (f.name == "strftime_now") return Strftime(a);
  if (f.name == "raise_exception") {
    const Value* msg = a.Get(0, "message");
    // The message is the template author's, verbatim: it is what callers show.
    return InvalidArgument(msg != nullptr ? msg->ToString() : std::string("raise_exception"));
  }
  return TemplateError("'" + f.name + "' is not callable");
}

}  // namespace llm::jinja
