#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace llm {
namespace {

struct CategoryRun {
  uint32_t first, last;
  uint8_t cls;  // 1..7 as written by the generator (7 = other)
};
struct CodepointRange {
  uint32_t first, last;
};
struct CodepointPair {
  uint32_t from, to;
};

#include "tokenizer/unicode_data.inc"

UnicodeClass FromGenerated(uint8_t c) {
  return c == 7 ? UnicodeClass::kOther : static_cast<UnicodeClass>(c);
}

// The run holding cp (unassigned code points are in none), or nullptr.
const CategoryRun* FindRun(uint32_t cp) {
  // Last run whose first <= cp; cp is in it only if <= last.
  const auto* end = std::end(kCategoryRuns);
  const auto* it = std::upper_bound(std::begin(kCategoryRuns), end, cp,
                                    [](uint32_t v, const CategoryRun& r) { return v < r.first; });
  if (it == std::begin(kCategoryRuns)) return nullptr;
  --it;
  return cp <= it->last ? it : nullptr;
}

UnicodeClass LookupClass(uint32_t cp) {
  const CategoryRun* r = FindRun(cp);
  return r ? FromGenerated(r->cls) : UnicodeClass::kOther;
}

// ASCII dominates real text: answer it from a table built once.
const std::array<UnicodeClass, 128>& AsciiClasses() {
  static const std::array<UnicodeClass, 128> table = [] {
    std::array<UnicodeClass, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = LookupClass(c);
    return t;
  }();
  return table;
}

}  // namespace

UnicodeClass GetUnicodeClass(uint32_t cp) {
  if (cp < 128) return AsciiClasses()[cp];
  return LookupClass(cp);
}

bool IsUnicodeAssigned(uint32_t cp) { return FindRun(cp) != nullptr; }

bool IsUnicodeWhitespace(uint32_t cp) {
  if (cp < 128) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  const auto* end = std::end(kWhitespace);
  const auto* it = std::upper_bound(std::begin(kWhitespace), end, cp,
                                    [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  if (it == std::begin(kWhitespace)) return false;
  --it;
  return cp <= it->last;
}

uint32_t UnicodeToLower(uint32_t cp) {
  if (cp < 128) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const auto* end = std::end(kLowercase);
  const auto* it = std::lower_bound(std::begin(kLowercase), end, cp,
                                    [](const CodepointPair& p, uint32_t v) { return p.from < v; });
  return (it != end && it->from == cp) ? it->to : cp;
}

}  // namespace llm
