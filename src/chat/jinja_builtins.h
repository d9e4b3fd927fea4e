// The built-in filters, tests, global functions and methods (str.strip,
// dict.items...) of the interpreter, with jinja2's and Python's semantics.
// Pure functions of their arguments: the evaluator (jinja_template.cpp)
// handles everything that needs the template (macros, loops, scopes).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"
#include "util/status.h"

namespace llm::jinja {

// Largest string or list a builtin may build (str * n, range, join...), so a
// hostile template cannot allocate without bound.
inline constexpr size_t kMaxBuiltinSize = 16u << 20;
// The sandbox's limit on range() (jinja2's MAX_RANGE).
inline constexpr int64_t kMaxRange = 100000;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional i, else keyword `name`, else nullptr.
  const Value* Get(size_t i, std::string_view name) const;
};

// An error as the evaluator reports it: "template error: <what>".
Status TemplateError(const std::string& what);

// Attribute `name` of obj (jinja2's environment.getattr: a method of the
// object, then an item): undefined when absent. Undefined obj: an error.
StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
// obj[key] (environment.getitem: an item, then an attribute of that name).
StatusOr<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step], missing parts undefined.
StatusOr<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The elements a for loop (or a filter) iterates: list items, dict keys,
// string characters; nothing for undefined; an error otherwise.
StatusOr<List> Iterate(const Value& v);

StatusOr<Value> ApplyFilter(const std::string& name, const Value& v, const CallArgs& args);
StatusOr<bool> ApplyTest(const std::string& name, const Value& v, const CallArgs& args);
// Global functions (range, namespace, dict, raise_exception, strftime_now)
// and methods bound by GetAttr. Not macros.
StatusOr<Value> CallFunction(const Function& f, const CallArgs& args);
// The built-in global of this name, or undefined.
Value BuiltinGlobal(const std::string& name);

// Python's binary operators (+ - * / // % **) on values; `~` concatenates.
StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b);
// `a in b`.
StatusOr<bool> Contains(const Value& container, const Value& item);

}  // namespace llm::jinja
