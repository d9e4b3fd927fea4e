// Pieces of GBNF grammar text shared by the JSON Schema compiler and its
// regex translator: quoting literals and character classes, JSON value
// serialisation (enum/const), decimal integer ranges and the string formats.
// Everything here returns grammar *text*; the constraint engine parses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/json.h"
#include "util/status.h"

namespace llm::gbnf {

// `bytes` as a GBNF string literal, quotes included ("a\"b"). Control bytes
// and the quote/backslash are escaped; other bytes (UTF-8 included) pass.
std::string Literal(std::string_view bytes);

// One code point as it may appear inside `[...]`: the class metacharacters
// (] [ \ ^ -) and control characters as \xHH / \uHHHH, others as UTF-8.
std::string ClassChar(uint32_t cp);

// `s` encoded as a JSON string, quotes included: what a model must write for
// a property name or a string enum value.
std::string JsonString(std::string_view s);

// Compact JSON text of `v` (the exact bytes an enum/const value may take).
// Fails on a non-finite number.
StatusOr<std::string> JsonDump(const Json& v);

// A grammar expression (parenthesised when it has alternatives) matching the
// decimal JSON integers in [lo, hi]; an absent bound is open. Written without
// leading zeros, "-0" never produced. Open ranges stop at 16 digits (or the
// bound's own length), an under-approximation that keeps outputs finite.
// lo > hi yields an error.
StatusOr<std::string> IntRange(std::optional<int64_t> lo, std::optional<int64_t> hi);

// The body (between the quotes) of a JSON string in `format`, or nullopt for
// a format this compiler does not know. Every string the body matches passes
// the format (and needs no JSON escape); not every valid one is matched (e.g.
// dates stop at day 28 in February, emails are plain ASCII).
std::optional<std::string> FormatBody(std::string_view format);

}  // namespace llm::gbnf
