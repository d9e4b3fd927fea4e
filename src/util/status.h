// Status / StatusOr: how every internal function reports failure.
// Codes are the public llm_status values, so the C API shims pass them through
// unchanged; the message becomes the caller's thread-local llm_last_error().
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include "llm.h"

namespace llm {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(llm_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == LLM_OK; }
  llm_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  llm_status code_ = LLM_OK;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {LLM_ERR_INVALID_ARGUMENT, std::move(m)}; }
inline Status ModelFormatError(std::string m) { return {LLM_ERR_MODEL_FORMAT, std::move(m)}; }
inline Status IoError(std::string m) { return {LLM_ERR_IO, std::move(m)}; }
inline Status Unsupported(std::string m) { return {LLM_ERR_UNSUPPORTED, std::move(m)}; }
inline Status OutOfMemory(std::string m) { return {LLM_ERR_OUT_OF_MEMORY, std::move(m)}; }
inline Status KvMismatch(std::string m) { return {LLM_ERR_KV_MISMATCH, std::move(m)}; }
inline Status KvCorrupt(std::string m) { return {LLM_ERR_KV_CORRUPT, std::move(m)}; }
inline Status InternalError(std::string m) { return {LLM_ERR_INTERNAL, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT
  StatusOr(T value) : v_(std::move(value)) {}                                     // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace llm

#define LLM_CONCAT_INNER(a, b) a##b
#define LLM_CONCAT(a, b) LLM_CONCAT_INNER(a, b)

// Return early from a Status-returning function when `expr` fails.
#define LLM_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::llm::Status llm_status_tmp_ = (expr);  \
    if (!llm_status_tmp_.ok()) return llm_status_tmp_; \
  } while (0)

// `LLM_ASSIGN_OR_RETURN(auto x, F());` unwraps a StatusOr or returns its error.
#define LLM_ASSIGN_OR_RETURN(lhs, expr) \
  LLM_ASSIGN_OR_RETURN_IMPL(LLM_CONCAT(llm_statusor_, __LINE__), lhs, expr)
#define LLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
