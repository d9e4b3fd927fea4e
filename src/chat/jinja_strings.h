// Python's str methods over UTF-8 text, by code point: strip, split,
// startswith, replace, case mapping... Case mapping is ASCII-only for upper
// case (lower case uses the tokenizer's Unicode table); chat templates apply
// it to role names and keywords.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_builtins.h"

namespace llm::jinja {

// str.strip / lstrip / rstrip; chars == nullptr: Python whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit) (sep == nullptr: runs of whitespace).
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);
// str.replace(old, new, count) (count < 0: all).
StatusOr<std::string> PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// A method of a str value, by name (GetAttr binds only known names).
StatusOr<Value> StringMethod(const std::string& self, const std::string& name, const CallArgs& args);

}  // namespace llm::jinja
