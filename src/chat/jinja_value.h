// The values a Jinja template computes with, with Python's semantics where a
// chat template can observe them: truthiness, equality, ordering, str() and
// repr() (what `{{ x }}` prints), and json.dumps (the `tojson` filter).
//
// Lists and dicts are shared (copying a Value copies a pointer), as in
// Python; templates cannot mutate them (the sandbox forbids it). Namespaces
// are the one mutable object (`{% set ns.x = 1 %}`). Every Value made during
// one render belongs to that render: nothing here is shared across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace llm {
class Json;
}

namespace llm::jinja {

class Value;
struct Dict;
struct Function;
using List = std::vector<Value>;

// Containers nest at most this deep (a namespace counts as this deep, so
// it cannot be put inside another container): recursion over values
// (printing, comparing, destroying) stays shallow, and no reference cycle
// can form.
inline constexpr int kMaxValueDepth = 64;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

  Value() = default;  // undefined
  // An undefined value that remembers why, for the error when it is used
  // ("'dict object' has no attribute 'x'", as jinja2 words it).
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value MakeList(List items);
  static Value MakeTuple(List items);  // a list that prints as (a, b)
  static Value MakeDict(Dict d);
  static Value MakeNamespace(Dict d);
  static Value MakeFunction(Function f);
  // A JSON document as Python's json.loads would give it.
  static Value FromJson(const Json& j);

  Kind kind() const { return kind_; }
  // 0 for scalars, 1 + the deepest element for containers.
  int depth() const { return depth_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }  // kString; kUndefined: the hint
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }   // kDict and kNamespace
  // Namespaces (set ns.x), and the loop object the evaluator advances in place.
  Dict& mutable_dict() const { return *dict_; }
  const Function& function() const { return *fn_; }

  // Python truthiness.
  bool Truthy() const;
  // Python str() of the value: what {{ value }} prints ("" for undefined).
  std::string ToString() const;
  // Python repr() (strings quoted): how values print inside lists and dicts.
  std::string Repr() const;
  // The Python type name, for error messages ("str", "list", "dict"...).
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  uint16_t depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;
};

// An insertion-ordered dict with string keys (what chat messages are).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value v);
};

// A callable: a built-in function (range, namespace, raise_exception...), a
// method bound to `self` ("strip" of a string), or a macro of the template.
struct Function {
  std::string name;
  Value self;                  // bound object for methods; undefined otherwise
  const void* macro = nullptr; // the template's macro node, if a macro
};

// Python ==.
bool Equal(const Value& a, const Value& b);
// Python <: numbers, strings (by code point), lists; else an error.
StatusOr<bool> Less(const Value& a, const Value& b);
// json.dumps's options (the defaults are those of transformers' tojson).
struct JsonOptions {
  int indent = -1;           // < 0: None (one line)
  bool sort_keys = false;
  bool ensure_ascii = false; // true: non-ASCII as \uXXXX (surrogate pairs)
  std::string item_sep;      // "" = json.dumps default ("," with indent, else ", ")
  std::string key_sep = ": ";
};
// json.dumps(v, ...). Fails for values JSON cannot hold (undefined, functions).
StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opts);
// Python repr() of a float ("1.0", "1e+20", "0.30000000000000004").
std::string FloatRepr(double d);

// --- strings as Python sees them: sequences of code points ----------------
std::u32string ToU32(std::string_view s);
std::string FromU32(std::u32string_view s);
size_t CodePointCount(std::string_view s);
// str.isspace() for one code point.
bool IsPySpace(char32_t c);

}  // namespace llm::jinja
