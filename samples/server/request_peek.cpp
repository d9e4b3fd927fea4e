#include "request_peek.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace server {
namespace {

// Case-insensitive search for `needle` (lower case) in `hay`.
size_t FindNoCase(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it == hay.end() ? std::string_view::npos : static_cast<size_t>(it - hay.begin());
}

}  // namespace

bool HttpRequestComplete(std::string_view got, size_t cap) {
  if (got.size() >= cap) return true;  // a big request: the worker reads it
  const size_t end = got.find("\r\n\r\n");
  if (end == std::string_view::npos) return false;  // the head is still arriving
  const std::string_view head = got.substr(0, end + 2);
  // A client that waits for "100 Continue" sends its body only when asked.
  if (FindNoCase(head, "\r\nexpect:") != std::string_view::npos) return true;
  const size_t cl = FindNoCase(head, "\r\ncontent-length:");
  if (cl == std::string_view::npos) return true;  // no body, or chunked: the worker reads it
  size_t at = cl + 17;
  while (at < head.size() && (head[at] == ' ' || head[at] == '\t')) ++at;
  uint64_t length = 0;
  size_t digits = 0;
  // 19 digits cannot overflow 64 bits; a longer length is over cap anyway.
  for (; at < head.size() && head[at] >= '0' && head[at] <= '9' && digits < 19; ++at, ++digits)
    length = length * 10 + static_cast<uint64_t>(head[at] - '0');
  if (digits == 0) return true;  // malformed: httplib answers it
  const uint64_t total = end + 4 + length;
  return total > cap || got.size() >= total;
}

}  // namespace server
