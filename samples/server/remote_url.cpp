#include "remote_url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace server {

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// RFC 3986's characters of a path and query, '%' escapes apart.
bool IsTargetChar(char c) { return IsAlnum(c) || std::strchr("-._~!$&'()*+,;=:@/?", c) != nullptr; }

bool Fail(std::string* problem, const char* why) {
  *problem = why;
  return false;
}

// A host name: dot-separated labels of letters, digits, '-' and '_', each
// 1..63 bytes, 253 in all.
bool ValidHostName(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  size_t label = 0;
  for (char c : h) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (IsAlnum(c) || c == '-' || c == '_') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label > 0;
}

bool V4IsPublic(const uint8_t a[4], std::string* why) {
  struct Range {
    uint8_t b0, b1, bits;
    const char* kind;
  };
  // first bytes, prefix length, kind
  static const Range kRefused[] = {
      {0, 0, 8, "unspecified"},        {10, 0, 8, "private"},     {100, 64, 10, "shared (carrier-grade NAT)"},
      {127, 0, 8, "loopback"},         {169, 254, 16, "link-local"}, {172, 16, 12, "private"},
      {192, 0, 24, "reserved"},        {192, 168, 16, "private"}, {198, 18, 15, "reserved (benchmarking)"},
      {224, 0, 4, "multicast"},        {240, 0, 4, "reserved"},
  };
  const uint32_t v = (uint32_t{a[0]} << 24) | (uint32_t{a[1]} << 16) | (uint32_t{a[2]} << 8) | a[3];
  for (const Range& r : kRefused) {
    const uint32_t net = (uint32_t{r.b0} << 24) | (uint32_t{r.b1} << 16);
    const uint32_t mask = ~uint32_t{0} << (32 - r.bits);
    if ((v & mask) == (net & mask)) {
      *why = r.kind;
      return false;
    }
  }
  return true;
}

bool V6IsPublic(const uint8_t a[16], std::string* why) {
  static const uint8_t kZero[16] = {};
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a, kZero, 15) == 0 && (a[15] == 0 || a[15] == 1)) {
    *why = a[15] == 0 ? "unspecified" : "loopback";
    return false;
  }
  // IPv4 inside: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64
  // (64:ff9b::a.b.c.d), 6to4 (2002:aabb:ccdd::)
  if (std::memcmp(a, kMapped, 12) == 0 || std::memcmp(a, kZero, 12) == 0 || std::memcmp(a, kNat64, 12) == 0)
    return V4IsPublic(a + 12, why);
  if (a[0] == 0x20 && a[1] == 0x02) return V4IsPublic(a + 2, why);
  if ((a[0] & 0xfe) == 0xfc) return (*why = "private (unique local)", false);
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return (*why = "link-local", false);
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return (*why = "site-local", false);
  if (a[0] == 0xff) return (*why = "multicast", false);
  return true;
}

}  // namespace

std::string RemoteUrl::Text() const {
  std::string s = https ? "https://" : "http://";
  s += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (https ? 443 : 80)) s += ":" + std::to_string(port);
  return s + target;
}

bool ParseRemoteUrl(std::string_view url, RemoteUrl* out, std::string* problem) {
  if (url.size() > kMaxRemoteUrlBytes) return Fail(problem, "the image URL is longer than 8192 bytes");
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f)
      return Fail(problem, "the image URL holds a space, a control or a non-ASCII byte (percent-encode it)");
  }
  const size_t colon = url.find("://");
  std::string scheme;
  for (size_t i = 0; colon != std::string_view::npos && i < colon; ++i) scheme += Lower(url[i]);
  if (scheme != "http" && scheme != "https")
    return Fail(problem, "only http:// and https:// image URLs are fetched");
  RemoteUrl r;
  r.https = scheme == "https";
  std::string_view rest = url.substr(colon + 3);
  rest = rest.substr(0, rest.find('#'));
  const size_t auth_end = std::min(rest.find('/'), rest.find('?'));
  std::string_view auth = rest.substr(0, auth_end);
  std::string_view target = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);
  if (auth.find('@') != std::string_view::npos)
    return Fail(problem, "image URLs with a user name or password (user@host) are refused");
  std::string_view host, port;
  bool has_port = false;
  if (!auth.empty() && auth[0] == '[') {
    const size_t close = auth.find(']');
    if (close == std::string_view::npos) return Fail(problem, "the image URL's IPv6 address has no closing ']'");
    host = auth.substr(1, close - 1);
    std::string_view after = auth.substr(close + 1);
    if (!after.empty() && after[0] != ':') return Fail(problem, "the image URL has bytes after its IPv6 address");
    has_port = !after.empty();
    if (has_port) port = after.substr(1);
    in6_addr a6;
    if (host.size() > 45 || inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1)
      return Fail(problem, "the image URL's IPv6 address does not parse (zone ids are refused)");
  } else {
    const size_t c = auth.find(':');
    host = auth.substr(0, c);
    has_port = c != std::string_view::npos;
    if (has_port) port = auth.substr(c + 1);
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    if (!ValidHostName(host))
      return Fail(problem, "the image URL's host is not a host name (letters, digits, '-', '_' and dots) or address");
  }
  r.port = r.https ? 443 : 80;
  if (has_port) {
    long n = 0;
    bool ok = !port.empty() && port.size() <= 5;
    for (size_t i = 0; ok && i < port.size(); ++i) {  // at most 5 digits: n stays far from overflow
      ok = port[i] >= '0' && port[i] <= '9';
      n = n * 10 + (port[i] - '0');
    }
    if (!ok || n < 1 || n > 65535) return Fail(problem, "the image URL's port must be a number in [1, 65535]");
    r.port = static_cast<int>(n);
  }
  r.host = CanonicalHost(host);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%') {
      if (i + 2 >= target.size() || !IsHex(target[i + 1]) || !IsHex(target[i + 2]))
        return Fail(problem, "the image URL has a '%' that is not a %XX escape");
      i += 2;
    } else if (!IsTargetChar(target[i])) {
      return Fail(problem, "the image URL holds a character a URL may not (one of \"<>\\^`{|}); percent-encode it");
    }
  }
  r.target = target.empty() ? "/" : target[0] == '?' ? "/" + std::string(target) : std::string(target);
  *out = std::move(r);
  return true;
}

bool ResolveLocation(const RemoteUrl& base, std::string_view location, std::string* url) {
  if (location.empty() || location.size() > kMaxRemoteUrlBytes) return false;
  const size_t colon = location.find(':');
  const size_t slash = location.find_first_of("/?#");
  if (colon != std::string_view::npos && colon > 0 && (slash == std::string_view::npos || colon < slash)) {
    *url = std::string(location);  // has a scheme: absolute
    return true;
  }
  const std::string origin = RemoteUrl{base.https, base.host, base.port, ""}.Text();
  if (location.size() >= 2 && location[0] == '/' && location[1] == '/') {
    *url = (base.https ? "https:" : "http:") + std::string(location);
  } else if (location[0] == '/') {
    *url = origin + std::string(location);
  } else {
    const std::string path = base.target.substr(0, base.target.find('?'));
    if (location[0] == '?') *url = origin + path + std::string(location);
    else *url = origin + path.substr(0, path.rfind('/') + 1) + std::string(location);
  }
  return url->size() <= kMaxRemoteUrlBytes;
}

std::string CanonicalHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  std::string out;
  for (char c : host) out += Lower(c);
  // one spelling of an IPv6 address ("0:0::1" and "::1" list alike)
  in6_addr a6;
  char buf[INET6_ADDRSTRLEN];
  if (out.find(':') != std::string::npos && inet_pton(AF_INET6, out.c_str(), &a6) == 1 &&
      inet_ntop(AF_INET6, &a6, buf, sizeof buf) != nullptr)
    out = buf;
  return out;
}

bool HostListed(const std::string& host, const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed)
    if (a == host) return true;
  return false;
}

bool AddressIsPublic(const std::string& ip, std::string* why) {
  uint8_t a[16];
  if (inet_pton(AF_INET, ip.c_str(), a) == 1) return V4IsPublic(a, why);
  if (inet_pton(AF_INET6, ip.c_str(), a) == 1) return V6IsPublic(a, why);
  *why = "not an address";
  return false;
}

}  // namespace server
