#include "constrain/unicode_classes.h"

#include <algorithm>

namespace llm::constrain {
namespace {

struct Category {
  const char* name;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
};

const std::vector<Category>& Table() {
  static const std::vector<Category> t = {
#include "constrain/unicode_classes.inc"
  };
  return t;
}

}  // namespace

bool UnicodeCategory(std::string_view name, std::vector<std::pair<uint32_t, uint32_t>>* out) {
  for (std::string_view prefix : {"gc=", "General_Category="})
    if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  out->clear();
  if (name == "Any") {
    out->push_back({0, 0x10FFFF});
    return true;
  }
  if (name == "ASCII") {
    out->push_back({0, 0x7F});
    return true;
  }
  if (name == "LC" || name == "L&") {
    for (const char* c : {"Lu", "Ll", "Lt"}) {
      std::vector<std::pair<uint32_t, uint32_t>> part;
      UnicodeCategory(c, &part);
      out->insert(out->end(), part.begin(), part.end());
    }
  } else {
    for (const Category& c : Table()) {
      const std::string_view n = c.name;
      if (n == name || (name.size() == 1 && n[0] == name[0])) out->insert(out->end(), c.ranges.begin(), c.ranges.end());
    }
  }
  std::sort(out->begin(), out->end());
  return !out->empty();
}

}  // namespace llm::constrain
