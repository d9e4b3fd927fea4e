// How deep the JSON a client sends may nest, checked on the raw bytes before
// anything walks it. nlohmann::json parses iteratively, but copying, dumping,
// comparing and destroying parts of a value, and the library's own JSON
// readers, recurse once per level: a body nested 100,000 levels deep would
// overflow a worker's stack on the way from the parsed body to the schema
// compiler. Every JSON text the server parses goes through these checks
// first, so nothing downstream ever sees more than kMaxFieldDepth levels.
//
// Depths count containers ({ and [), the value's own brackets being level 1;
// scalars are level 0. Measured from each top-level field's value:
//
//   field                         limit  why
//   response_format, functions    130    a JSON Schema (128) two levels in
//   tools                         131    a JSON Schema (128) three levels in
//   messages                      69     tool-call arguments (64) five levels in
//   any other field               64
//   a body that is not an object  64
//
// and kMaxValueDepth for a JSON text inside a string (tool-call "arguments").
// Pure functions: fuzzed with the request path (tests/fuzz/fuzz_server.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace server {

inline constexpr size_t kMaxBodyBytes = size_t{16} << 20;  // larger bodies: 413, chunked ones too
inline constexpr size_t kMaxNameBytes = 256;               // "model" and other identifiers
inline constexpr int kMaxSchemaDepth = 128;  // as the library's JSON Schema reader
inline constexpr int kMaxValueDepth = 64;    // any other JSON value
inline constexpr int kMaxFieldDepth = kMaxSchemaDepth + 3;  // the largest limit in the table above

// The limit for top-level field `key` (the table above).
int FieldDepthLimit(std::string_view key);

// The nesting depth of JSON text `text` (well-formed or not: brackets inside
// strings are skipped), counting stops at limit + 1. Linear, no allocation.
int NestingDepth(std::string_view text, int limit);

// Checks a request body against the table. On a violation returns false and
// sets *field (the top-level field, "" for the body itself) and *limit.
bool BodyDepthOk(std::string_view body, std::string* field, int* limit);

// Parses `text` when it nests at most `max_depth` levels; otherwise, or when
// it is not JSON, returns a discarded value (is_discarded()).
nlohmann::json ParseBounded(std::string_view text, int max_depth);

// A request body: nesting checked first (BodyDepthOk), then parsed, and
// refused when an object repeats a key (JSON leaves the meaning of that
// open; most parsers keep the last, so a validator in front of us could see
// another request than we would run). False with *param (the field, "" for
// none), *code and *message on a problem.
bool ParseRequestBody(std::string_view text, nlohmann::json* body, std::string* param, std::string* code,
                      std::string* message);

}  // namespace server
