// UTF-8 helpers shared by the tokenizer, the JSON reader and the streaming
// detokenizer. "Valid" means RFC 3629: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llm {

bool IsValidUtf8(std::string_view s);

// Decodes the code point starting at s[pos]. On success returns true and sets
// *cp and *len (1..4). On an invalid or truncated sequence returns false with
// *cp = U+FFFD and *len = 1, so a caller can skip one byte and continue.
bool DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp, size_t* len);

// Appends the UTF-8 form of cp. Surrogates and values above U+10FFFF are
// written as U+FFFD; returns false in that case.
bool AppendUtf8(uint32_t cp, std::string* out);
// The same encoding for any cp <= U+10FFFF, lone surrogates included
// (WTF-8): where code units, not characters, must stay apart (JSON keys
// written with \u escapes). Larger values are written as U+FFFD.
void AppendWtf8(uint32_t cp, std::string* out);

// Number of bytes of the UTF-8 sequence that lead byte `b` starts (1..4);
// 1 for a continuation or invalid byte.
size_t Utf8SequenceLength(unsigned char b);

// Length of the longest prefix of s that does not end inside an incomplete
// multi-byte sequence. Streaming output emits this prefix and holds back the
// rest until more bytes arrive. Only a tail that could still become a valid
// character is held back: an invalid byte counts as complete, so nothing is
// held forever.
size_t Utf8CompletePrefix(std::string_view s);

}  // namespace llm
