// A small JSON DOM: enough to read tokenizer.json, tokenizer_config.json,
// config.json and test vectors. Parsing is strict (RFC 8259), bounded in depth,
// and reports the byte offset of the first error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace llm {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, Json>;

  Json() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  // True for a number written without fraction or exponent that fits int64.
  bool is_int() const { return type_ == Type::kNumber && is_int_; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors return a neutral value (false, 0, "", empty) on a type mismatch
  // so callers can check the type once and read without branching.
  bool as_bool() const { return type_ == Type::kBool && bool_; }
  double as_double() const { return type_ == Type::kNumber ? double_ : 0.0; }
  // The exact integer when is_int(); otherwise the double truncated.
  int64_t as_int() const;
  const std::string& as_string() const { return string_; }
  const std::vector<Json>& array() const { return array_; }
  const std::vector<Member>& object() const { return object_; }

  size_t size() const { return type_ == Type::kArray ? array_.size() : object_.size(); }
  // Array element; a null Json when out of range or not an array.
  const Json& operator[](size_t i) const;
  // Object member by key (first match, linear scan: iterate object() for big
  // maps). nullptr when absent or not an object.
  const Json* Find(std::string_view key) const;

  // Builders (used by the parser and by tests).
  static Json Null() { return Json(); }
  static Json Bool(bool b);
  static Json Number(double d);
  static Json Int(int64_t i);
  static Json String(std::string s);
  static Json Array(std::vector<Json> a);
  static Json Object(std::vector<Member> o);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  double double_ = 0.0;
  int64_t int_ = 0;
  std::string string_;
  std::vector<Json> array_;
  std::vector<Member> object_;
};

// Parses one JSON document (surrounding whitespace allowed, nothing else).
// Errors: LLM_ERR_INVALID_ARGUMENT with the byte offset in the message.
StatusOr<Json> ParseJson(std::string_view text, int max_depth = 512);

}  // namespace llm
