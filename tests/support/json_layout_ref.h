// The reference for bounded JSON whitespace (issue 29, src/constrain/
// json_layout.h), read off the whole text rather than lexed token by token:
// every blank run outside strings is "", " ", or "\n" followed by at most
// 4 spaces per container open where the run starts.
#pragma once

#include <string>

namespace llm::test {

inline bool JsonLayoutOk(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      size_t j = i;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\n' || text[j] == '\t' || text[j] == '\r')) ++j;
      const std::string run = text.substr(i, j - i);
      const bool ok = run == " " || (run[0] == '\n' && run.find_first_not_of(' ', 1) == std::string::npos &&
                                     run.size() - 1 <= static_cast<size_t>(4 * depth));
      if (!ok) return false;
      i = j;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (c == '"') in_string = true;
    ++i;
  }
  return true;
}

}  // namespace llm::test
