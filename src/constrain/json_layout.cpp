#include "constrain/json_layout.h"

namespace llm::constrain {

bool JsonLayout::Step(LayoutLex* l, std::string_view bytes) {
  for (char ch : bytes) {
    const auto c = static_cast<uint8_t>(ch);
    if (l->mode == 2) {
      l->mode = 1;
      continue;
    }
    if (l->mode == 1) {
      if (c == '\\') l->mode = 2;
      else if (c == '"') l->mode = 0;
      continue;
    }
    switch (c) {
      case ' ':
        if (l->run == 0) {
          l->run = 1;
        } else if (l->run == 2 && l->spaces < kIndentPerLevel * l->depth) {
          ++l->spaces;
        } else {
          return false;
        }
        break;
      case '\n':
        if (l->run != 0) return false;
        l->run = 2;
        l->spaces = 0;
        break;
      case '\t':
      case '\r':
        return false;
      default:
        l->run = 0;
        if (c == '{' || c == '[') ++l->depth;
        else if ((c == '}' || c == ']') && l->depth > 0) --l->depth;
        else if (c == '"') l->mode = 1;
        break;
    }
  }
  return true;
}

StatusOr<std::string> WithFreeWhitespace(std::string_view gbnf) {
  size_t at = 0;
  while (at < gbnf.size()) {
    const size_t eol = std::min(gbnf.find('\n', at), gbnf.size());
    if (gbnf.substr(at, eol - at).starts_with("ws ")) {
      const size_t def = gbnf.find("::=", at);
      if (def == std::string_view::npos || def > eol) break;
      std::string out(gbnf.substr(0, def));
      out += "::= [ \\t\\n\\r]*";
      out += gbnf.substr(eol);
      return out;
    }
    at = eol + 1;
  }
  return InternalError("the JSON grammar has no `ws` rule to free");
}

}  // namespace llm::constrain
