// Unicode general categories for \p{...} / \P{...} in JSON Schema patterns
// (schema_pattern.cpp, issue 29): the code point ranges of a category,
// from tables generated out of Python's unicodedata
// (tools/gen_unicode_classes.py -> unicode_classes.inc).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace llm::constrain {

// `name`: a two-letter category ("Lu", "Nd", "Zs", ...), a one-letter one
// (the union: "L", "N", "Z", ...), "LC" / "L&" (Lu, Ll, Lt), "Any" or
// "ASCII"; also spelled "gc=Lu" / "General_Category=Lu". False for any
// other name (scripts, blocks, binary properties: not carried).
bool UnicodeCategory(std::string_view name, std::vector<std::pair<uint32_t, uint32_t>>* out);

}  // namespace llm::constrain
